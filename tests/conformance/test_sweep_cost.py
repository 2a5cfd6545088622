"""What one sweeper pass reads: only what is due, however many leases are live (a pass is
paid for every minute, so it must not grow with them).

Measured with the store's meter (items DynamoDB returned, and the read units it reported) on
DynamoDB Local, before and after one `Sweep.once`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from unittest.mock import patch

import pytest
from boto3.dynamodb.types import TypeSerializer
from tenure.app import sweep as sweep_module
from tenure.app.sweep import SweepReport
from tenure.app.sweep import pool_depth as real_pool_depth
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, SubjectKind
from tenure.store import keys
from tenure.store.dynamo import OneTable
from tenure.store.dynamo.commit import lease_row as _lease_row

from tests.conformance.contract import ALPHA, SPACE, TOLERATION_MS, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

LIVE = 5_000
EXPIRED = 5
SWEEP_EVERY_S = 60  # the deployed schedule, rate(1 minute)
LIVE_FOR_MS = 10 * 3600 * 1000  # live leases' deadlines are hours away

_ser = TypeSerializer()


@dataclass
class Cost:
    items: int
    read_units: float
    calls: Counter[str]


T = TypeVar("T")
GAUGES: list[Cost] = []


def _metered(rig: Rig, run: Callable[[], T]) -> tuple[T, Cost]:
    r0, _, i0 = rig.store.meter.snapshot()
    c0 = Counter(rig.store.meter.calls)
    out = run()
    r1, _, i1 = rig.store.meter.snapshot()
    return out, Cost(i1 - i0, r1 - r0, rig.store.meter.calls - c0)


def metered_pass(rig: Rig) -> tuple[SweepReport, Cost]:
    """One pass, metered without its per-pool gauges (QueuedLeases, HeldLeases, the oldest
    queued age), whose own reads are kept in GAUGES: index counts that grow with the live
    leases by design, bounded by the gauges' budget, and judged apart."""
    GAUGES.clear()

    def gauged(queues: Any, leases: Any, pool: str, now: int, tiers: Any = None) -> Any:
        depth, cost = _metered(rig, lambda: real_pool_depth(queues, leases, pool, now, tiers))
        GAUGES.append(cost)
        return depth

    with patch.object(sweep_module, "pool_depth", gauged):
        report, cost = _metered(rig, lambda: rig.svc.sweep.once(SWEEP_EVERY_S))
    for gauge in GAUGES:
        cost = Cost(
            cost.items - gauge.items, cost.read_units - gauge.read_units, cost.calls - gauge.calls
        )
    return report, cost


def gauge_cost() -> Cost:
    total = Cost(0, 0.0, Counter())
    for g in GAUGES:
        total = Cost(total.items + g.items, total.read_units + g.read_units, total.calls + g.calls)
    return total


def live_lease(i: int, now: int) -> Lease:
    return Lease(
        id=f"lease_live{i:05d}",
        job_id=f"job_live{i:05d}",
        space=SPACE,
        pool=ALPHA,
        subject_kind=SubjectKind.TASK,
        subject_id=f"task_live{i:05d}",
        task_id=f"task_live{i:05d}",
        task_key=f"{SPACE}-L{i}",
        state=LeaseState.RUNNING,
        fence=1,
        attempt=1,
        created_at=now - 60_000,
        worker_id=f"w-{i % 50}",
        worker_version="1.0",
        token_hash=f"{i:064x}",
        lease_seconds=LIVE_FOR_MS // 1000,
        renew_seconds=10,
        claimed_at=now - 30_000,
        started_at=now - 29_000,
        heartbeat_at=now,
        deadline=now + LIVE_FOR_MS,
        due_at=now + LIVE_FOR_MS,
        version=3,
        event_type="lease.started",
        updated_at=now - 29_000,
    )


def batch_put(store: OneTable, leases: list[Lease]) -> None:
    """Write lease rows exactly as the store lays them out, 25 to a BatchWriteItem."""

    def put(chunk: list[Lease]) -> None:
        request: dict[str, Any] = {
            store.table: [
                {
                    "PutRequest": {
                        "Item": {
                            name: _ser.serialize(value)
                            for name, value in {
                                **keys.lease_key(x.id),
                                **_lease_row(x),
                            }.items()
                        }
                    }
                }
                for x in chunk
            ]
        }
        while request:
            request = store.client.batch_write_item(RequestItems=request).get("UnprocessedItems")

    chunks = [leases[i : i + 25] for i in range(0, len(leases), 25)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, chunks))


