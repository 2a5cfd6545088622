"""What flows between tasks — a payload's inputs, event waits — as part of the store contract,
run on the fake, moto and DynamoDB Local by the same modules that run contract.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.model import Task

from tests.conformance.contract import ALPHA, SPACE, ContractRig, MakeRig, make_world
from tests.conftest import ADMIN, WORKER, lease_principal


def _file(r: ContractRig, title: str, **links: Any) -> Task:
    task, _ = r.svc.filing.create_task(
        ADMIN, SPACE, title, None, None, {}, None, None, links=TaskLinks(**links)
    )
    return task


def _claim(r: ContractRig, task: Task) -> str:
    lease = r.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    won = r.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.id == lease.id
    return lease.id


class FlowContract:
    @pytest.fixture
    def r(self, make_rig: MakeRig) -> ContractRig:
        rig = make_rig()
        make_world(rig.svc)
        return rig

    def test_inputs_carry_dependencies_then_the_newest_children_with_their_results(
        self, r: ContractRig
    ) -> None:
        blocker = _file(r, "blocker")
        lease_id = _claim(r, blocker)
        r.svc.reports.complete(
            lease_principal(lease_id), lease_id, {"outcome": "success", "result": {"n": 1}}
        )
        r.drain()
        parent = _file(r, "parent", depends_on=(blocker.id,))
        kids = []
        for n in range(3):
            time.sleep(0.002)  # ids order by the millisecond they were made in
            kids.append(_file(r, f"kid {n}", parent_id=parent.id))
        marked = r.store.get_task(parent.id)
        assert marked is not None and marked.has_children is True
        assert r.store.newest_children(parent.id, 2) == [kids[2].id, kids[1].id]
        found = r.store.task_entries([blocker.id, kids[0].id, "task_missing"])
        assert set(found) == {blocker.id, kids[0].id}
        done = found[blocker.id].lease
        assert done is not None and (done.report or {}).get("result") == {"n": 1}
        assert found[kids[0].id].lease is None  # never enqueued
        held = _claim(r, parent)
        bundle = r.svc.payloads.payload(lease_principal(held), held)
        assert [(i["task_id"], i["result"]) for i in bundle["inputs"]] == [
            (blocker.id, {"n": 1}),
            *((k.id, None) for k in reversed(kids)),
        ]
