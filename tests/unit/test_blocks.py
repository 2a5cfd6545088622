"""Typed blocks, the breaker and recover, on the fake store."""

from __future__ import annotations

import pytest
from tenure.api.models import BlockOut
from tenure.api.views import iso
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import (
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    ValidationFailed,
)
from tenure.domain.model import Task
from tenure.domain.states import EndReason, LeaseState, TaskStatus
from tenure.store import items
from tenure.store.codec import dump
from tenure.triggers.stream import process

from tests.unit.fake_store import FakeStore
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, T0, WORKER, Rig, as_lease, shaped


def _task(rig: Rig, pool: str | None = None, auto: bool = False) -> Task:
    task, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "t", None, None, {}, pool, None, links=TaskLinks(auto_enqueue_on_ready=auto)
    )
    return task


def _view(rig: Rig, task: Task):  # type: ignore[no-untyped-def]
    return rig.svc.graph.get_task(READER, task.id)


def test_a_block_shows_as_a_reason_and_the_task_is_blocked(rig: Rig) -> None:
    task = _task(rig)
    block = rig.svc.blocks.block_task(MEMBER, task.id, "needs_input", "which branch?")
    view = _view(rig, task)
    assert view.status is TaskStatus.BLOCKED
    assert view.blocked_reasons == (
        {
            "source": "block",
            "block_id": block["id"],
            "kind": "needs_input",
            "reason": "which branch?",
        },
    )
    assert "task.blocked" in rig.types(task.id)


def test_several_open_blocks_and_the_list_with_all(rig: Rig) -> None:
    task = _task(rig)
    a = rig.svc.blocks.block_task(MEMBER, task.id, "needs_input", "a")
    b = rig.svc.blocks.block_task(MEMBER, task.id, "error", "b")
    assert [x["id"] for x in rig.svc.blocks.list_blocks(READER, task.id)] == [a["id"], b["id"]]
    rig.svc.blocks.clear_block(MEMBER, task.id, a["id"], "answered")
    assert [x["id"] for x in rig.svc.blocks.list_blocks(READER, task.id)] == [b["id"]]
    every = rig.svc.blocks.list_blocks(READER, task.id, all=True)
    assert [(x["id"], x["state"]) for x in every] == [(a["id"], "cleared"), (b["id"], "open")]
    assert _view(rig, task).status is TaskStatus.BLOCKED


def test_a_blocked_tasks_pending_lease_is_not_claimed_until_the_block_clears(rig: Rig) -> None:
    task = _task(rig)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    block = rig.svc.blocks.block_task(MEMBER, task.id, "dependency_external", "vendor down")
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1", 0, None) is None
    rig.svc.blocks.clear_block(MEMBER, task.id, block["id"])
    assert rig.claim().lease.id == lease.id


def test_a_transient_block_stops_counting_the_instant_it_expires(rig: Rig) -> None:
    task = _task(rig)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    rig.svc.blocks.block_task(MEMBER, task.id, "transient", "rate limited", expires_in_seconds=60)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1", 0, None) is None
    rig.advance(61)
    assert _view(rig, task).blocked_reasons == ()
    assert rig.claim().lease.id == lease.id
    # The sweeper finalizes it later.
    report = rig.sweep()
    assert report.unblocked == [task.id]
    assert [b["state"] for b in rig.svc.blocks.list_blocks(READER, task.id, all=True)] == [
        "expired"
    ]
    assert task.id not in rig.store.get_scheduler().blocked


def test_block_times_read_as_iso_8601_like_every_other_api_time(rig: Rig) -> None:
    task = _task(rig)
    placed = rig.svc.blocks.block_task(MEMBER, task.id, "transient", "wait", expires_in_seconds=60)
    assert (placed["created_at"], placed["expires_at"]) == (iso(T0), iso(T0 + 60_000))
    other = rig.svc.blocks.block_task(MEMBER, task.id, "error", "x")
    rig.advance(5)
    cleared = rig.svc.blocks.clear_block(MEMBER, task.id, other["id"])
    assert cleared["closed_at"] == iso(T0 + 5_000) == "2026-01-01T00:00:05.000Z"
    rig.advance(60)  # the transient one reads as expired, closed when it expired
    shown = {b["id"]: b for b in rig.svc.blocks.list_blocks(READER, task.id, all=True)}
    assert shown[placed["id"]]["closed_at"] == iso(T0 + 60_000)
    for block in shown.values():
        shaped(BlockOut, block)  # the OpenAPI model holds what is served