def held(rig: Rig, n: int) -> list[Lease]:
    """n leases created and claimed through the service, at the rig's clock."""
    out = []
    for _ in range(n):
        _, lease = rig.svc.filing.create_task(ADMIN, SPACE, "sweep me", None, None, {}, ALPHA, None)
        assert lease is not None
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-x", "1.0", 0, None)
        assert won is not None
        out.append(won.lease)
    return out


@pytest.fixture
def crowded(rig: Rig) -> tuple[Rig, list[Lease], list[Lease]]:
    """5,000 live leases and 5 whose holders went silent, with a pass just before they expired."""
    make_world(rig.svc)
    silent = held(rig, EXPIRED)  # their deadline: now + (1 + DEADLINE_SLACK) tolerations
    began = time.monotonic()
    live = [live_lease(i, rig.clock.now_ms()) for i in range(LIVE)]
    batch_put(rig.store, live)
    print(f"\nseeded {LIVE} live leases in {time.monotonic() - began:.1f}s")
    assert len(rig.store.due_leases(ALPHA, None)) == LIVE + EXPIRED
    # The sweeper ran a minute before the silent leases' deadlines, and found nothing due.
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 - SWEEP_EVERY_S + 1)
    first, _ = metered_pass(rig)
    assert first.expired == [] and first.reindexed == 0
    rig.clock.advance(SWEEP_EVERY_S)
    return rig, silent, live


def test_passes_over_5000_live_leases_read_only_the_expired_ones_and_then_nothing(
    crowded: tuple[Rig, list[Lease], list[Lease]],
) -> None:
    rig, silent, live = crowded
    pools = len(rig.store.list_pools())
    report, cost = metered_pass(rig)
    print(
        f"\nsweep pass, {LIVE} live + {EXPIRED} expired: {cost.items} items read, "
        f"{cost.read_units:g} read units, {cost.calls.total()} calls"
    )

    assert sorted(report.expired) == sorted(x.id for x in silent)
    assert report.absent_pools == [] and report.held == 0 and report.reindexed == 0
    # Per expired lease: its due-index entry, its row, and its job (read once to judge the
    # expiry and mint the successor; a task's first job has no row, so a miss and the task);
    # the mass-expiry check counts at most about 2 index entries per due lease; then the
    # sweeper's own state and one pool row each.
    assert cost.items <= EXPIRED * 4 + 2 * EXPIRED + 1 + pools + 1, cost
    assert cost.read_units <= EXPIRED * 3 + 1 + pools + 2, cost
    assert "batch_get" not in cost.calls  # nothing was read in bulk
    # The gauges: per pool two index counts (keys only, eventually consistent: about 80
    # entries a read unit), the queue's head entry and its row; never a lease row more.
    gauges = gauge_cost()
    assert gauges.calls["get"] <= pools, gauges
    assert gauges.read_units <= pools * 3 + (LIVE + EXPIRED) / 40, gauges
    # Stored state: the silent ones are lost and requeued; every live lease is untouched.
    for lease in silent:
        row = rig.store.get_lease(lease.id)
        assert row is not None and row.state is LeaseState.LOST
    successors = rig.store.queue_candidates(ALPHA, 100)
    assert len(successors) == EXPIRED
    assert all(x.fence == 2 for x in rig.store.get_leases(successors).values())
    rows = rig.store.get_leases(x.id for x in live)
    assert len(rows) == LIVE
    assert all(rows[x.id] == x for x in live)

    # A minute later nothing is due: the live leases' indexed due_at is hours ahead, so the
    # pass reads its own state and the pool rows, and no lease at all.
    rig.clock.advance(SWEEP_EVERY_S)
    report, cost = metered_pass(rig)
    print(f"quiet sweep pass, {LIVE} live: {cost.items} items read, {cost.read_units:g} RU")
    assert report.expired == [] and report.reindexed == 0 and report.held == 0
    assert cost.items <= 1 + pools, cost
    assert cost.read_units <= 1 + pools, cost
    # The sweeper's own row, and the scheduler's (the tasks whose transient blocks may have
    # expired): two small rows, however many leases are live.
    assert cost.calls["get"] <= 2 and "batch_get" not in cost.calls
    # Queries: the pools' partition, then per pool its due index and its starved queue, and
    # the delegations' TTL index; a pool younger than its retention (all of these) has no
    # ended lease to look for, so its ended index is not read (11 queries when it was).
    assert cost.calls["query"] <= 2 * pools + 2, cost


