"""Run timeout: a lease held past the smaller of its run's and its pool's max_run_seconds is
asked to stop (revoke kill) and ends killed with end_reason timed_out."""

from __future__ import annotations

import pytest
from tenure.app.ports import KEY_CEILING, key_ceiling
from tenure.app.runs import RunControls
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease
from tenure.domain.states import EndReason, LeaseState, Revoke

from tests.unit.support import ADMIN, MEMBER, POOL, Rig, as_lease


def _running(rig: Rig, pool_limit: int | None, task_limit: int | None) -> Lease:
    if pool_limit is not None:
        rig.svc.pools.update_pool(ADMIN, POOL, {"max_run_seconds": pool_limit})
    rig.task(controls=RunControls(max_run_seconds=task_limit))
    won = rig.claim()
    return rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)


def _minutes(rig: Rig, lease_id: str, minutes: int) -> list[str]:
    """Sweep minute by minute, the worker heartbeating in between (so it never expires)."""
    asked: list[str] = []
    for _ in range(minutes):
        rig.advance(60)
        if rig.lease(lease_id).state in (LeaseState.RUNNING, LeaseState.CANCELLING):
            rig.svc.reports.heartbeat(as_lease(lease_id), lease_id, None)
        asked += rig.sweep().timed_out
    return asked


@pytest.mark.parametrize(("pool_limit", "task_limit"), [(120, None), (600, 120), (120, 600)])
def test_the_smaller_limit_wins_and_is_recorded_at_the_claim(
    rig: Rig, pool_limit: int | None, task_limit: int | None
) -> None:
    lease = _running(rig, pool_limit, task_limit)
    assert lease.run_limit_seconds == 120
    assert lease.run_deadline == lease.claimed_at + 120_000  # type: ignore[operator]
    assert lease.due_at == lease.run_deadline  # the sweeper's index comes due at it


def test_a_lease_past_its_run_timeout_is_asked_to_stop_then_ends_timed_out(rig: Rig) -> None:
    lease = _running(rig, 150, None)
    assert _minutes(rig, lease.id, 2) == []
    assert _minutes(rig, lease.id, 1) == [lease.id]
    asked = rig.lease(lease.id)
    assert (asked.state, asked.revoke) == (LeaseState.CANCELLING, Revoke.KILL)
    beat = rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    assert beat.revoke is Revoke.KILL
    assert _minutes(rig, lease.id, 2) == []  # asked once
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert (done.state, done.end_reason) == (LeaseState.KILLED, EndReason.TIMED_OUT)
    task = done.task_id
    assert task is not None and "lease.timing_out" in rig.types(task)


def test_a_silent_worker_after_the_timeout_ends_timed_out_when_its_toleration_passes(
    rig: Rig,
) -> None:
    lease = _running(rig, 60, None)
    rig.advance(61)
    assert rig.sweep().timed_out == [lease.id]
    deadline = rig.lease(lease.id).deadline or 0  # unrenewed since the start
    while rig.clock.now_ms() <= deadline:  # minute by minute until it has passed unheard
        rig.advance(60)
        rig.sweep()
    ended = rig.lease(lease.id)
    assert (ended.state, ended.end_reason) == (LeaseState.KILLED, EndReason.TIMED_OUT)
    newest = rig.svc.kernel.newest_lease(rig.svc.kernel.task(ended.task_id or ""))
    assert newest is not None and newest.id == lease.id  # a kill hands nothing on


def test_a_completion_landing_first_wins_over_the_timeout(rig: Rig) -> None:
    lease = _running(rig, 60, None)
    rig.advance(61)
    real = rig.svc.run_timeouts.time_out

    def complete_first(seen: Lease) -> Lease | None:
        rig.svc.reports.complete(as_lease(seen.id), seen.id, {"outcome": "success"})
        return real(seen)

    rig.svc.run_timeouts.time_out = complete_first  # type: ignore[method-assign]
    report = rig.sweep()
    assert report.timed_out == [] and report.raced == 1
    ended = rig.lease(lease.id)
    assert (ended.state, ended.end_reason) == (LeaseState.COMPLETED, EndReason.COMPLETED)


def test_no_timeout_anywhere_records_none(rig: Rig) -> None:
    lease = _running(rig, None, None)
    assert lease.run_limit_seconds is None and lease.run_deadline is None
    assert lease.due_at == lease.deadline


def test_an_operator_kill_is_not_called_a_timeout(rig: Rig) -> None:
    lease = _running(rig, None, None)
    rig.svc.operator.kill(MEMBER, lease.id)
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert done.end_reason is EndReason.KILLED


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_a_run_timeout_below_a_second_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValidationFailed) as refused:
        RunControls(max_run_seconds=bad)  # type: ignore[arg-type]
    assert refused.value.details == {"field": "max_run_seconds"}


def test_an_operator_kill_before_the_run_timeout_still_ends_when_the_worker_goes_silent(
    rig: Rig,
) -> None:
    # Killed by an operator while its run deadline is still ahead, the lease is past the
    # sweeper's reach for a run timeout (the kill stands): it must still end at its toleration
    # and give back what it held, rather than come due at its run deadline on every pass.
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_run_seconds": 120, "max_active_per_key": 1})
    rig.task(concurrency_key="k")
    won = rig.claim()
    lease = rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    rig.advance(10)
    rig.svc.operator.kill(MEMBER, lease.id)
    raced = 0
    for _ in range(30):  # half an hour of silence, swept minute by minute
        rig.advance(60)
        report = rig.sweep()
        raced += report.raced
        assert lease.id not in report.timed_out
    ended = rig.lease(lease.id)
    assert ended.state is LeaseState.KILLED
    assert raced == 0
    assert rig.store.held_count(KEY_CEILING, key_ceiling(POOL, "k")) == 0
    rig.task(concurrency_key="k")
    assert rig.claim() is not None  # the key's slot was given back
