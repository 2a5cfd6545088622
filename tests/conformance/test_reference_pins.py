"""Behaviours of runs and leases the reference system's tests pin, on DynamoDB Local through
the sweeper."""

from __future__ import annotations

from tenure.app.sweep import sweep_once
from tenure.domain.states import LeaseState

from tests.conformance.contract import ALPHA, enqueue, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


def test_a_heartbeat_shortening_lease_seconds_expires_the_lease_by_the_shorter_bound(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    enqueue(rig)  # type: ignore[arg-type]
    won = rig.svc.claims.claim(WORKER, ALPHA, "w1", "1.0", 0, None)
    assert won is not None
    me = lease_principal(won.lease.id)
    rig.svc.reports.heartbeat(me, won.lease.id, None)  # running, 300 s out
    rig.svc.reports.heartbeat(me, won.lease.id, 6)
    rig.clock.advance(20)
    report = sweep_once(rig.svc)
    assert report.expired == [won.lease.id]
    lost = rig.store.get_lease(won.lease.id)
    assert lost is not None and lost.state is LeaseState.LOST


def test_work_in_a_paused_pool_is_not_parked_by_the_sweeper_until_it_starves_after_resume(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    task, _ = enqueue(rig)  # type: ignore[arg-type]
    rig.svc.pools.pause_pool(ADMIN, ALPHA)
    rig.clock.advance(5000)
    assert sweep_once(rig.svc).parked == []
    assert rig.svc.scheduler.scheduler_status(ADMIN).starved_run_count == 0
    rig.svc.pools.resume_pool(ADMIN, ALPHA)
    rig.clock.advance(4000)
    assert sweep_once(rig.svc).parked == []  # 4,000 s since the resume: not yet 600 + 3,600
    rig.clock.advance(300)
    assert sweep_once(rig.svc).parked == [task.id]
