"""Ceilings under real concurrency, on DynamoDB Local only: sixteen workers
claiming from a pool with max_active 3 never hold a fourth lease, and every kind of ending
gives its slot back exactly once."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

from tenure.app.leases.claims import Claimed
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState

from tests.conformance.contract import ALPHA, BETA, SPACE, TOLERATION_MS, make_world
from tests.conformance.test_races import real_time_service, run_threads, seed
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

THREADS = 16
CEILING = 3
CLAIMS = 60  # claims taken in all, over every thread
ENDINGS = ("complete", "fail", "release", "cancel", "kill")


def _end(svc: Tenure, won: Claimed, how: str) -> LeaseState:
    me = lease_principal(won.lease.id)
    lease_id = won.lease.id
    if how == "complete":
        return svc.reports.complete(me, lease_id, {"outcome": "success"}).state
    if how == "fail":
        return svc.reports.fail(me, lease_id, {"error": "boom"}).state
    if how == "release":
        return svc.reports.release(me, lease_id, {"reason": "busy"}).state
    # An operator stops a held lease: it stays held (cancelling) until its worker reports.
    (svc.operator.cancel if how == "cancel" else svc.operator.kill)(ADMIN, lease_id)
    return svc.reports.complete(me, lease_id, {"outcome": "success"}).state


class Sampler(threading.Thread):
    """Reads, over and over while the workers run, how many leases of the pool are held:
    one Query of the pool's held-lease index (a single partition read), and the counter."""

    def __init__(self, rig: Rig, pool: str) -> None:
        super().__init__(daemon=True)
        self.rig, self.pool = rig, pool
        self.held: Counter[int] = Counter()
        self.counter: Counter[int] = Counter()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.held[self.rig.store.count_held(self.pool, 100)] += 1
            self.counter[self.rig.store.held_count("pool", self.pool)] += 1


def test_sixteen_workers_never_hold_more_than_the_pool_ceiling(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": CEILING})
    seed(rig, CLAIMS)  # enough jobs for every claim, whatever the endings
    svc, counting = real_time_service(rig)
    taken = itertools.count()
    endings: Counter[str] = Counter()
    states: Counter[LeaseState] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(THREADS, timeout=60)
    sampler = Sampler(rig, ALPHA)
    give_up = time.monotonic() + 100
    enough = threading.Event()

    def worker(n: int) -> None:
        start.wait()
        while not enough.is_set() and time.monotonic() < give_up:
            won = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0.5, None)
            if won is None:
                continue  # full (or briefly empty): look again
            number = next(taken)
            if number + 1 >= CLAIMS:
                enough.set()
            how = ENDINGS[number % len(ENDINGS)]
            time.sleep(0.01)  # hold it a moment, so that the others meet a full pool
            state = _end(svc, won, how)
            with lock:
                endings[how] += 1
                states[state] += 1

    sampler.start()
    began = time.monotonic()
    run_threads(THREADS, worker)
    sampler.stop.set()
    sampler.join(timeout=30)
    print(
        f"\nceiling race: {sum(endings.values())} claims by {THREADS} threads in "
        f"{time.monotonic() - began:.1f}s; endings {dict(endings)}; held seen "
        f"{dict(sorted(sampler.held.items()))}; counter seen "
        f"{dict(sorted(sampler.counter.items()))}; writes won {counting.won}, lost {counting.lost}"
    )
    assert max(sampler.held) <= CEILING, sampler.held  # never a fourth held lease
    assert sampler.held[CEILING] > 0, "the pool never filled: the race did not happen"
    assert min(sampler.counter) >= 0 and max(sampler.counter) <= CEILING, sampler.counter
    assert sum(endings.values()) >= CLAIMS and set(endings) == set(ENDINGS)
    # A release ends its lease as cancelled too (end_reason released), its job requeued.
    assert states[LeaseState.CANCELLED] == endings["cancel"] + endings["release"]
    assert states[LeaseState.KILLED] == endings["kill"]
    # Every ending gave back exactly its own slot: nothing held, the counter at zero.
    assert rig.store.count_held(ALPHA, 100) == 0
    assert rig.store.held_count("pool", ALPHA) == 0


