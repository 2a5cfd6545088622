"""Operator recovery: retry chains, attempts, bulk force release / fail, inspect."""

from __future__ import annotations

import pytest
from tenure.app.inspect import NextAction
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import Forbidden, InvalidTransition, LeaseTokenMismatch, ValidationFailed
from tenure.domain.model import Lease
from tenure.domain.states import EndReason, LeaseState, TaskStatus

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease


def _failed(rig: Rig) -> Lease:
    lease = rig.running()
    return rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "boom"})


# ------------------------------------------------------------------------------- retry


def test_retry_of_a_failed_lease_opens_the_next_attempt_in_its_chain(rig: Rig) -> None:
    failed = _failed(rig)
    again = rig.svc.force.retry(MEMBER, failed.id)
    assert (again.state, again.attempt, again.retry_depth) == (LeaseState.PENDING, 2, 1)
    assert again.previous_lease_id == failed.id and again.job_id != failed.job_id
    assert "lease.retried" in rig.types(failed.task_id or "")
    with pytest.raises(InvalidTransition, match="open run"):
        rig.svc.force.retry(MEMBER, failed.id)


def test_retry_of_a_lease_still_open_or_completed_is_refused(rig: Rig) -> None:
    _, pending = rig.task()
    assert pending is not None
    with pytest.raises(InvalidTransition):
        rig.svc.force.retry(MEMBER, pending.id)
    won = rig.claim()
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    with pytest.raises(InvalidTransition):
        rig.svc.force.retry(MEMBER, done.id)
    with pytest.raises(Forbidden):
        rig.svc.force.retry(READER, done.id)


def test_a_retry_chain_deeper_than_the_instance_cap_is_refused(rig: Rig) -> None:
    rig.svc.instance.update_instance(ADMIN, {"retry_chain_cap": 2})
    lease = _failed(rig)
    for depth in (1, 2):
        lease = rig.svc.force.retry(MEMBER, lease.id)
        assert lease.retry_depth == depth
        won = rig.claim()
        lease = rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "again"})
    with pytest.raises(InvalidTransition, match="retry_chain_cap"):
        rig.svc.force.retry(MEMBER, lease.id)


def test_a_retried_run_is_exhausted_sooner_since_retries_use_attempts(rig: Rig) -> None:
    failed = _failed(rig)  # attempt 1 of 3
    rig.svc.force.retry(MEMBER, failed.id)  # attempt 2
    rig.claim()
    rig.advance(600)
    rig.sweep()  # claims so far 2 + 0 < 3: requeued
    task = rig.svc.graph.get_task(READER, failed.task_id or "")
    assert task.status is TaskStatus.QUEUED
    rig.claim()  # the third claim in all
    for _ in range(10):  # the sweeper's minute by minute (a longer gap is its own absence)
        rig.advance(60)
        rig.sweep()  # then 2 + 1 >= 3: exhausted
    task = rig.svc.graph.get_task(READER, failed.task_id or "")
    assert task.status is TaskStatus.NEEDS_ATTENTION
    assert "task.run.lease_recovery_exhausted" in rig.types(task.task.id)
    assert rig.svc.scheduler.scheduler_status(READER).needs_attention_run_count == 1


def test_retry_recovers_an_exhausted_task(rig: Rig) -> None:
    rig.running(max_attempts=1)
    rig.advance(600)
    rig.sweep()
    lost = next(x.lease for x in rig.store.lease_rows.values())
    again = rig.svc.force.retry(MEMBER, lost.id)
    view = rig.svc.graph.get_task(READER, lost.task_id or "")
    assert view.status is TaskStatus.QUEUED and again.previous_lease_id == lost.id
    assert rig.svc.scheduler.scheduler_status(READER).needs_attention_run_count == 0
    assert rig.claim().lease.id == again.id


# -------------------------------------------------------------------------- bulk force


