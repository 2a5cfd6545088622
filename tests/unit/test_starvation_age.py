"""Starvation's age counts only time without a reachable worker: a lease that waited behind a
full ceiling while its pool's workers were there is capacity-waiting, and that wait does not
bring its parking nearer once the workers go away."""

from __future__ import annotations

from tenure.app.workers import SEEN_LAG_SHARE
from tenure.domain.model import DEFAULT_GRACE_SECONDS
from tenure.domain.states import TaskStatus

from tests.unit.support import ADMIN, READER, Rig

CAPPED = "capped"
# A worker reads unreachable this long after its last contact (the lag a stored last_seen may
# have is added before judging).
UNREACHABLE_AFTER = DEFAULT_GRACE_SECONDS * (1 + SEEN_LAG_SHARE)
MIN_QUEUED_AGE = 600
ESCALATION = 3600


def _waited_two_hours_behind_a_full_ceiling(rig: Rig) -> str:
    """One lease held by w1 in a pool with max_active 1, a second one queued behind it for two
    hours while w1 kept heartbeating; then w1 goes silent. The queued task's id."""
    rig.make_pool(CAPPED, max_active=1)
    rig.claimed("w1", CAPPED)
    waiting, lease = rig.task(pool=CAPPED)
    assert lease is not None
    pool = rig.svc.kernel.catalog.pool(CAPPED)
    for _ in range(2 * 3600 // 20):
        rig.advance(20)
        rig.svc.workers.mark_seen(pool, "w1", "1.0")
        status = rig.svc.scheduler.scheduler_status(READER)
    assert (status.capacity_waiting_count, status.starved_run_count) == (1, 0)
    return waiting.id


def test_time_waiting_for_capacity_does_not_count_toward_parking(rig: Rig) -> None:
    task_id = _waited_two_hours_behind_a_full_ceiling(rig)
    rig.advance(UNREACHABLE_AFTER + 180)  # its worker gone three minutes ago
    assert rig.svc.scheduler.park_starved() == []
    assert rig.svc.graph.get_task(ADMIN, task_id).status is not TaskStatus.NEEDS_ATTENTION
    assert rig.svc.scheduler.scheduler_status(READER).starved_run_count == 0


def test_the_age_runs_from_when_the_last_worker_went_away(rig: Rig) -> None:
    task_id = _waited_two_hours_behind_a_full_ceiling(rig)
    rig.advance(UNREACHABLE_AFTER + MIN_QUEUED_AGE - 5)
    assert rig.svc.scheduler.scheduler_status(READER).starved_run_count == 0
    rig.advance(10)
    assert rig.svc.scheduler.scheduler_status(READER).starved_run_count == 1
    rig.advance(ESCALATION - 10)
    assert rig.svc.scheduler.park_starved() == []
    rig.advance(10)
    assert rig.svc.scheduler.park_starved() == [task_id]
    assert rig.svc.graph.get_task(ADMIN, task_id).status is TaskStatus.NEEDS_ATTENTION


def test_a_pool_that_never_had_a_worker_ages_from_the_lease(rig: Rig) -> None:
    task, _ = rig.task()
    rig.advance(MIN_QUEUED_AGE + ESCALATION + 1)
    assert rig.svc.scheduler.park_starved() == [task.id]
