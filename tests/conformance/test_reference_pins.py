"""Behaviours of runs and leases the reference system's tests pin, on DynamoDB Local through
the sweeper."""

from __future__ import annotations

import threading

from tenure.app.leases.claims import Claimed
from tenure.domain.errors import InvalidTransition
from tenure.domain.states import LeaseState

from tests.conformance.contract import ALPHA, enqueue, make_world
from tests.conformance.test_races import real_time_service
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
    report = rig.svc.sweep.once()
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
    assert rig.svc.sweep.once().parked == []
    assert rig.svc.scheduler.scheduler_status(ADMIN).starved_run_count == 0
    rig.svc.pools.resume_pool(ADMIN, ALPHA)
    rig.clock.advance(4000)
    assert rig.svc.sweep.once().parked == []  # 4,000 s since the resume: not yet 600 + 3,600
    rig.clock.advance(300)
    assert rig.svc.sweep.once().parked == [task.id]


def test_an_exact_claim_racing_claim_next_for_one_lease_has_exactly_one_winner(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    _, lease = enqueue(rig)  # type: ignore[arg-type]
    svc, _ = real_time_service(rig)
    outcomes: list[object] = []
    lock = threading.Lock()
    go = threading.Event()

    def exact(n: int) -> None:
        go.wait()
        try:
            got: object = svc.claims.claim(
                WORKER, ALPHA, f"exact-{n}", "1.0", 0, None, lease_id=lease.id
            )
        except InvalidTransition as refused:
            got = refused
        with lock:
            outcomes.append(got)

    def next_one(n: int) -> None:
        go.wait()
        got = svc.claims.claim(WORKER, ALPHA, f"next-{n}", "1.0", 0, None)
        with lock:
            outcomes.append(got)

    threads = [threading.Thread(target=exact, args=(n,)) for n in range(8)]
    threads += [threading.Thread(target=next_one, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    won = [x for x in outcomes if isinstance(x, Claimed)]
    assert len(won) == 1 and won[0].lease.id == lease.id
    assert all(x is None or isinstance(x, InvalidTransition | Claimed) for x in outcomes)
    held = rig.store.get_lease(lease.id)
    assert held is not None and held.state is LeaseState.DISPATCHED
    assert held.worker_id == won[0].lease.worker_id and held.fence == 1
