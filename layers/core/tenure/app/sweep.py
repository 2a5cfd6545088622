"""The sweeper: expiry, recovery, and the service's own absence (a pass that comes more than
a pool's grace after its schedule means the service was away, not the workers: none of that
pool's leases expires until every one it held has had its deadline pushed out by the gap, a
bounded number a pass; docs/fencing-and-timing.md)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from tenure.app.artifacts.retention import Retention
from tenure.app.autonomy.breaker import Breaker
from tenure.app.autonomy.delegation import Delegation
from tenure.app.dispatch_controls import Scheduler, queue_tiers
from tenure.app.leases.queue_timeouts import QueueTimeouts
from tenure.app.leases.recovery import Recovery
from tenure.app.leases.run_timeouts import RunTimeouts, index_at, may_time_out
from tenure.app.ports import AbsencePush, Clock, DueEntry, Ids, SweeperState
from tenure.app.rows import LeaseRows, PoolRows, QueueRows, SweeperRows, TimelineRows, WorkerRows
from tenure.app.workers import SEEN_LAG_SHARE, reachable
from tenure.domain.errors import Conflict
from tenure.domain.fencing import DEADLINE_SLACK, toleration_ms
from tenure.domain.model import Event, Lease, Pool
from tenure.domain.states import REPORTABLE
from tenure.records import record

# Kubernetes' node lifecycle controller stops evicting when too much of a zone looks dead at
# once. Likewise, counted in *workers*, not leases: when in one pass at least this share of a
# pool's recently reachable workers (and at least MASS_EXPIRY_MIN of them) has fallen silent
# together, that pool's expiries are held for one toleration window. One worker dying with
# many leases is an ordinary expiry.
MASS_EXPIRY_SHARE = 0.55
MASS_EXPIRY_MIN = 3
# How many due leases of one pool one pass reads (and expires) at most, or, after the
# sweeper's own absence, how many entries of its due index it reads (and leases it pushes out);
# the rest wait a pass.
DUE_PER_PASS = 500
# How many absences found earlier a pending push keeps apart, so the sweeper's row stays small
# however often the service goes away mid-push. Past it the two oldest are kept as one, at the
# later one's time: a lease renewed between them gets both gaps, more time than it lost, never
# less.
EARLIER_KEPT = 8
# How many index entries one pool's depth gauges read at most per pass (a count at the budget
# reads "at least this many"): a deep queue costs a bounded read a minute, never a Scan.
GAUGE_BUDGET = 10_000
SYSTEM = ("system", "sweeper")


@record
class PoolDepth:
    """One pool's gauges after a pass: what a worker fleet autoscales on."""

    pool: str
    queued: int  # pending leases claimable now (a deferred one counts from its not-before)
    held: int  # dispatched, running or paused leases
    oldest_queued_age_s: float  # how long the head of the queue has been claimable (0: none)


@dataclass
class SweepReport:
    at: int
    gap_ms: int | None = None
    skipped: bool = False  # another pass was running
    absent_pools: list[str] = field(default_factory=list)  # pools this pass found absent
    pushed: int = 0
    pushing: list[str] = field(default_factory=list)  # pools whose push goes on next pass
    reindexed: int = 0
    expired: list[str] = field(default_factory=list)
    held: int = 0
    raced: int = 0  # expiries lost to a report that landed first
    # Retention reclaim: leases whose logs and attachments this pass deleted, and due ones it
    # left for later passes (a lower bound: each pool's index is read bounded).
    reclaimed: list[str] = field(default_factory=list)
    reclaim_left: int = 0
    parked: list[str] = field(default_factory=list)  # tasks parked for starvation
    unblocked: list[str] = field(default_factory=list)  # tasks whose transient blocks expired
    mass_holds: list[str] = field(default_factory=list)  # pools whose expiries a new hold stopped
    capacity_waiting: list[str] = field(default_factory=list)  # pools a waiting episode began
    ttl_expired: list[str] = field(default_factory=list)  # tasks whose run a ttl ended
    queue_timed_out: list[str] = field(default_factory=list)  # pending leases past their expiry
    timed_out: list[str] = field(default_factory=list)  # held leases asked to stop (run timeout)
    marks_dropped: list[str] = field(default_factory=list)  # "pool:mark" no longer read for
    depths: list[PoolDepth] = field(default_factory=list)


