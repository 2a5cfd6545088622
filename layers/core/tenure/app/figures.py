"""A pool's figures for an operator: what is queued and held, how old the oldest queued lease
is, the last hour's claims, completions and failures, and a mass-expiry hold while one is on.

Read only, and bounded: COUNT queries of the queue and held-lease indexes (at most
`COUNT_BUDGET` entries each), one head entry per queue partition, one page of the ended-lease
index, one of the held-lease index and one of the space's lease list (at most `HOUR_READS`
lease rows each), and the sweeper's state row. Nothing here writes, so a pool nobody looks
at costs nothing."""

from __future__ import annotations

from tenure.app.dispatch_controls import queue_tiers
from tenure.app.ports import Clock
from tenure.app.rows import LeaseRows, QueueRows, RetentionRows, SweeperRows
from tenure.app.setup.pools import Pools
from tenure.domain.model import Pool, Principal
from tenure.domain.states import LeaseState
from tenure.records import record

COUNT_BUDGET = 1000  # index entries a COUNT reads; past it the figure reads "at least"
HOUR_READS = 200  # lease rows read from each index for the last hour's figures
HOUR_MS = 3_600_000
FAILURES = frozenset({LeaseState.FAILED, LeaseState.LOST})


@record
class LastHour:
    claims: int  # leases claimed in the hour that are held now or have ended since
    completed: int
    failed: int  # failed or lost (its worker went silent)
    capped: bool  # a page was full: each figure is then a lower bound


@record
class PoolFigures:
    pool: str
    space: str
    queued: int
    queued_capped: bool
    held: int
    held_capped: bool
    oldest_queued_age_ms: int | None
    last_hour: LastHour
    hold_until: int | None  # the mass-expiry hold's end, while one is on


class Figures:
    def __init__(
        self,
        pools: Pools,
        *,
        queues: QueueRows,
        leases: LeaseRows,
        sweeper: SweeperRows,
        retention: RetentionRows,
        clock: Clock,
    ) -> None:
        self.pool_rows = pools  # the use case: it refuses a pool outside the caller's spaces
        self.queues = queues
        self.leases = leases
        self.sweeper = sweeper
        self.retention = retention
        self.clock = clock

    def pool_figures(self, actor: Principal, name: str) -> PoolFigures:
        pool = self.pool_rows.get_pool(actor, name)  # refuses a pool outside the caller's spaces
        now = self.clock.now_ms()
        queued = 0
        queued_capped = False
        oldest: int | None = None
        for tier in queue_tiers(pool):
            here = self.queues.count_queue(pool.name, now + 1, COUNT_BUDGET, tier)
            queued += here
            queued_capped = queued_capped or here >= COUNT_BUDGET
            head = (
                self.queues.queue_candidates(pool.name, 1, due_by=now, priority=tier)
                if here
                else []
            )
            lease = self.leases.get_lease(head[0], consistent=False) if head else None
            if lease is not None:  # its place in the queue is when it became claimable
                age = max(0, now - max(lease.created_at, lease.not_before or 0))
                oldest = age if oldest is None else max(oldest, age)
        held = self.queues.count_held(pool.name, COUNT_BUDGET)
        hold = self.sweeper.get_sweeper_state().holds.get(pool.name)
        return PoolFigures(
            pool=pool.name,
            space=pool.space,
            queued=queued,
            queued_capped=queued_capped,
            held=held,
            held_capped=held >= COUNT_BUDGET,
            oldest_queued_age_ms=oldest,
            last_hour=self._last_hour(pool, now),
            hold_until=hold if hold is not None and hold > now else None,
        )

    def _last_hour(self, pool: Pool, now: int) -> LastHour:
        """Counted from the leases themselves: those that ended in the hour and those held now
        (the held index); a claim is one whose claimed_at falls in the hour. A lease claimed in
        the hour and put back in the queue since is not counted. The ended ones are found in the
        ended index (newest first), which holds only leases with logs or attachments, and among
        the space's newest leases (its lease list, one page): a lease with neither that ended in
        the hour but is older than that page is not seen, so a full page makes the figures lower
        bounds (`capped`)."""
        since = now - HOUR_MS
        ended_ids = self.retention.ended_since(pool.name, since, HOUR_READS)
        held_ids = self.queues.due_leases(pool.name, None, HOUR_READS)
        newest = self.leases.list_leases(pool.space, HOUR_READS, None, None, None)
        rows = self.leases.get_leases([*ended_ids, *held_ids], consistent=False)
        ended = {i: rows[i] for i in ended_ids if i in rows}
        for lease in newest.leases:
            if lease.pool == pool.name and lease.state.terminal and (lease.ended_at or 0) >= since:
                ended.setdefault(lease.id, lease)
        held = [rows[i] for i in held_ids if i in rows]
        claimed = [
            x
            for x in (*ended.values(), *held)
            if x.claimed_at is not None and x.claimed_at >= since
        ]
        return LastHour(
            claims=len({x.id for x in claimed}),
            completed=sum(1 for x in ended.values() if x.state is LeaseState.COMPLETED),
            failed=sum(1 for x in ended.values() if x.state in FAILURES),
            capped=len(ended_ids) >= HOUR_READS
            or len(held_ids) >= HOUR_READS
            or newest.next_cursor is not None,
        )