def test_only_a_transient_block_expires(rig: Rig) -> None:
    task = _task(rig)
    with pytest.raises(ValidationFailed):
        rig.svc.blocks.block_task(MEMBER, task.id, "error", "x", expires_in_seconds=60)


def test_blocking_with_the_running_leases_token_releases_it_in_the_same_change(rig: Rig) -> None:
    running = rig.running()
    task_id = running.task_id
    assert task_id is not None
    block = rig.svc.blocks.block_task(as_lease(running.id), task_id, "needs_input", "need a key")
    released = rig.lease(running.id)
    assert (released.state, released.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
    view = rig.svc.graph.get_task(READER, task_id)
    assert view.status is TaskStatus.BLOCKED
    parked = view.lease
    assert parked is not None and parked.state is LeaseState.PENDING
    assert parked.attempt == running.attempt  # no attempt used
    assert "task.run_released" in rig.types(task_id)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1", 0, None) is None
    rig.svc.blocks.clear_block(MEMBER, task_id, block["id"])
    assert rig.claim().lease.id == parked.id


def test_a_lease_token_may_block_only_its_own_task(rig: Rig) -> None:
    running = rig.running()
    other = _task(rig)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.blocks.block_task(as_lease(running.id), other.id, "error", "x")


def test_clearing_the_last_block_auto_enqueues_an_opted_in_task_once(rig: Rig) -> None:
    task = _task(rig, pool=None, auto=True)
    rig.svc.graph.update_task(MEMBER, task.id, True, POOL)
    first = _view(rig, task).lease
    assert first is not None  # enqueued at once (ready and opted in)
    rig.svc.operator.cancel(MEMBER, first.id)
    a = rig.svc.blocks.block_task(MEMBER, task.id, "needs_input", "a")
    b = rig.svc.blocks.block_task(MEMBER, task.id, "error", "b")
    rig.svc.blocks.clear_block(MEMBER, task.id, a["id"])
    assert _view(rig, task).lease is None
    rig.svc.blocks.clear_block(MEMBER, task.id, b["id"])
    resumed = _view(rig, task).lease
    assert resumed is not None and resumed.state is LeaseState.PENDING
    # Clearing again is a no-op: still one open run.
    rig.svc.blocks.clear_block(MEMBER, task.id, b["id"])
    assert _view(rig, task).lease == resumed


def test_the_second_block_of_a_kind_escalates_and_recover_resumes(rig: Rig) -> None:
    task = _task(rig)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    first = rig.svc.blocks.block_task(MEMBER, task.id, "error", "flaky")
    rig.svc.blocks.clear_block(MEMBER, task.id, first["id"])
    rig.svc.blocks.block_task(MEMBER, task.id, "needs_input", "other kind does not count")
    assert _view(rig, task).status is TaskStatus.BLOCKED
    rig.svc.blocks.block_task(MEMBER, task.id, "error", "flaky again")
    assert _view(rig, task).status is TaskStatus.NEEDS_ATTENTION
    assert "task.escalated" in rig.types(task.id)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1", 0, None) is None
    view = rig.svc.breaker.recover_task(MEMBER, task.id, "fixed the config")
    assert view.status is TaskStatus.QUEUED
    assert view.blocked_reasons == ()
    closed = rig.svc.blocks.list_blocks(READER, task.id, all=True)
    assert {b["closed_by"] for b in closed if b["id"] != first["id"]} == {"recover"}
    scheduler = rig.store.get_scheduler()
    assert task.id not in scheduler.attention and task.id not in scheduler.blocked
    assert rig.claim().lease.id == lease.id


def test_recover_on_a_task_not_escalated_is_an_invalid_transition(rig: Rig) -> None:
    task = _task(rig)
    with pytest.raises(InvalidTransition):
        rig.svc.breaker.recover_task(MEMBER, task.id, None)


def test_a_zero_limit_disables_the_breaker(rig: Rig) -> None:
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 0})
    rig.advance(60)  # past the instance's in-process cache
    task = _task(rig)
    for _ in range(3):
        rig.svc.blocks.block_task(MEMBER, task.id, "error", "again")
    assert _view(rig, task).status is TaskStatus.BLOCKED