def test_bulk_force_release_answers_one_row_per_id_in_order(rig: Rig) -> None:
    held = rig.running()
    _, pending = rig.task()
    assert pending is not None
    rows = rig.svc.force.bulk_release(MEMBER, [held.id, "lease_nope", pending.id], "handoff")
    assert [(r.lease_id, r.ok, r.code) for r in rows] == [
        (held.id, True, None),
        ("lease_nope", False, "lease_not_found"),
        (pending.id, False, "invalid_transition"),
    ]
    released = rig.lease(held.id)
    assert (released.state, released.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
    events = [e for e in rig.events(held.task_id or "") if e.type == "lease.force_released"]
    assert events[0].data["by"] == MEMBER.token_id
    # The job went back to the queue with the same attempt.
    job = rig.store.get_job(held.job_id)
    assert job is not None and job.fence == 2
    successor = rig.lease(job.lease_id)
    assert (successor.state, successor.attempt) == (LeaseState.PENDING, 1)


def test_bulk_force_fail_records_operator_forced_and_needs_a_reason(rig: Rig) -> None:
    held = rig.running()
    with pytest.raises(ValidationFailed, match="reason"):
        rig.svc.force.bulk_fail(MEMBER, [held.id], " ")
    rows = rig.svc.force.bulk_fail(MEMBER, [held.id, held.id], "credentials revoked")
    assert [(r.ok, r.code) for r in rows] == [(True, None), (False, "invalid_transition")]
    failed = rig.lease(held.id)
    assert (failed.state, failed.failure_kind) == (LeaseState.FAILED, "operator_forced")
    event = next(e for e in rig.events(held.task_id or "") if e.type == "lease.force_failed")
    assert event.data["by"] == MEMBER.token_id and event.data["reason"] == "credentials revoked"
    # The holder's own report afterwards is refused; the lease stays failed.
    with pytest.raises(InvalidTransition):
        rig.svc.reports.complete(as_lease(held.id), held.id, {})


def test_agents_force_only_when_the_instance_allows_it(rig: Rig) -> None:
    held = rig.running()
    with pytest.raises(Forbidden):
        rig.svc.force.bulk_release(WORKER, [held.id], None)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.force.bulk_release(as_lease(held.id), [held.id], None)
    with pytest.raises(Forbidden):
        rig.svc.force.bulk_release(READER, [held.id], None)
    rig.svc.instance.update_instance(ADMIN, {"allow_agent_force": True})
    rows = rig.svc.force.bulk_release(WORKER, [held.id], "stuck")
    assert rows[0].ok
    with pytest.raises(ValidationFailed, match="lease_ids"):
        rig.svc.force.bulk_fail(MEMBER, [], "x")


# ------------------------------------------------------------------------------ inspect


def test_inspect_of_a_queued_task_with_a_worker_says_claim_available(rig: Rig) -> None:
    rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None)  # a worker seen (nothing to claim yet)
    task, lease = rig.task()
    assert lease is not None
    shot = rig.svc.inspection.inspect(READER, task.id)
    assert shot.next_action is NextAction.CLAIM_AVAILABLE
    assert shot.current_lease is not None and shot.current_lease.id == lease.id
    assert rig.svc.inspection.inspect(READER, lease.id).next_action is NextAction.CLAIM_AVAILABLE


def test_inspect_of_queued_work_with_no_worker_waits_for_a_session(rig: Rig) -> None:
    task, _ = rig.task()
    assert rig.svc.inspection.inspect(READER, task.id).next_action is NextAction.WAITING_FOR_SESSION


def test_inspect_of_a_held_lease_past_its_deadline_says_stranded(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(600)
    shot = rig.svc.inspection.inspect(READER, lease.id)
    assert shot.next_action is NextAction.STRANDED
    assert shot.facts["deadline_passed"] is True
    truncated = shot.facts["claim_token_hash_truncated"]
    assert isinstance(truncated, str) and len(truncated) == 8


def test_inspect_of_a_running_lease_says_running(rig: Rig) -> None:
    lease = rig.running()
    shot = rig.svc.inspection.inspect(READER, lease.task_id or "")
    assert shot.next_action is NextAction.RUNNING
    assert [x.id for x in shot.recent_leases] == [lease.id]
    assert shot.recent_events and shot.recent_events[0].type == "lease.started"


def test_inspect_of_a_failed_run_says_recovery_required(rig: Rig) -> None:
    failed = _failed(rig)
    assert rig.svc.inspection.inspect(READER, failed.id).next_action is NextAction.RECOVERY_REQUIRED


def test_inspect_of_a_completed_task_says_terminal(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    shot = rig.svc.inspection.inspect(READER, lease.task_id or "")
    assert shot.next_action is NextAction.TERMINAL
    assert shot.task is not None and shot.task.status is TaskStatus.COMPLETED


def test_inspect_shows_the_pause_that_holds_a_task(rig: Rig) -> None:
    parent, _ = rig.svc.filing.create_task(MEMBER, SPACE, "p", None, None, {}, None, None)
    kid, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "k", None, None, {}, POOL, None, links=TaskLinks(parent_id=parent.id)
    )
    rig.svc.graph.pause_task(MEMBER, parent.id)
    shot = rig.svc.inspection.inspect(READER, kid.id)
    assert shot.scheduler["paused_by_task_id"] == parent.id
    assert shot.next_action is NextAction.WAITING_FOR_SESSION