def pool_depth(
    queues: QueueRows, leases: LeaseRows, pool: str, now: int, tiers: list[int | None] | None = None
) -> PoolDepth:
    """A pool's gauges from its indexes, bounded: a COUNT of the queue index up to now (each
    priority partition the pool marks, `tiers`, and the default one), a COUNT of the held
    index, and each partition's head entry (one eventually consistent read each)."""
    queued = held = 0
    age = 0.0
    for tier in tiers or [None]:
        here = queues.count_queue(pool, now + 1, GAUGE_BUDGET, tier)
        queued += here
        head = queues.queue_candidates(pool, 1, due_by=now, priority=tier) if here else []
        lease = leases.get_lease(head[0], consistent=False) if head else None
        if lease is not None:  # its place in the queue is when it became claimable
            age = max(age, max(0, now - max(lease.created_at, lease.not_before or 0)) / 1000)
    held = queues.count_held(pool, GAUGE_BUDGET)
    return PoolDepth(pool=pool, queued=queued, held=held, oldest_queued_age_s=age)


class Sweep:
    """One pass of the sweeper, built from what it reads and the use cases it hands work to."""

    def __init__(
        self,
        *,
        sweeper: SweeperRows,
        pools: PoolRows,
        leases: LeaseRows,
        queues: QueueRows,
        workers: WorkerRows,
        timeline: TimelineRows,
        clock: Clock,
        ids: Ids,
        queue_timeouts: QueueTimeouts,
        run_timeouts: RunTimeouts,
        recovery: Recovery,
        scheduler: Scheduler,
        breaker: Breaker,
        delegation: Delegation,
        retention: Retention,
    ) -> None:
        self.sweeper = sweeper
        self.pools = pools
        self.leases = leases
        self.queues = queues
        self.workers = workers
        self.timeline = timeline
        self.clock = clock
        self.ids = ids
        self.queue_timeouts = queue_timeouts
        self.run_timeouts = run_timeouts
        self.recovery = recovery
        self.scheduler = scheduler
        self.breaker = breaker
        self.delegation = delegation
        self.retention = retention

    def once(self, interval_seconds: float = 60.0, gauges: bool = True) -> SweepReport:
        """One pass. `interval_seconds` is the schedule's period: only time beyond it since the
        last pass counts as the service's own absence (a one-minute schedule against a 50 s
        grace must not read every ordinary gap as an outage). `gauges` reads each pool's depth
        for the caller to publish (two of the four queries a pass makes a pool, of five once
        the pool is as old as its retention); a caller that publishes none leaves them out."""
        now = self.clock.now_ms()
        state = self.sweeper.get_sweeper_state()
        report = SweepReport(at=now)
        pools = self.pools.list_pools()
        gap = now - state.last_pass_at if state.last_pass_at is not None else None
        report.gap_ms = gap
        report.absent_pools = absent_pools(pools, gap, interval_seconds)
        absences = pending_absences(state.absences, report.absent_pools, now, gap or 0)
        try:  # the pass's turn, and what it found absent, before any lease is pushed
            self.sweeper.put_sweeper_state(
                replace(state, last_pass_at=now, absences=absences), expect_last=state.last_pass_at
            )
        except Conflict:
            return SweepReport(at=now, skipped=True)
        if report.absent_pools:
            self._record(
                now, "sweeper.service_absent", {"gap_ms": gap, "pools": report.absent_pools}
            )
        holds = dict(state.holds)
        pending = dict(absences)
        for pool in pools:
            push = absences.get(pool.name)
            if push is None:
                held = pool.name in state.holds
                self._expire(pool, now, report, holds, held, interval_seconds)
                continue
            left = self._push_out(pool, push, report)  # none of its leases expires meanwhile
            if left is None:
                del pending[pool.name]
            else:
                pending[pool.name] = left
        report.pushing = sorted(pending)
        taken = replace(state, last_pass_at=now, absences=absences)
        if pending != absences:  # where each walk got to, kept before the rest of the pass
            taken = replace(taken, absences=pending)
            self.sweeper.put_sweeper_state(taken, expect_last=now)
        # Long-starved work goes to needs_attention; transient blocks past their expiry are closed.
        report.parked = self.scheduler.park_starved(pools)
        report.unblocked = self.breaker.finalize_expired_blocks()
        waiting = self.scheduler.note_capacity_waiting(pools, state.capacity_waiting)
        report.capacity_waiting = sorted(set(waiting) - set(state.capacity_waiting))
        ttl_cursor, report.ttl_expired = self.delegation.expire_ttls(state.ttl_cursor)
        report.queue_timed_out, queue_raced = self.queue_timeouts.expire_queued(pools)
        report.raced += queue_raced
        report.marks_dropped = self.queue_timeouts.drop_stale_marks(pools)
        kept = SweeperState(now, holds, waiting, ttl_cursor, pending)
        if kept != taken:
            self.sweeper.put_sweeper_state(kept, expect_last=now)
        reclaim = self.retention.reclaim_due(pools=pools)
        report.reclaimed, report.reclaim_left = reclaim.leases, reclaim.left
        if gauges:
            report.depths = [
                pool_depth(
                    self.queues, self.leases, pool.name, self.clock.now_ms(), queue_tiers(pool)
                )
                for pool in pools
            ]
        return report

    def _expire(
        self,
        pool: Pool,
        now: int,
        report: SweepReport,
        holds: dict[str, int],
        held: bool,
        interval_seconds: float,
    ) -> None:
        """Expire what of `pool` is due, unless the mass-expiry brake holds it back (`holds`,
        updated in place; `held`: the pass found a hold on the pool already)."""
        due = self._due(pool, now, report)
        if self._brake(pool, due, holds, now, interval_seconds):
            report.held += len(due)
            if not held:
                report.mass_holds.append(pool.name)
            return
        for lease in due:
            if self.recovery.expire(lease, pool) is None:
                report.raced += 1
            else:
                report.expired.append(lease.id)

    def _due(self, pool: Pool, now: int, report: SweepReport) -> list[Lease]:
        """The pool's held leases whose deadline has passed (at most DUE_PER_PASS read); on
        the way, a lease past its run timeout is asked to stop, and one whose deadline moved
        out since it was indexed is indexed again."""
        due: list[Lease] = []
        for lease_id in self.queues.due_leases(pool.name, now, limit=DUE_PER_PASS):
            lease = self.leases.get_lease(lease_id)
            if lease is None or lease.state not in REPORTABLE or lease.deadline is None:
                continue
            if self._timed_out(lease, now, report):
                continue
            if lease.deadline > now:
                self._reindex(lease)
                report.reindexed += 1
            else:
                due.append(lease)
        return due

    def _timed_out(self, lease: Lease, now: int, report: SweepReport) -> bool:
        """True when `lease` ran past its run timeout: it is asked to stop now, and ended by its
        report or, if its worker stays silent, by a later pass once its deadline passes."""
        if lease.run_deadline is None or lease.run_deadline > now or not may_time_out(lease):
            return False
        if self.run_timeouts.time_out(lease) is None:
            report.raced += 1
        else:
            report.timed_out.append(lease.id)
        return True

    def _brake(
        self,
        pool: Pool,
        due: list[Lease],
        holds: dict[str, int],
        now: int,
        interval_seconds: float,
    ) -> bool:
        """True when this pass holds `pool`'s expiries back (a mass expiry looks like our fault).
        Updates `holds` (pool -> held until) in place."""
        silent, recent = self._silent_workers(pool, due, now, interval_seconds)
        mass = len(silent) >= MASS_EXPIRY_MIN and len(silent) >= MASS_EXPIRY_SHARE * len(recent)
        hold_until = holds.get(pool.name)
        if not mass:
            holds.pop(pool.name, None)
            return False
        if hold_until is None:
            hold_until = now + max(toleration_ms(lease, pool) for lease in due)
            holds[pool.name] = hold_until
            self._record(
                now,
                "sweeper.mass_expiry_held",
                {
                    "pool": pool.name,
                    "due": len(due),
                    "silent_workers": len(silent),
                    "recent_workers": len(recent),
                    "hold_until": hold_until,
                    "lease_ids": [x.id for x in due][:50],
                },
            )
            return True
        # Still held inside its window; once the window has passed the pass proceeds, and the
        # entry stays until a pass sees no mass silence, so one outage is held only once.
        return now < hold_until

    def _silent_workers(
        self, pool: Pool, due: list[Lease], now: int, interval_seconds: float
    ) -> tuple[set[str], set[str]]:
        """(recently reachable workers now silent, recently reachable workers) of a pool.

        A worker that still heartbeats some leases is not silent; an idle worker (long-polling
        claims) that went quiet in the same outage is. "Recently" reaches back over the longest
        time a due lease can have been silent (a toleration and its DEADLINE_SLACK, 1.5
        tolerations, and a sweep period) plus the lag of last_seen, so a fleet that died together
        still counts as recently reachable."""
        holders = {lease.worker_id for lease in due if lease.worker_id}
        if not holders:
            return set(), set()
        longest = max(toleration_ms(lease, pool) for lease in due)
        window = int(longest * (1 + DEADLINE_SLACK)) + int(interval_seconds * 1000)
        window += int(pool.grace_seconds * 1000 * (1 + SEEN_LAG_SHARE))
        workers = self.workers.list_workers(pool.name, now_ms=now)
        recent = {w.worker_id for w in workers if now - w.last_seen <= window} | holders
        alive = {w.worker_id for w in workers if reachable(w, pool, now)}
        return recent - alive, recent

    def _push_out(self, pool: Pool, push: AbsencePush, report: SweepReport) -> AbsencePush | None:
        """One page of `pool`'s walk for `push` (at most DUE_PER_PASS entries of its due
        index, after the last one a pass handled): each lease on it pushed out by what it is
        owed. The push with its place moved on, or None once a page short of the bound was
        handled with no write lost: the walk has been through every lease the pool holds.

        A pushed lease moves later in the index and the walk may meet it again: its mark says
        it is done. A write lost to another writer stops the page there, so the next pass
        reads that lease again as it is by then (renewed or ended, it is owed nothing)."""
        page = self.queues.due_page(pool.name, push.after, DUE_PER_PASS)
        for entry in page:
            if not self._push_one(entry, push, report):
                return push
            push = replace(push, after=entry)
        return push if len(page) >= DUE_PER_PASS else None

    def _push_one(self, entry: DueEntry, push: AbsencePush, report: SweepReport) -> bool:
        """Push the lease of `entry` out by what `push` owes it, in one conditional write
        that marks it; False when that write lost (the lease moved on meanwhile)."""
        lease = self.leases.get_lease(entry.lease_id)
        if lease is None or lease.state not in REPORTABLE or lease.deadline is None:
            return True  # no longer held: the index lags its rows
        gap = owed(push, lease)
        if not gap:
            return True
        # One overdue already before the absence began lands just after the pass that found
        # it: if still silent, it expires on the first ordinary pass once the walk is done.
        pushed_to = max(lease.deadline + gap, push.at + 1)
        moved = replace(
            lease, deadline=pushed_to, due_at=index_at(lease, pushed_to), pushed_for=push.at
        )
        try:
            self.leases.move_deadline(moved, seen=lease)
        except Conflict:
            return False
        report.pushed += 1
        return True

    def _reindex(self, lease: Lease) -> None:
        with contextlib.suppress(Conflict):  # moved on; the next pass sees its new row
            due_at = index_at(lease, lease.deadline or 0)
            self.leases.reindex(replace(lease, due_at=due_at), (lease.state, lease.fence))

    def _record(self, now: int, type_: str, data: dict[str, object]) -> None:
        self.timeline.put_event(
            Event(
                id=self.ids.new_id("ev"),
                subject_kind=SYSTEM[0],
                subject_id=SYSTEM[1],
                type=type_,
                at=now,
                data=dict(data),
            )
        )


