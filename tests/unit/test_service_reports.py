"""Final reports: complete, fail, release; replays and stale reports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure.api.views import lease_view
from tenure.domain.errors import (
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    StaleLease,
    ValidationFailed,
)
from tenure.domain.model import Job, Lease
from tenure.domain.states import EndReason, LeaseState, ReportKind, TaskStatus

from tests.unit.support import MEMBER, POOL, READER, Rig, as_lease


def _answer(lease: Lease) -> str:
    """What the HTTP API sends for a lease, as bytes are compared."""
    return json.dumps({"lease": lease_view(lease)})


def _report(rig: Rig, kind: str, lease: Lease, body: dict[str, Any]) -> Lease:
    ended: Lease = getattr(rig.svc.reports, kind)(as_lease(lease.id), lease.id, body)
    return ended


def _stale_reports(rig: Rig, lease: Lease) -> list[dict[str, Any]]:
    return [
        e.data
        for e in rig.events(lease.task_id or "")
        if e.type == "lease.stale_report" and e.lease_id == lease.id
    ]


def test_complete_with_success_ends_the_lease_completed(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(30)
    done = rig.svc.reports.complete(
        as_lease(lease.id), lease.id, {"outcome": "success", "result": {"summary": "ok"}}
    )
    assert (done.state, done.end_reason, done.outcome) == (
        LeaseState.COMPLETED,
        EndReason.COMPLETED,
        "success",
    )
    assert done.ended_at == rig.clock.now_ms()
    assert rig.lease(lease.id).state is LeaseState.COMPLETED
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.COMPLETED
    ended = rig.events(lease.task_id or "")[-1]
    assert ended.type == "lease.completed"
    assert (ended.data["outcome"], ended.data["result"]) == ("success", {"summary": "ok"})
    assert rig.store.due_leases(POOL, None) == []


def test_complete_with_failure_ends_the_lease_failed(rig: Rig) -> None:
    lease = rig.running()
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "failure"})
    assert (done.state, done.end_reason, done.outcome) == (
        LeaseState.FAILED,
        EndReason.FAILED,
        "failure",
    )
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.FAILED
    assert rig.types(lease.task_id or "")[-1] == "lease.failed"


def test_fail_ends_the_lease_failed_and_records_the_error(rig: Rig) -> None:
    lease = rig.running()
    done = rig.svc.reports.fail(
        as_lease(lease.id), lease.id, {"error": "tests failed", "metadata": {}}
    )
    assert (done.state, done.end_reason) == (LeaseState.FAILED, EndReason.FAILED)
    assert done.report_kind is ReportKind.FAIL
    assert rig.lease(lease.id).report == {"error": "tests failed", "metadata": {}}
    ended = rig.events(lease.task_id or "")[-1]
    assert (ended.type, ended.data["error"]) == ("lease.failed", "tests failed")


@pytest.mark.parametrize("how", ["dispatched", "paused"])
def test_a_held_lease_completes_from_dispatched_and_from_paused(rig: Rig, how: str) -> None:
    if how == "dispatched":
        lease = rig.claimed().lease
    else:
        lease = rig.running()
        rig.svc.operator.pause(MEMBER, lease.id)
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert done.state is LeaseState.COMPLETED
    assert rig.lease(lease.id).state is LeaseState.COMPLETED


def test_release_cancels_the_lease_and_requeues_its_job_under_fence_plus_one(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(5)
    done = rig.svc.reports.release(as_lease(lease.id), lease.id, {"reason": "handoff"})
    assert (done.state, done.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
    job = rig.store.get_job(lease.job_id)
    assert job is not None
    assert (job.fence, job.attempt, job.recovery_count) == (2, 1, 0)
    successor = rig.lease(job.lease_id)
    assert successor.id != lease.id
    assert (successor.state, successor.fence, successor.attempt, successor.job_id) == (
        LeaseState.PENDING,
        2,
        lease.attempt,
        lease.job_id,
    )
    assert rig.store.queue_candidates(POOL, 10) == [successor.id]
    seen = rig.svc.graph.get_task(READER, lease.task_id or "")
    assert (seen.status, seen.lease) == (TaskStatus.QUEUED, successor)
    tail = rig.events(lease.task_id or "")[-2:]
    assert [(e.type, e.lease_id, e.fence) for e in tail] == [
        ("lease.released", lease.id, 1),
        ("lease.created", successor.id, 2),
    ]
    assert tail[0].data["reason"] == "handoff"
    assert tail[1].data["previous_lease_id"] == lease.id


def test_a_released_job_is_claimed_again_without_using_an_attempt(rig: Rig) -> None:
    lease = rig.running("w1")
    rig.svc.reports.release(as_lease(lease.id), lease.id, {})
    again = rig.claim("w2").lease
    assert (again.fence, again.attempt, again.worker_id) == (2, 1, "w2")


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("complete", {"outcome": "success", "details": {"a": 1, "b": [1, 2]}}),
        ("complete", {"outcome": "failure"}),
        ("fail", {"error": "boom", "metadata": {"exit": 2}}),
        ("release", {"reason": "handoff"}),
        ("release", {}),
    ],
)
def test_the_same_final_report_twice_returns_the_first_answer_and_changes_nothing(
    rig: Rig, kind: str, body: dict[str, Any]
) -> None:
    lease = rig.running()
    first = _report(rig, kind, lease, body)
    stored, events, jobs = (
        rig.lease(lease.id),
        rig.events(lease.task_id or ""),
        dict(rig.store.jobs),
    )
    rig.advance(60)
    again = _report(rig, kind, lease, dict(reversed(list(body.items()))))
    assert _answer(again) == _answer(first)
    assert rig.lease(lease.id) == stored
    assert rig.events(lease.task_id or "") == events
    assert rig.store.jobs == jobs


def test_the_same_report_id_with_another_body_returns_the_first_answer(rig: Rig) -> None:
    lease = rig.running()
    first = rig.svc.reports.complete(
        as_lease(lease.id), lease.id, {"outcome": "success", "report_id": "r-1"}
    )
    again = rig.svc.reports.complete(
        as_lease(lease.id), lease.id, {"outcome": "failure", "report_id": "r-1"}
    )
    assert _answer(again) == _answer(first)
    assert rig.lease(lease.id).outcome == "success"
    assert rig.types(lease.task_id or "").count("lease.completed") == 1


def test_a_different_final_report_on_an_ended_lease_is_an_invalid_transition(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    stored = rig.lease(lease.id)
    with pytest.raises(InvalidTransition):
        rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "late"})
    with pytest.raises(InvalidTransition):
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "failure"})
    with pytest.raises(InvalidTransition):
        rig.svc.reports.release(as_lease(lease.id), lease.id, {})
    assert rig.lease(lease.id) == stored


def test_complete_with_old_fence_is_refused_and_recorded(rig: Rig) -> None:
    first = rig.running("w1")
    rig.svc.reports.release(as_lease(first.id), first.id, {})
    current = rig.claim("w2").lease
    assert current.fence == 2
    with pytest.raises(StaleLease):
        rig.svc.reports.complete(
            as_lease(current.id), current.id, {"outcome": "success", "fence": 1}
        )
    assert rig.lease(current.id).state is LeaseState.DISPATCHED
    assert _stale_reports(rig, current) == [{"report": "complete", "fence": 1}]
    ok = rig.svc.reports.complete(
        as_lease(current.id), current.id, {"outcome": "success", "fence": 2}
    )
    assert ok.state is LeaseState.COMPLETED


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("complete", {"outcome": "success"}),
        ("fail", {"error": "late"}),
        ("release", {"reason": "late"}),
    ],
)
def test_any_final_report_on_a_released_lease_other_than_its_replay_is_stale(
    rig: Rig, kind: str, body: dict[str, Any]
) -> None:
    lease = rig.running()
    rig.svc.reports.release(as_lease(lease.id), lease.id, {"reason": "handoff"})
    stored = rig.lease(lease.id)
    with pytest.raises(StaleLease):
        _report(rig, kind, lease, body)
    assert rig.lease(lease.id) == stored
    assert len(_stale_reports(rig, lease)) == 1


@pytest.mark.parametrize("what", ["heartbeat", "start", "payload"])
def test_heartbeat_start_and_payload_on_a_released_lease_are_stale(rig: Rig, what: str) -> None:
    lease = rig.running()
    rig.svc.reports.release(as_lease(lease.id), lease.id, {})
    with pytest.raises(StaleLease):
        if what == "heartbeat":
            rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
        elif what == "start":
            rig.svc.reports.start(as_lease(lease.id), lease.id)
        else:
            rig.svc.payloads.payload(as_lease(lease.id), lease.id)
    assert [d["report"] for d in _stale_reports(rig, lease)] == [what]


def test_a_report_on_a_revoked_lease_ends_it_as_the_operator_asked(rig: Rig) -> None:
    cancelled, killed = rig.running("w1"), rig.running("w2")
    rig.svc.operator.cancel(MEMBER, cancelled.id)
    rig.svc.operator.kill(MEMBER, killed.id)
    one = rig.svc.reports.complete(as_lease(cancelled.id), cancelled.id, {"outcome": "success"})
    two = rig.svc.reports.release(as_lease(killed.id), killed.id, {})
    assert (one.state, one.end_reason) == (LeaseState.CANCELLED, EndReason.CANCELLED)
    assert (two.state, two.end_reason) == (LeaseState.KILLED, EndReason.KILLED)
    assert rig.store.queue_candidates(POOL, 10) == []  # a revoked release does not requeue
    assert rig.types(cancelled.task_id or "")[-1] == "lease.cancelled"
    assert rig.types(killed.task_id or "")[-1] == "lease.killed"


def test_a_report_on_a_lease_nobody_holds_is_an_invalid_transition(rig: Rig) -> None:
    _, pending = rig.task()
    assert pending is not None
    with pytest.raises(InvalidTransition):
        rig.svc.reports.complete(as_lease(pending.id), pending.id, {"outcome": "success"})
    assert rig.lease(pending.id).state is LeaseState.PENDING


def test_reports_need_the_leases_own_token(rig: Rig) -> None:
    one, two = rig.running("w1"), rig.running("w2")
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.reports.complete(as_lease(one.id), two.id, {"outcome": "success"})
    with pytest.raises(Forbidden):
        rig.svc.reports.fail(MEMBER, two.id, {"error": "x"})
    assert rig.lease(two.id).state is LeaseState.RUNNING


@pytest.mark.parametrize("where", ["complete.result", "complete.details", "fail.error"])
def test_a_report_carrying_the_raw_lease_token_never_stores_it(rig: Rig, where: str) -> None:
    # No raw token ever appears in an event or a result. A worker that echoes its
    # own token into a report must be refused, or the token must not reach the table.
    won = rig.claimed()
    me, lid = as_lease(won.lease.id), won.lease.id
    try:
        if where == "complete.result":
            rig.svc.reports.complete(me, lid, {"outcome": "success", "result": {"auth": won.token}})
        elif where == "complete.details":
            rig.svc.reports.complete(
                me, lid, {"outcome": "success", "details": {"log": f"t={won.token}"}}
            )
        else:
            rig.svc.reports.fail(me, lid, {"error": f"could not use {won.token}"})
    except ValidationFailed:
        assert rig.lease(lid).state is LeaseState.DISPATCHED
    assert won.token not in rig.store.everything()


def test_a_release_that_loses_the_race_to_an_expiry_is_a_stale_lease(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    deadline = lease.deadline or 0  # the start's, a toleration and the slack ahead
    while rig.clock.now_ms() <= deadline:  # passes every 30 s until just past its deadline
        rig.advance(30)
        if rig.clock.now_ms() < deadline:
            rig.sweep()
    read_job = rig.store.get_job

    def sweeper_first(job_id: str) -> Job | None:
        # The sweeper's pass commits after the release read the lease, before it wrote.
        del rig.store.get_job
        rig.sweep()
        return read_job(job_id)

    rig.store.get_job = sweeper_first  # type: ignore[method-assign]
    with pytest.raises(StaleLease):
        rig.svc.reports.release(as_lease(lease.id), lease.id, {"reason": "handoff"})
    assert rig.lease(lease.id).state is LeaseState.LOST
    assert "lease.stale_report" in rig.types(lease.task_id or "")
