"""A write computed from an earlier read never lands over something newer (review findings)."""

from __future__ import annotations

import pytest
from tenure.domain.errors import InvalidTransition
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.states import LeaseState, ReportKind
from tenure.domain.transitions import Action, move

from tests.unit.support import MEMBER, POOL, SPACE, Rig, as_lease


def test_an_expiry_read_before_a_heartbeat_does_not_expire_the_renewed_lease(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(300 * (1 + DEADLINE_SLACK) + 5)  # past the stored deadline
    due = rig.lease(lease.id)
    assert rig.clock.now_ms() > (due.deadline or 0)
    rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)  # lands between read and expiry
    pool = rig.store.get_pool(POOL)
    assert pool is not None
    assert rig.svc.recovery.expire(due, pool) is None
    assert rig.lease(lease.id).state is LeaseState.RUNNING


def test_an_operator_action_never_moves_a_fresher_deadline_back(rig: Rig) -> None:
    lease = rig.running()
    rig.advance(300 * DEADLINE_SLACK + 10)  # past the slack: the heartbeat writes the deadline
    stale = rig.lease(lease.id)
    rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    renewed = rig.lease(lease.id).deadline
    assert renewed != stale.deadline
    to = move(stale.id, stale.state, stale.revoke, Action.KILL)
    assert to is not None
    with pytest.raises(Exception, match="conditional write lost"):
        rig.svc.kernel.write(stale, rig.svc.kernel.apply(stale, to, {}, rig.clock.now))
    rig.svc.operator.kill(
        MEMBER, lease.id
    )  # the real action re-reads and keeps the fresher deadline
    assert rig.lease(lease.id).deadline == renewed


def test_a_report_read_before_a_kill_ends_the_lease_killed_with_its_event(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.operator.cancel(MEMBER, lease.id)
    rig.svc.operator.kill(
        MEMBER, lease.id
    )  # same state and fence as the cancel: only version moved
    ended = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert (ended.state, ended.end_reason and ended.end_reason.value) == (
        LeaseState.KILLED,
        "killed",
    )
    assert rig.types(lease.task_id or "")[-1] == "lease.killed"


def test_a_report_computed_from_a_read_before_a_kill_cannot_land(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.operator.cancel(MEMBER, lease.id)
    stale = rig.lease(lease.id)
    rig.svc.operator.kill(MEMBER, lease.id)
    change = rig.svc.reports.final_ending(
        stale, ReportKind.COMPLETE, {"outcome": "success"}, "fp", None
    ).change()
    with pytest.raises(Exception, match="conditional write lost"):
        rig.svc.kernel.commit(change)
    assert rig.lease(lease.id).state is LeaseState.CANCELLING


def test_an_enqueue_racing_a_release_never_opens_a_second_run(rig: Rig) -> None:
    won = rig.claimed()
    task_id = won.lease.task_id or ""
    real_get_job = rig.store.get_job
    fired: list[bool] = []

    def release_in_between(job_id: str):  # type: ignore[no-untyped-def]
        job = real_get_job(job_id)
        if not fired:  # the worker's release lands between enqueue's job and lease reads
            fired.append(True)
            rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {"reason": "handoff"})
        return job

    rig.store.get_job = release_in_between  # type: ignore[method-assign]
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task_id, POOL)
    rig.store.get_job = real_get_job  # type: ignore[method-assign]
    page = rig.store.list_leases(SPACE, 10, None, None, None)
    assert len([x for x in page.leases if x.state.active]) == 1