def absent_pools(pools: list[Pool], gap: int | None, interval_seconds: float) -> list[str]:
    """The pools for which a pass `gap` ms after the last one finds the service itself away:
    the time beyond the schedule's period is longer than the pool's grace."""
    if gap is None:
        return []
    absence = gap - int(interval_seconds * 1000)
    return [pool.name for pool in pools if absence > pool.grace_seconds * 1000]


def pending_absences(
    absences: dict[str, AbsencePush], absent: list[str], now: int, gap: int
) -> dict[str, AbsencePush]:
    """The pushes pending once a pass at `now` found `absent` away for `gap` ms. A pool found
    away again before its push was done starts its walk again from the beginning of the index,
    the pending absence kept as an earlier one: a lease already pushed for it, or renewed or
    claimed since it was found, is owed the new gap alone, one silent through both, both."""
    out = dict(absences)
    for name in absent:
        before = absences.get(name)
        earlier = (*before.earlier, (before.at, before.gap_ms)) if before else ()
        if len(earlier) > EARLIER_KEPT:
            (_, oldest), (then, next_gap) = earlier[:2]
            earlier = ((then, oldest + next_gap), *earlier[2:])
        out[name] = AbsencePush(at=now, gap_ms=gap, earlier=earlier)
    return out


def owed(push: AbsencePush, lease: Lease) -> int:
    """How far `push` moves `lease`'s deadline: the gaps of the absences found after the
    deadline was last written fresh (its claim, a heartbeat that renewed it) or pushed out for
    an absence, those it was held through in silence. 0 for a lease renewed or claimed since
    the last absence was found, or pushed for it already."""
    since = max(lease.claimed_at or 0, lease.heartbeat_at or 0, lease.pushed_for or 0)
    return sum(gap for at, gap in (*push.earlier, (push.at, push.gap_ms)) if at > since)
