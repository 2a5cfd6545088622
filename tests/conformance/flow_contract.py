"""What flows between tasks — a payload's inputs, event waits — as part of the store contract,
run on the fake, moto and DynamoDB Local by the same modules that run contract.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.events import TaskSucceeded
from tenure.domain.model import KeptEvent, Task

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

    def test_a_rerun_hands_on_the_last_successful_result_and_a_replay_moves_nothing(
        self, r: ContractRig
    ) -> None:
        blocker = _file(r, "blocker")
        never = _file(r, "never")
        first = _claim(r, blocker)
        r.svc.reports.complete(
            lease_principal(first), first, {"outcome": "success", "result": {"run": 1}}
        )
        r.drain()
        # Linked to nothing yet, the task keeps its success on its lease (no graph row).
        assert r.store.get_graph(blocker.id).succeeded_lease is None
        time.sleep(0.002)  # lease ids order by the millisecond they were made in
        second = _claim(r, blocker)  # run again after its success; this run fails
        # The new run copied the success, naming its lease, to the graph row first.
        assert r.store.get_graph(blocker.id).succeeded_lease == first
        r.svc.reports.complete(
            lease_principal(second), second, {"outcome": "failure", "result": {"run": 2}}
        )
        failed = _claim(r, never)
        r.svc.reports.complete(
            lease_principal(failed), failed, {"outcome": "failure", "result": {"run": 1}}
        )
        r.drain()
        assert r.store.get_graph(blocker.id).succeeded_lease == first
        waiting = _file(r, "waiting", depends_on=(blocker.id, never.id))
        held = _claim(r, waiting)
        bundle = r.svc.payloads.payload(lease_principal(held), held)
        assert [(i["task_id"], i["result"]) for i in bundle["inputs"]] == [
            (blocker.id, {"run": 1}),
            (never.id, None),
        ]
        time.sleep(0.002)
        third = _claim(r, blocker)  # a third run succeeds: it is the last success now
        r.svc.reports.complete(
            lease_principal(third), third, {"outcome": "success", "result": {"run": 3}}
        )
        r.drain()
        assert r.store.get_graph(blocker.id).succeeded_lease == third
        older = r.store.get_lease(first)
        assert older is not None
        r.svc.graph.after_lease(TaskSucceeded(older), r.svc.reactions.context())  # a replay
        assert r.store.get_graph(blocker.id).succeeded_lease == third

    def test_event_wait_rows_keep_each_signal_apart_and_page_in_order(self, r: ContractRig) -> None:
        store = r.store
        store.put_event_wait(SPACE, "a#b", "c", "task_2", "blk_2")
        store.put_event_wait(SPACE, "a#b", "c", "task_1", "blk_1")
        store.put_event_wait(SPACE, "a", "b#c", "task_3", "blk_3")  # spelt alike, another pair
        store.put_event_wait("SEC", "a#b", "c", "task_4", "blk_4")  # another space
        assert store.event_waits(SPACE, "a#b", "c", 10) == [
            ("task_1", "blk_1"),
            ("task_2", "blk_2"),
        ]
        assert store.event_waits(SPACE, "a#b", "c", 1) == [("task_1", "blk_1")]
        assert store.event_waits(SPACE, "a", "b#c", 10) == [("task_3", "blk_3")]
        store.drop_event_wait(SPACE, "a#b", "c", "task_1", "blk_1")
        store.drop_event_wait(SPACE, "a#b", "c", "task_1", "blk_1")  # gone already: fine
        assert store.event_waits(SPACE, "a#b", "c", 10) == [("task_2", "blk_2")]

    def test_a_kept_event_reads_back_as_sent_and_the_last_one_wins(self, r: ContractRig) -> None:
        data = {"n": 1.5, "list": [1, "two", None], "deep": {"ok": True}}
        first = KeptEvent(SPACE, "deploy", "v1", 1_000, 3_601_000, data, "tok_1")
        r.store.put_kept_event(first)
        assert r.store.kept_event(SPACE, "deploy", "v1") == first
        assert r.store.kept_event(SPACE, "deploy", "v2") is None
        second = KeptEvent(SPACE, "deploy", "v1", 2_000, 3_602_000, [1], None)
        r.store.put_kept_event(second)
        assert r.store.kept_event(SPACE, "deploy", "v1") == second

    def test_an_event_clears_a_waiting_block_and_its_payload_carries_it(
        self, r: ContractRig
    ) -> None:
        task = _file(r, "waiting")
        block = r.svc.event_waits.block(ADMIN, task.id, "event", None, event="go", key="k1")
        assert block["state"] == "open"
        assert r.svc.event_waits.send(ADMIN, SPACE, "go", "k1", {"v": 2}) == 1
        r.drain()
        held = _claim(r, task)
        bundle = r.svc.payloads.payload(lease_principal(held), held)
        assert [(e["name"], e["key"], e["data"]) for e in bundle["events"]] == [
            ("go", "k1", {"v": 2})
        ]
        assert r.store.event_waits(SPACE, "go", "k1", 5) == []
