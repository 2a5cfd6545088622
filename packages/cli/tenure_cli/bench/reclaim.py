"""What a lease of the cost bench costs later: its retention reclaim, run after the
workload and priced per lease (bench/cost.py books it to the leases)."""

from __future__ import annotations

from dataclasses import dataclass

from tenure import wiring

from . import prices
from .meter import Usage
from .rig import Rig


@dataclass
class Later:
    """The retention reclaim, priced per lease: its DynamoDB and other AWS usage, and the
    sweeper's extra duration and log bytes over passes that had nothing to reclaim."""

    used: Usage
    reactor_invocations: int
    lambda_duration_usd: float
    log_bytes: float
    passes: int
    reclaimed: int  # by the sweeper: the leases with logs or attachments
    derived: int  # by derivation: the leases with neither (nothing written, nothing deleted)


RECLAIM = "reclaim"  # the sweeper passes of the retention reclaim
RECLAIM_IDLE = "reclaim-idle"  # a pass with nothing left to reclaim: what any pass costs
RECLAIM_REACTOR = "reclaim-reactor"  # the reactor invoked by the reclaim's writes


def reclaim_later(rig: Rig, started: int, leases: int) -> Later:
    """Move the service's clock to the longest pool retention after the workload began, then
    run the sweeper once a virtual minute, as its schedule does, until that retention has
    passed since the workload's last end and a pass finds nothing left; then one pass with
    nothing left, whose usage every pass has anyway and is taken off. A lease with logs or
    attachments is reclaimed by a pass; one with neither reads reclaimed by derivation, with
    nothing written: every lease of the workload must read reclaimed by the end. Each
    reclaimed lease's stream records reach the reactor alone (at the reference rate a
    lease's reclaim does): an upper bound on its invocations."""
    pools = wiring.service().rows.pools.list_pools()
    retention_ms = max(p.retention_seconds for p in pools) * 1000
    ended_by = rig.clock.now_ms()  # every lease of the workload has ended
    rig.clock.now = max(rig.clock.now, started + retention_ms)
    # The first pass after the jump reads the gap as the service's absence; nothing has ended
    # long enough ago yet, so it reclaims nothing and is no lease's cost.
    rig.pump.actor = "sweeper"
    rig.sweep()
    rig.pump.actor, rig.pump.per_item = RECLAIM_REACTOR, True
    passes, reclaimed, busy = 0, 0, True
    try:
        while busy or rig.clock.now_ms() < ended_by + retention_ms:
            rig.clock.advance(60)
            answer = rig.sweep(RECLAIM)
            passes += 1
            reclaimed += int(answer["reclaimed"])
            busy = bool(answer["reclaimed"] or answer["reclaim_left"])
            if passes > 10_000:
                raise RuntimeError(f"only {reclaimed} of {leases} leases were reclaimed")
        rig.clock.advance(60)
        idle = rig.sweep(RECLAIM_IDLE)
        if idle["reclaimed"] or idle["reclaim_left"]:
            raise RuntimeError(f"the pass after the reclaim still found some: {idle}")
    finally:
        rig.pump.actor, rig.pump.per_item = "reactor", False
    used = rig.meter.usage(RECLAIM).less(rig.meter.usage(RECLAIM_IDLE), passes)
    used.add(rig.meter.usage(RECLAIM_REACTOR))
    sweeps, idles = rig.calls[RECLAIM], rig.calls[RECLAIM_IDLE]
    extra_ms = max(0.0, sum(sweeps.billed_ms) - passes * sum(idles.billed_ms) / idles.count)
    extra_logs = max(
        0.0,
        sweeps.log_bytes
        - passes * idles.log_bytes / idles.count
        + prices.LOG_EVENT_OVERHEAD_BYTES * (sweeps.log_events - passes * idles.log_events),
    )
    reactor = rig.calls.get(RECLAIM_REACTOR)
    reactor_count = reactor.count if reactor is not None else 0
    duration = prices.lambda_duration_usd(extra_ms, rig.memory["sweeper"])
    if reactor is not None and reactor_count:
        duration += prices.lambda_duration_usd(sum(reactor.billed_ms), rig.memory["reactor"])
        extra_logs += reactor.log_bytes + prices.LOG_EVENT_OVERHEAD_BYTES * reactor.log_events
    derived = _reclaimed_by_derivation(rig)
    if reclaimed + derived != leases:
        raise RuntimeError(
            f"{reclaimed} leases were reclaimed by the sweeper and {derived} by derivation, "
            f"of {leases}"
        )
    return Later(used, reactor_count, duration, extra_logs, passes, reclaimed, derived)


def _reclaimed_by_derivation(rig: Rig) -> int:
    """How many of the bench pool's leases read reclaimed with no reclaim written: the
    bench's own check, read under an actor of its own (no lease's cost)."""
    svc = wiring.service()
    found, cursor = 0, None
    with rig.meter.acting("bench-check"):
        for _ in range(10_000):
            page = svc.rows.leases.list_leases("BENCH", 100, cursor, None, "bench")
            for lease in page.leases:
                if (
                    lease.reclaimed_at is None
                    and svc.kernel.catalog.reclaimed_at(lease) is not None
                ):
                    found += 1
            cursor = page.next_cursor
            if cursor is None:
                break
    return found