def test_an_expiry_gives_its_slot_back_once(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 2})
    seed(rig, 4)
    held = [rig.svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None) for n in range(2)]
    assert all(held) and rig.svc.claims.claim(WORKER, ALPHA, "w-9", "1.0", 0, None) is None
    assert rig.store.held_count("pool", ALPHA) == 2
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
    pool = rig.svc.kernel.catalog.pool(ALPHA)
    leases = [w.lease for w in held if w is not None]
    expired = [rig.svc.recovery.expire(lease, pool) for lease in leases]
    assert [x.state if x else None for x in expired] == [LeaseState.LOST] * 2
    # A second expiry of the same lease (a sweeper pass that read it before) loses its
    # condition and frees nothing more.
    assert [rig.svc.recovery.expire(lease, pool) for lease in leases] == [None, None]
    assert rig.store.held_count("pool", ALPHA) == 0
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-9", "1.0", 0, None) is not None


def test_lowering_the_ceiling_makes_claims_wait_until_the_count_drops(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 3})
    seed(rig, 5)
    held = [rig.svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None) for n in range(3)]
    # A warm instance, cache and all.
    other = compose(Rows.of(rig.store, rig.store), rig.clock, rig.svc.ids)
    other.kernel.catalog.pool(ALPHA)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 1})
    assert other.claims.claim(WORKER, ALPHA, "w-9", "1.0", 0, None) is None
    for won in held[:2]:
        assert won is not None
        rig.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
        assert other.claims.claim(WORKER, ALPHA, "w-9", "1.0", 0, None) is None
    assert held[2] is not None
    rig.svc.reports.complete(lease_principal(held[2].lease.id), held[2].lease.id, {})
    assert other.claims.claim(WORKER, ALPHA, "w-9", "1.0", 0, None) is not None


def test_the_instance_ceiling_holds_across_pools_under_concurrency(rig: Rig) -> None:
    make_world(rig.svc)
    svc, _ = real_time_service(rig)
    # On the real clock: setting a ceiling waits a claim's settings refresh for late claims.
    svc.instance.update_instance(ADMIN, {"max_active": 2})
    for pool in (ALPHA, BETA):
        for _ in range(6):
            rig.svc.filing.create_task(ADMIN, SPACE, "race", None, None, {}, pool, None)
    peak = Counter[int]()  # the instance counter, read over and over
    holding = Counter[int]()  # leases the workers knew they held at once (a lower bound)
    now_held = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def sample() -> None:
        # Two pools are two index partitions: their counts, read one after the other, are no
        # snapshot; the instance counter is one row, and the workers' own tally bounds below.
        while not stop.is_set():
            peak[rig.store.held_count("instance", "instance")] += 1

    def worker(n: int) -> list[Lease]:
        mine = []
        for _ in range(3):
            won = svc.claims.claim(WORKER, (ALPHA, BETA)[n % 2], f"w-{n}", "1.0", 0.5, None)
            if won is not None:
                with lock:
                    now_held[0] += 1
                    holding[now_held[0]] += 1
                time.sleep(0.02)
                with lock:
                    now_held[0] -= 1
                svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
                mine.append(won.lease)
        return mine

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    done: list[Any] = run_threads(8, worker)
    stop.set()
    sampler.join(timeout=30)
    assert sum(len(x) for x in done) > 0
    assert max(peak) <= 2 and max(holding) <= 2, (peak, holding)
    assert rig.store.held_count("instance", "instance") == 0
    rig.svc.instance.update_instance(ADMIN, {"max_active": None})


def test_a_ceiling_set_while_leases_are_held_counts_them_and_holds_back_claims(rig: Rig) -> None:
    # Claimed with no ceiling, the leases were never counted; setting one counts them at once,
    # while sixteen workers keep trying to claim from the moment it is set.
    make_world(rig.svc)
    seed(rig, 2 + THREADS + 2)  # every claimer could land before the ceiling: work is left
    held = [rig.svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None) for n in range(2)]
    svc, _ = real_time_service(rig)
    won: list[Claimed] = []
    lock = threading.Lock()
    go = threading.Event()

    def claimer(n: int) -> None:
        go.wait()
        got = svc.claims.claim(WORKER, ALPHA, f"late-{n}", "1.0", 0, None)
        if got is not None:
            with lock:
                won.append(got)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    go.set()
    svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 2})
    for t in threads:
        t.join()
    for got in won:  # claims that landed before the ceiling did: counted by the second pass
        assert f"pool:{ALPHA}" in (rig.store.get_lease(got.lease.id).counted or ())  # type: ignore[union-attr]
    assert rig.store.held_count("pool", ALPHA) == 2 + len(won)
    assert svc.claims.claim(WORKER, ALPHA, "after", "1.0", 0, None) is None
    for done in [*held, *won]:
        assert done is not None
        svc.reports.complete(lease_principal(done.lease.id), done.lease.id, {})
    assert rig.store.held_count("pool", ALPHA) == 0
    assert svc.claims.claim(WORKER, ALPHA, "after", "1.0", 0, None) is not None
