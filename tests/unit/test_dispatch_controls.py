"""GET /scheduler's counts and the sweeper's starvation: only a lease a claim could
take is queued, capacity-waiting or starved — one held back by a paused subtree, an open block
or a parked task is not, by the same rule the claim gate applies."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app import dispatch_controls
from tenure.app.dispatch_controls import SchedulerStatus
from tenure.app.rows import Rows
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import Tenure, compose
from tenure.domain.model import Task
from tenure.domain.states import TaskStatus

from tests.unit.support import MEMBER, POOL, READER, SPACE, WORKER, Rig

STARVED_AFTER = 601  # past the default min_queued_age_seconds (600)
PARKED_AFTER = 600 + 3600 + 1  # past it and the default starvation_escalation_seconds


def _task(rig: Rig, pool: str | None = POOL, **links: Any) -> Task:
    task, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "t", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _counts(rig: Rig, svc: Tenure | None = None) -> tuple[int, int, int, int]:
    s: SchedulerStatus = (svc or rig.svc).scheduler.scheduler_status(READER)
    return (
        s.queued_run_count,
        s.capacity_waiting_count,
        s.starved_run_count,
        s.needs_attention_run_count,
    )


def _held_and_free(rig: Rig) -> dict[str, Task]:
    """One claimable task and one of each way a pending lease is held back."""
    free = _task(rig)
    paused = _task(rig)
    rig.svc.graph.pause_task(MEMBER, paused.id)
    root = _task(rig, pool=None)
    kid = _task(rig, parent_id=root.id)
    rig.svc.graph.pause_task(MEMBER, root.id)
    blocked = _task(rig)
    rig.svc.blocks.block_task(MEMBER, blocked.id, "needs_input", "which branch?")
    return {"free": free, "paused": paused, "kid": kid, "blocked": blocked}


def test_held_back_leases_are_neither_queued_nor_starved(rig: Rig) -> None:
    _held_and_free(rig)
    rig.advance(STARVED_AFTER)  # no worker at all: the pool is unstaffed
    assert _counts(rig) == (1, 0, 1, 0)


def test_a_fresh_process_counts_the_same_without_a_remembered_lineage(rig: Rig) -> None:
    _held_and_free(rig)
    rig.advance(STARVED_AFTER)
    cold = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    assert _counts(rig, cold) == (1, 0, 1, 0)
    assert _counts(rig, cold) == (1, 0, 1, 0)  # and again, from its lineage cache


def test_held_back_leases_are_not_capacity_waiting(rig: Rig) -> None:
    _held_and_free(rig)
    rig.svc.claims.claim(WORKER, POOL, "w-idle", None, 0, None)  # takes `free`; w-idle reachable
    _task(rig)  # a second claimable one, behind the reachable worker
    assert _counts(rig) == (1, 1, 0, 0)


def test_an_expired_transient_block_counts_as_claimable_again(rig: Rig) -> None:
    task = _task(rig)
    rig.svc.blocks.block_task(MEMBER, task.id, "transient", "rate limited", expires_in_seconds=60)
    rig.advance(30)
    assert _counts(rig)[0] == 0
    rig.advance(STARVED_AFTER)  # the block expired; the sweeper has not finalized it
    assert _counts(rig) == (1, 0, 1, 0)


def test_a_parked_run_counts_once_in_needs_attention(rig: Rig) -> None:
    task = _task(rig)
    rig.advance(STARVED_AFTER)
    assert _counts(rig) == (1, 0, 1, 0)
    rig.advance(3600)
    assert rig.sweep().parked == [task.id]
    assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.NEEDS_ATTENTION
    assert _counts(rig) == (0, 0, 0, 1)


def test_the_sweeper_parks_no_paused_or_blocked_tasks_run(rig: Rig) -> None:
    tasks = _held_and_free(rig)
    rig.advance(PARKED_AFTER)
    # A sweeper process that has read none of these leases before.
    cold = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    assert cold.scheduler.park_starved() == [tasks["free"].id]
    for name in ("paused", "kid", "blocked"):
        task = tasks[name]
        assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.BLOCKED, name
        assert "task.starvation_escalated" not in rig.types(task.id), name


def test_with_nothing_held_the_counts_read_no_lease_row(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        _task(rig)
    rig.advance(STARVED_AFTER)
    read: list[list[str]] = []
    real = rig.store.get_leases
    monkeypatch.setattr(rig.store, "get_leases", lambda ids: read.append(list(ids)) or real(ids))
    assert _counts(rig) == (3, 0, 3, 0)
    assert read == []


def test_the_hold_check_reads_a_bounded_number_of_leases_per_pool(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch_controls, "HOLD_SCAN", 3)
    paused = _task(rig)
    rig.svc.graph.pause_task(MEMBER, paused.id)
    late = [_task(rig) for _ in range(4)]
    rig.svc.graph.pause_task(MEMBER, late[-1].id)  # beyond the scan: counted as claimable
    rig.advance(STARVED_AFTER)
    read: list[list[str]] = []
    real = rig.store.get_leases
    monkeypatch.setattr(rig.store, "get_leases", lambda ids: read.append(list(ids)) or real(ids))
    cold = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    assert _counts(rig, cold) == (4, 0, 4, 0)
    assert [len(x) for x in read] == [3]
