"""Behaviours of runs and leases that users of the reference system rely on, pinned."""

from __future__ import annotations

import pytest
from tenure.app.tenure import compose
from tenure.domain.states import LeaseState, TaskStatus

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, Rig, as_lease


def test_a_heartbeat_that_shortens_lease_seconds_shortens_the_expiry_too(rig: Rig) -> None:
    lease = rig.running()  # the pool's toleration: 300 s
    beat = rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, 6)
    assert beat.lease.deadline is not None
    assert beat.lease.deadline - rig.clock.now_ms() <= 6 * 1000 * 1.25 + 1
    rig.advance(20)
    report = rig.sweep()
    assert lease.id in report.expired
    assert rig.lease(lease.id).state is LeaseState.LOST


def _starved(rig: Rig) -> int:
    return rig.svc.scheduler.scheduler_status(READER).starved_run_count


@pytest.mark.parametrize("hold", ["pool", "space", "scheduler"])
def test_work_nothing_could_claim_is_never_starved_nor_parked_and_its_age_restarts(
    rig: Rig, hold: str
) -> None:
    _, lease = rig.task()  # no worker at all: it would starve after 600 s, park after 4,200 s
    pause, resume = {
        "pool": (
            lambda: rig.svc.pools.pause_pool(ADMIN, POOL),
            lambda: rig.svc.pools.resume_pool(ADMIN, POOL),
        ),
        "space": (
            lambda: rig.svc.pools.archive_space(ADMIN, SPACE),
            lambda: rig.svc.pools.unarchive_space(ADMIN, SPACE),
        ),
        "scheduler": (
            lambda: rig.svc.scheduler.pause_scheduler(ADMIN),
            lambda: rig.svc.scheduler.resume_scheduler(ADMIN),
        ),
    }[hold]
    pause()
    rig.advance(5000)
    assert _starved(rig) == 0
    assert rig.sweep().parked == []
    resume()
    rig.advance(300)
    assert _starved(rig) == 0  # the age restarted with the resume
    rig.advance(301)
    assert _starved(rig) == 1
    rig.advance(3600)
    assert rig.sweep().parked == [lease.task_id]  # type: ignore[union-attr]


def test_an_instance_change_holds_at_once_on_another_warm_instance(rig: Rig) -> None:
    other = compose(rig.store, rig.clock, rig.ids)  # a second warm API instance
    task, _ = rig.task()
    other.kernel.instance()  # its cached copy: block_recurrence_limit 2
    rig.svc.pools.update_instance(ADMIN, {"block_recurrence_limit": 1})
    other.blocks.block_task(MEMBER, task.id, "needs_input", "which region?")
    assert other.graph.get_task(READER, task.id).status is TaskStatus.NEEDS_ATTENTION
