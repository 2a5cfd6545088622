"""Autonomy's part of the store contract: the scheduler row's `blocked` set, a
block's release in one transaction, and the usage accumulator — run on the fake, moto and
DynamoDB Local by the same modules that run contract.py."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.ports import AddUsage, Change
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.model import Task
from tenure.domain.states import EndReason, LeaseState, TaskStatus

from tests.conformance.contract import ALPHA, SPACE, ContractRig, MakeRig, make_world
from tests.conftest import ADMIN, WORKER, lease_principal


def _file(r: ContractRig, pool: str | None = None, **links: Any) -> Task:
    task, _ = r.svc.filing.create_task(
        ADMIN, SPACE, "a", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


class AutonomyContract:
    @pytest.fixture
    def r(self, make_rig: MakeRig) -> ContractRig:
        rig = make_rig()
        make_world(rig.svc)
        return rig

    def test_a_block_lands_on_the_task_row_and_the_blocked_set(self, r: ContractRig) -> None:
        task = _file(r)
        block = r.svc.blocks.block_task(ADMIN, task.id, "needs_input", "which one?")
        stored = r.store.get_task(task.id)
        assert stored is not None and stored.blocks is not None
        assert stored.blocks[block["id"]]["reason"] == "which one?"
        assert stored.block_counts == {"needs_input": 1}
        assert task.id in r.store.get_scheduler().blocked
        r.svc.blocks.clear_block(ADMIN, task.id, block["id"])
        assert task.id not in r.store.get_scheduler().blocked
        assert r.svc.graph.get_task(ADMIN, task.id).status is TaskStatus.READY

    def test_blocking_with_the_running_lease_releases_it_in_the_same_commit(
        self, r: ContractRig
    ) -> None:
        task = _file(r, pool=ALPHA)
        won = r.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None
        r.svc.reports.start(lease_principal(won.lease.id), won.lease.id)
        r.svc.blocks.block_task(lease_principal(won.lease.id), task.id, "error", "broken input")
        ended = r.store.get_lease(won.lease.id)
        assert ended is not None
        assert (ended.state, ended.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
        view = r.svc.graph.get_task(ADMIN, task.id)
        assert view.status is TaskStatus.BLOCKED
        assert view.lease is not None and view.lease.fence == won.lease.fence + 1
        assert r.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is None

    def test_the_usage_accumulator_adds_counts_and_keeps_the_cost_keys(
        self, r: ContractRig
    ) -> None:
        task = _file(r)
        for key, tokens, micros in (("USD|actual|x", 5, 10), ("EUR|actual|x", 7, 20)):
            counts = (("usage_leases", 1), ("usage_input_tokens", tokens))
            counts += (("usage_cost_micros", micros),)
            r.store.commit(Change(graph=[AddUsage(task.id, cost_key=key, counts=counts)]))
        graph = r.store.get_graph(task.id)
        assert (graph.usage_leases, graph.usage_input_tokens, graph.usage_cost_micros) == (
            2,
            12,
            30,
        )
        assert graph.usage_cost_keys == ("EUR|actual|x", "USD|actual|x")

    def test_a_completion_with_usage_sums_on_the_task(self, r: ContractRig) -> None:
        task = _file(r, pool=ALPHA)
        won = r.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None
        cost = {"amount": 0.25, "currency": "USD", "status": "actual", "source": "invoice"}
        usage = {"input_tokens": 100, "output_tokens": 20, "cost": cost}
        r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {"usage": usage})
        summed = r.svc.graph.get_task(ADMIN, task.id).usage
        assert summed is not None
        assert (summed["input_tokens"], summed["output_tokens"]) == (100, 20)
        assert (summed["total_cost"], summed["cost_status"]) == (0.25, "actual")