def test_a_success_resets_the_count(rig: Rig) -> None:
    task = _task(rig)
    block = rig.svc.blocks.block_task(MEMBER, task.id, "error", "once")
    rig.svc.blocks.clear_block(MEMBER, task.id, block["id"])
    rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    won = rig.claim()
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    assert rig.store.get_task(task.id).block_counts is None  # type: ignore[union-attr]
    rig.svc.blocks.block_task(MEMBER, task.id, "error", "a new first")
    assert _view(rig, task).status is not TaskStatus.NEEDS_ATTENTION


def test_a_block_records_who_placed_it(rig: Rig) -> None:
    running = rig.running()
    task_id = running.task_id
    assert task_id is not None
    by_operator = rig.svc.blocks.block_task(MEMBER, task_id, "error", "look at it")
    by_lease = rig.svc.blocks.block_task(as_lease(running.id), task_id, "needs_input", "a key")
    assert by_operator["placed_by"] == {"kind": "operator", "id": MEMBER.token_id}
    assert by_lease["placed_by"] == {"kind": "lease", "id": running.id}
    shaped(BlockOut, by_lease)


def test_a_lease_token_cannot_clear_an_operators_block_and_requeue_its_task(rig: Rig) -> None:
    running = rig.running()
    task_id = running.task_id
    assert task_id is not None
    held = rig.svc.blocks.block_task(MEMBER, task_id, "needs_input", "wait for legal")
    with pytest.raises(Forbidden):
        rig.svc.blocks.clear_block(as_lease(running.id), task_id, held["id"])
    (block,) = rig.svc.blocks.list_blocks(READER, task_id)
    assert block["state"] == "open"
    # Its run, released, waits behind the operator's block: nothing requeued it.
    rig.svc.reports.release(as_lease(running.id), running.id, {})
    assert rig.svc.graph.get_task(READER, task_id).status is TaskStatus.BLOCKED
    assert rig.svc.claims.claim(WORKER, POOL, "w2", "c2", 0, None) is None


def test_a_lease_token_clears_a_block_an_earlier_run_of_its_task_placed(rig: Rig) -> None:
    first = rig.running()
    task_id = first.task_id
    assert task_id is not None
    earlier = rig.svc.blocks.block_task(
        as_lease(first.id), task_id, "transient", "rate limited", expires_in_seconds=60
    )
    rig.advance(61)
    second = rig.claim("w2").lease
    assert second.task_id == task_id and second.id != first.id
    cleared = rig.svc.blocks.clear_block(as_lease(second.id), task_id, earlier["id"])
    assert cleared["state"] == "cleared"


def test_a_block_by_the_running_lease_that_escalates_records_the_release_and_the_escalation(
    rig: Rig,
) -> None:
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 1})
    running = rig.running()
    task_id = running.task_id
    assert task_id is not None
    rig.svc.blocks.block_task(as_lease(running.id), task_id, "needs_input", "need a key")
    assert rig.lease(running.id).end_reason is EndReason.RELEASED
    assert rig.svc.graph.get_task(READER, task_id).status is TaskStatus.NEEDS_ATTENTION
    types = rig.types(task_id)
    assert types.count("task.run_released") == 1 and types.count("task.escalated") == 1
    [released] = [e for e in rig.events(task_id) if e.type == "task.run_released"]
    assert released.data["released_lease_id"] == running.id
    # The reactor, from the task row's stream record, writes both, and a replay neither again.
    task = rig.store.get_task(task_id)
    assert task is not None
    record = {
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"SequenceNumber": "1", "NewImage": dump(items.task_item(task))},
    }
    reactor_store = FakeStore()
    for _ in range(2):
        process(reactor_store, rig.svc, record)
    written = [e.type for e in reactor_store.timeline("task", task_id, None)]
    assert sorted(written) == ["task.escalated", "task.run_released"]
