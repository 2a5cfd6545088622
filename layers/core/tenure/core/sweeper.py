"""The sweeper: expiry, recovery, and the service's own absence (DESIGN §4)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field, replace

from tenure.core.errors import Conflict
from tenure.core.model import Event, Lease, Pool
from tenure.core.ports import SweeperState
from tenure.core.service import LeaseService
from tenure.core.states import REPORTABLE

# Kubernetes' node lifecycle controller stops evicting when too much of a zone looks dead at
# once; likewise, a pass that would expire at least this share of all held leases (and at
# least MASS_EXPIRY_MIN of them) holds them for one more toleration window first.
MASS_EXPIRY_SHARE = 0.55
MASS_EXPIRY_MIN = 3
SYSTEM = ("system", "sweeper")


@dataclass
class SweepReport:
    at: int
    gap_ms: int | None = None
    skipped: bool = False  # another pass was running
    absent_pools: list[str] = field(default_factory=list)
    pushed: int = 0
    reindexed: int = 0
    expired: list[str] = field(default_factory=list)
    held: int = 0
    raced: int = 0  # expiries lost to a report that landed first


def sweep_once(svc: LeaseService, interval_seconds: float = 60.0) -> SweepReport:
    """One pass. `interval_seconds` is the schedule's period: only time beyond it since the
    last pass counts as the service's own absence (a one-minute schedule against a 50 s
    grace must not read every ordinary gap as an outage)."""
    store, clock = svc.store, svc.clock
    now = clock.now_ms()
    state = store.get_sweeper_state()
    report = SweepReport(at=now)
    try:
        store.put_sweeper_state(replace(state, last_pass_at=now), expect_last=state.last_pass_at)
    except Conflict:
        report.skipped = True
        return report
    gap = now - state.last_pass_at if state.last_pass_at is not None else None
    report.gap_ms = gap
    absence = gap - int(interval_seconds * 1000) if gap is not None else None
    due: list[tuple[Lease, Pool]] = []
    pools = store.list_pools()
    for pool in pools:
        if gap is not None and absence is not None and absence > pool.grace_seconds * 1000:
            # The sweeper itself was away: that is the service's absence, not the workers'.
            report.absent_pools.append(pool.name)
            report.pushed += _push_out(svc, pool, gap)
            continue
        for lease_id in store.due_leases(pool.name, now):
            lease = store.get_lease(lease_id)
            if lease is None or lease.state not in REPORTABLE or lease.deadline is None:
                continue
            if lease.deadline > now:
                _reindex(svc, lease)
                report.reindexed += 1
            else:
                due.append((lease, pool))
    if report.absent_pools:
        _record(svc, now, "sweeper.service_absent", {"gap_ms": gap, "pools": report.absent_pools})
    if _brake(svc, state, now, due, pools, report):
        return report
    for lease, pool in due:
        if svc.expire(lease, pool) is None:
            report.raced += 1
        else:
            report.expired.append(lease.id)
    return report


def _brake(
    svc: LeaseService,
    state: SweeperState,
    now: int,
    due: list[tuple[Lease, Pool]],
    pools: list[Pool],
    report: SweepReport,
) -> bool:
    """True when this pass holds its expiries back (a mass expiry looks like our own fault)."""
    store = svc.store
    mass = False
    if len(due) >= MASS_EXPIRY_MIN:
        # Only whether held <= due/share matters, so no pool is counted past that bound.
        bound = math.floor(len(due) / MASS_EXPIRY_SHARE) + 1
        held = 0
        for pool in pools:
            held += store.count_held(pool.name, bound - held)
            if held >= bound:
                break
        mass = len(due) >= MASS_EXPIRY_SHARE * held
    if not mass:
        if state.hold_until is not None:
            store.put_sweeper_state(SweeperState(last_pass_at=now), expect_last=now)
        return False
    if state.hold_until is None:
        window = max(1000 * (lease.lease_seconds or pool.toleration_seconds) for lease, pool in due)
        hold_until = now + window
        store.put_sweeper_state(SweeperState(now, hold_until), expect_last=now)
        _record(
            svc,
            now,
            "sweeper.mass_expiry_held",
            {"due": len(due), "hold_until": hold_until, "lease_ids": [x.id for x, _ in due][:50]},
        )
        report.held = len(due)
        return True
    if now < state.hold_until:
        store.put_sweeper_state(SweeperState(now, state.hold_until), expect_last=now)
        report.held = len(due)
        return True
    # The window passed and they are still silent: proceed, and release the brake.
    store.put_sweeper_state(SweeperState(last_pass_at=now), expect_last=now)
    return False


def _push_out(svc: LeaseService, pool: Pool, gap: int) -> int:
    pushed = 0
    for lease_id in svc.store.due_leases(pool.name, None):
        lease = svc.store.get_lease(lease_id)
        if lease is None or lease.state not in REPORTABLE or lease.deadline is None:
            continue
        moved = replace(lease, deadline=lease.deadline + gap, due_at=lease.deadline + gap)
        try:
            svc.store.move_deadline(moved, seen=lease)
            pushed += 1
        except Conflict:
            pass  # it moved on by itself (a report or a transition): nothing to push
    return pushed


def _reindex(svc: LeaseService, lease: Lease) -> None:
    with contextlib.suppress(Conflict):  # moved on; the next pass sees its new row
        svc.store.reindex(replace(lease, due_at=lease.deadline), (lease.state, lease.fence))


def _record(svc: LeaseService, now: int, type_: str, data: dict[str, object]) -> None:
    svc.store.put_event(
        Event(
            id=svc.ids.new_id("ev"),
            subject_kind=SYSTEM[0],
            subject_id=SYSTEM[1],
            type=type_,
            at=now,
            data=dict(data),
        )
    )