def test_a_lease_whose_heartbeats_outran_its_due_at_is_read_once_then_left_alone(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    leases = held(rig, 20)
    claimed_due = {x.id: x.due_at for x in leases}
    rig.clock.advance(120)  # heartbeats now write a later deadline, never the due index
    for lease in leases:
        rig.svc.reports.heartbeat(lease_principal(lease.id), lease.id, None)
    beat = rig.store.get_leases(claimed_due)
    assert all(beat[i].due_at == claimed_due[i] for i in claimed_due)
    assert all((beat[i].deadline or 0) > (claimed_due[i] or 0) for i in claimed_due)
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 - 120 - SWEEP_EVERY_S + 1)
    rig.svc.sweep.once(SWEEP_EVERY_S)  # a minute before the old due_at: nothing to do
    rig.clock.advance(SWEEP_EVERY_S)  # the indexed due_at has passed, the deadline has not

    report, cost = metered_pass(rig)
    assert report.expired == [] and report.reindexed == len(leases)
    assert cost.items >= len(leases)  # each was read once to learn its real deadline
    after = rig.store.get_leases(claimed_due)
    assert all(after[i].state is LeaseState.RUNNING for i in claimed_due)
    assert all(after[i].due_at == after[i].deadline for i in claimed_due)

    pools = len(rig.store.list_pools())
    rig.clock.advance(SWEEP_EVERY_S)
    report, cost = metered_pass(rig)
    assert report.reindexed == 0 and report.expired == []
    assert cost.items <= 1 + pools, cost  # re-indexed: not read again until really due


# More than two passes push: the walk's bound is lowered to ABSENT_BOUND here, so the engine
# pages its due index and resumes after a moved entry several times for a fifth of the rows the
# deployed bound would need (1,200 leases at 500 a pass took 33 s beside the other tiers).
ABSENT_HELD = 300
ABSENT_BOUND = 100
AWAY_S = 15 * 60


def test_after_the_sweeper_s_absence_every_held_lease_is_pushed_once_and_each_pass_keeps_its_bound(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", ABSENT_BOUND)
    make_world(rig.svc)
    rig.svc.sweep.once(SWEEP_EVERY_S)  # the last pass before the sweeper went away
    now = rig.clock.now_ms()
    found_at = now + AWAY_S * 1000
    # Half are due a minute after the last pass, before the sweeper went away; half not until
    # after the pass that finds the absence, spread over 20 minutes past it, so the first half,
    # pushed by the gap, land in the due index among the second.
    deadlines = [
        now + 60_000 if i % 2 == 0 else found_at + 1_000 * (i + 1) for i in range(ABSENT_HELD)
    ]
    held = [replace(live_lease(i, now), deadline=d, due_at=d) for i, d in enumerate(deadlines)]
    batch_put(rig.store, held)
    rig.clock.advance(AWAY_S)
    pools = len(rig.store.list_pools())
    bound = sweep_module.DUE_PER_PASS

    pushed = []
    for n in range(10):
        if n:
            rig.clock.advance(SWEEP_EVERY_S)
        report, cost = metered_pass(rig)
        print(
            f"\nabsence push pass {n + 1}, {ABSENT_HELD} held: pushed {report.pushed}, "
            f"{cost.items} items read, {cost.read_units:g} RU, {dict(cost.calls)}"
        )
        pushed.append(report.pushed)
        assert report.expired == [] and report.held == 0
        # Its due-index page and each lease row in it, the sweeper's own state and the pool
        # rows, the scheduler's row; one conditional write per lease pushed.
        assert cost.items <= 2 * bound + 1 + pools + 1, cost
        assert cost.calls["update"] <= bound, cost
        assert "batch_get" not in cost.calls
        if not report.pushing:
            break
    assert rig.store.get_sweeper_state().absences == {}
    assert pushed[0] == bound and sum(pushed) == ABSENT_HELD
    rows = rig.store.get_leases(x.id for x in held)
    assert all(rows[x.id].state is LeaseState.RUNNING for x in held)
    assert all(rows[x.id].deadline == (x.deadline or 0) + AWAY_S * 1000 for x in held)
    assert all(rows[x.id].pushed_for == found_at for x in held)
