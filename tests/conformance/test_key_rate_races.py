"""Keyed concurrency and the rate limit under real concurrency, on DynamoDB Local only:
sixteen workers never hold more leases of one key than the pool's max_active_per_key, never
claim more in one minute than its max_claims_per_minute, and every ending gives its key's
slot back exactly once. Also what each control adds to a claim's write, priced by AWS's
rules (bench/billing.py)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter, defaultdict

from tenure.app.leases.claims import Claimed
from tenure.app.ports import RATE_CEILING, rate_ceiling
from tenure.app.tenure import Tenure
from tenure.domain.model import Lease
from tenure.store.keys import key_counter_key
from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.bills import Bills
from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_ceiling_races import ENDINGS, _end
from tests.conformance.test_races import real_time_service, run_threads
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

THREADS = 16
PER_KEY = 2
KEYS = ("tenant-a", "tenant-b", "tenant-c")
CLAIMS = 45
PER_MINUTE = 12
# The rate race's length: on the wall clock, which names the minute a claim counts in.
RATE_RACE_S = 4


def _within_one_minute(seconds: float) -> None:
    """Wait for the next minute when this one has fewer than `seconds` (and a margin) left:
    a race split over two minutes may stay under the limit in each, and nothing is refused."""
    left = 60 - time.time() % 60
    if left < seconds + 2:
        time.sleep(left + 0.1)


def _seed(rig: Rig, n: int, keys: tuple[str, ...] = KEYS) -> list[Lease]:
    found = []
    for i in range(n):
        _, lease = rig.svc.filing.create_task(
            ADMIN, SPACE, "race", None, None, {}, ALPHA, None, concurrency_key=keys[i % len(keys)]
        )
        assert lease is not None
        found.append(lease)
    return found


def _key_count(rig: Rig, key: str) -> int:
    row = rig.store.rows.get(key_counter_key(ALPHA, key))  # consistent: the counter right now
    return int((row or {}).get("active", 0))


def test_sixteen_workers_never_hold_more_than_the_per_key_ceiling(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active_per_key": PER_KEY})
    _seed(rig, CLAIMS + THREADS)  # work is left whatever the endings
    svc, counting = real_time_service(rig)
    taken = itertools.count()
    lock = threading.Lock()
    holding: dict[str, int] = defaultdict(int)  # what the workers know they hold, per key
    peak: Counter[str] = Counter()
    total_peak = [0]
    at_win: Counter[int] = Counter()  # the key's counter read right after each win
    endings: Counter[str] = Counter()
    enough = threading.Event()
    give_up = time.monotonic() + 100
    start = threading.Barrier(THREADS, timeout=60)

    def worker(n: int) -> None:
        start.wait()
        while not enough.is_set() and time.monotonic() < give_up:
            won = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0.5, None)
            if won is None:
                continue
            key = str(won.lease.concurrency_key)
            with lock:
                holding[key] += 1
                peak[key] = max(peak[key], holding[key])
                total_peak[0] = max(total_peak[0], sum(holding.values()))
            at_win[_key_count(rig, key)] += 1
            number = next(taken)
            if number + 1 >= CLAIMS:
                enough.set()
            how = ENDINGS[number % len(ENDINGS)]
            # Held a while, as a job is: long enough that the other threads' claims land
            # meanwhile even on two loaded cores (at 10 ms only two were held at once there).
            time.sleep(0.1)
            with lock:
                holding[key] -= 1  # before the end: the tally never runs ahead of the table
            _end(svc, won, how)
            with lock:
                endings[how] += 1

    began = time.monotonic()
    run_threads(THREADS, worker)
    print(
        f"\nkey race: {sum(endings.values())} claims by {THREADS} threads in "
        f"{time.monotonic() - began:.1f}s; peak held per key {dict(peak)}, across keys "
        f"{total_peak[0]}; key counter at each win {dict(sorted(at_win.items()))}; "
        f"writes won {counting.won}, lost {counting.lost}"
    )
    assert sum(endings.values()) >= CLAIMS and set(endings) == set(ENDINGS)
    assert max(peak.values()) <= PER_KEY, peak
    assert max(at_win) <= PER_KEY and min(at_win) >= 1, at_win
    # A full key did not stop the claims: several keys were held at once, past one key's cap.
    assert total_peak[0] > PER_KEY and set(peak) == set(KEYS), (total_peak, peak)
    for key in KEYS:
        assert _key_count(rig, key) == 0, key  # every ending gave back exactly its own slot


def test_sixteen_workers_never_claim_more_in_a_minute_than_the_rate_limit(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_claims_per_minute": PER_MINUTE})
    _seed(rig, 3 * PER_MINUTE, keys=("k",))
    svc, _ = real_time_service(rig)
    lock = threading.Lock()
    won: list[Claimed] = []
    empty = [0]
    _within_one_minute(RATE_RACE_S)
    stop_at = time.monotonic() + RATE_RACE_S

    def worker(n: int) -> None:
        while time.monotonic() < stop_at:
            got = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            with lock:
                if got is None:
                    empty[0] += 1
                else:
                    won.append(got)
            if got is None:
                time.sleep(0.05)  # a worker answered 204 looks again a moment later
            else:
                svc.reports.complete(lease_principal(got.lease.id), got.lease.id, {})

    run_threads(THREADS, worker)
    per_minute = Counter(int(w.lease.claimed_at or 0) // 60_000 for w in won)
    print(f"\nrate race: claims per minute {dict(per_minute)}; 204s {empty[0]}")
    assert per_minute and max(per_minute.values()) <= PER_MINUTE, per_minute
    assert empty[0] > 0  # claims past the limit were answered with nothing
    for minute, n in per_minute.items():  # the counter row agrees with what was won
        assert rig.store.held_count(RATE_CEILING, rate_ceiling(ALPHA, minute)) == n


def test_a_per_key_ceiling_set_while_leases_are_held_counts_them(rig: Rig) -> None:
    make_world(rig.svc)
    _seed(rig, 5, keys=("k", "k", "other", "k", "other"))
    held = [rig.svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None) for n in range(3)]
    assert all(held)
    svc, _ = real_time_service(rig)  # on the real clock: the second count waits 2.5 s
    svc.pools.update_pool(ADMIN, ALPHA, {"max_active_per_key": 1})
    keys = Counter(str(w.lease.concurrency_key) for w in held if w is not None)
    assert {key: _key_count(rig, key) for key in keys} == dict(keys)
    # A key with a lease held is at or over its new ceiling of one; only a key none of the
    # three claims took (which three is the claimers' shuffle) may still be claimed.
    after = svc.claims.claim(WORKER, ALPHA, "after", "1.0", 0, None)
    free = {"k", "other"} - set(keys)
    if free:
        assert after is not None and after.lease.concurrency_key in free
        # Now every key is held: nothing more is claimable.
        assert svc.claims.claim(WORKER, ALPHA, "after-2", "1.0", 0, None) is None
        svc.reports.complete(lease_principal(after.lease.id), after.lease.id, {})
    else:
        assert after is None
    for w in held:
        assert w is not None
        svc.reports.complete(lease_principal(w.lease.id), w.lease.id, {})
    assert _key_count(rig, "k") == 0 and _key_count(rig, "other") == 0
    assert svc.claims.claim(WORKER, ALPHA, "after", "1.0", 0, None) is not None


def _claim_units(rig: Rig, bills: Bills, svc: Tenure) -> tuple[str, float, float]:
    """The claim's own write (the worker is seen already, so its row is not written), and
    what the completion that ends the lease writes."""
    bills.writes.clear()
    won = svc.claims.claim(WORKER, ALPHA, "meter", "1.0", 0, None)
    assert won is not None
    writes = list(bills.writes)
    assert len(writes) == 1, writes
    bills.writes.clear()
    svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
    return writes[0][0], writes[0][1], sum(units for _, units in bills.writes)


def test_what_each_control_adds_to_a_claims_write(rig: Rig, ddb_local: DynamoDBLocal) -> None:
    make_world(rig.svc)
    _seed(rig, 8, keys=("k",))
    bills = Bills(rig, ddb_local.endpoint)
    first = rig.svc.claims.claim(WORKER, ALPHA, "meter", "1.0", 0, None)  # the worker's row
    assert first is not None
    measured = {"off": _claim_units(rig, bills, rig.svc)}
    for name, changes in (
        ("per_key", {"max_active_per_key": 5}),
        ("rate", {"max_active_per_key": None, "max_claims_per_minute": 1000}),
        ("both", {"max_active_per_key": 5, "max_claims_per_minute": 1000}),
    ):
        rig.svc.pools.update_pool(ADMIN, ALPHA, changes)
        measured[name] = _claim_units(rig, bills, rig.svc)
    print(f"\nclaim write units by control: {measured}; the last, by part: {bills.parts[-2]}")
    assert measured["off"][0] == "PutItem"  # no control: the claim stays one single-item put
    assert {measured[n][0] for n in ("per_key", "rate", "both")} == {"TransactWriteItems"}
    off = measured["off"][1]
    # The lease put is billed twice inside a transaction, and each small counter row 2 more.
    assert measured["both"][1] > measured["per_key"][1] > off
    assert measured["both"][1] - measured["per_key"][1] == 2.0
    # The end gives the key's slot back in its own write (a transaction too); the minute's
    # count is never given back, so the rate limit leaves the end as it was.
    assert measured["per_key"][2] > measured["off"][2] == measured["rate"][2]
