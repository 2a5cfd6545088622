"""What every use case shares: lookups, the one commit path, fencing helpers, bounded retries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from tenure.app.catalog import Catalog, SchemaGates
from tenure.app.own_leases import OwnLeases, StaleReports
from tenure.app.ports import Ceiling, Change, Clock, Ids, JobWrite, LeaseWrite, SignalBump
from tenure.app.rows import Rows
from tenure.domain import fencing
from tenure.domain.errors import (
    Conflict,
    LeaseNotFound,
    TaskNotFound,
    Unavailable,
)
from tenure.domain.model import (
    DEFAULT_PRIORITY,
    PRIORITY_MARK_REFRESH_MS,
    QUEUE_EXPIRY_MARK,
    Event,
    Instance,
    Job,
    Lease,
    Pool,
    Principal,
    Space,
    Task,
    first_job_id,
    implied_job,
)
from tenure.domain.states import REPORTABLE, EndReason, LeaseState
from tenure.domain.timeline import first_lease_id, with_stamp
from tenure.domain.transitions import Move, moved, must_signal, successor_of

T = TypeVar("T")

# A write that keeps losing its condition is re-judged from a fresh read this many times at
# most; losing every time means the row is churning faster than the request can keep up, and
# the caller hears 503 `unavailable` with a Retry-After instead of a request that never ends.
MAX_WRITE_TRIES = 6
# Rivals that lose to each other re-read at once and collide again in lockstep (n rivals:
# the last loses n-1 times in a row); a full-jitter back-off of at most a base times 2^try
# spreads them out. The base is the lost write's own round trip, at least the floor and at
# most the cap: rivals only collide when their writes overlap, so the windows must be wide
# in round trips, not in seconds (a slow table or a busy host widens them with it). At the
# floor every try sums to under a third of a second; at the cap, to 3.1 s.
SETTLE_BACKOFF_S = 0.01
SETTLE_BACKOFF_CAP_S = 0.1
RETRY_AFTER_SECONDS = 1


class Kernel:
    def __init__(self, rows: Rows, clock: Clock, ids: Ids) -> None:
        self.leases = rows.leases
        self.tasks = rows.tasks
        self.pools = rows.pools
        self.timeline = rows.timeline
        self.committer = rows.committer
        self.clock = clock
        self.ids = ids
        self.catalog = Catalog(rows.pools, rows.spaces, clock)
        self.gates = SchemaGates(rows.schema, clock)
        # What the API reports as metrics after each request (claims, lost races, …).
        self.counters: Counter[str] = Counter()
        self.stale = StaleReports(rows.timeline, clock, ids, self.counters)
        self.owned = OwnLeases(self.lease, clock)

    # ----------------------------------------------------------------- bounded retries

    def settle(self, lease: Lease, step: Callable[[Lease], T]) -> T:
        """Run `step` on the lease; when its conditional write loses, judge again from a
        fresh read, a bounded number of times (only a lost condition is retried)."""
        for attempt in range(MAX_WRITE_TRIES):
            began = self.clock.now_ms()
            try:
                return step(lease)
            except Conflict:
                self.counters["lost_writes"] += 1
                if attempt + 1 < MAX_WRITE_TRIES:
                    self.back_off(attempt, (self.clock.now_ms() - began) / 1000)
                    lease = self.lease(lease.id)
        raise Unavailable(
            f"lease {lease.id} kept changing during this request; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def back_off(self, attempt: int, round_trip_s: float = 0.0) -> None:
        """Rest a random while before re-reading a row whose write was just lost, in windows
        of the lost write's round trip (`round_trip_s`, bounded)."""
        base = min(max(SETTLE_BACKOFF_S, round_trip_s), SETTLE_BACKOFF_CAP_S)
        self.clock.sleep(self.ids.jitter() * base * 2**attempt)

    # ------------------------------------------------------------------------ writes

    def apply(
        self, lease: Lease, move: Move, data: dict[str, Any], now: int, **fields: Any
    ) -> Lease:
        """The lease after `move` (a row of the table in domain/transitions.py), as the next
        version of the row read."""
        new = replace(lease, state=move.to, revoke=move.revoke, **fields)
        if move.end_reason is not None:
            reason = move.end_reason
            if reason is EndReason.KILLED and lease.timed_out_at is not None:
                reason = EndReason.TIMED_OUT  # the kill its run timeout asked for
            new = replace(new, end_reason=reason, ended_at=now)
            if not self.gates.derived_reclaims():
                new = replace(new, keeps_detail=True)  # every ending is indexed, as before
        return moved(lease, new, move.event, data, now)

    def write(self, old: Lease, new: Lease) -> None:
        """One conditional write: `new` lands only if the row still is the `old` it read."""
        self.commit(Change(leases=[over(old, new)]))

    def commit(self, change: Change) -> None:
        """Commit, giving back the ceiling slots of every counted lease that ends here."""
        freed = [
            Ceiling(scope, name, -1)
            for write in change.leases
            if write.new.state.terminal
            and write.new.counted
            and write.expect is not None
            and write.expect[0] in REPORTABLE
            for scope, _, name in (entry.partition(":") for entry in write.new.counted)
        ]
        if freed:
            change = replace(change, ceilings=[*change.ceilings, *freed])
        # The event is the committed write: a routine transition the row itself can tell
        # carries its stamp, set by this very write (domain/timeline.py).
        stamped = [replace(w, new=with_stamp(w.seen, w.new)) for w in change.leases]
        change = replace(change, leases=stamped, signals=self.signals_of(change))
        self.mark_priorities(change)
        self.committer.commit(change)

    def signals_of(self, change: Change) -> list[SignalBump]:
        """The change's signal bumps with those its lease writes call for (must_signal in
        domain/transitions.py), each worker's once. None added while the table's schema is
        below the version from which heartbeats trust the epoch: an earlier release's writers
        do not raise it."""
        wanted = {
            bump.key: bump
            for write in change.leases
            if write.seen is not None and (bump := self.signal_bump(write.seen, write.new))
        }
        for bump in change.signals:
            wanted.pop(bump.key, None)
        return [*change.signals, *(wanted[key] for key in sorted(wanted))]

    def signal_bump(self, seen: Lease, new: Lease) -> SignalBump | None:
        """The signal raise that writing `new` over `seen` must carry (domain/transitions.py
        must_signal), or None — always None while the table's schema is below the version
        from which heartbeats trust the epoch: an earlier release's writers do not raise it."""
        key = must_signal(seen, new)
        if key is None or not self.gates.worker_signals():
            return None
        return SignalBump(key, self.clock.now_ms())

    def mark_priorities(self, change: Change) -> None:
        """Before a new pending lease at a priority other than the default, or with a queue
        timeout, is written, mark the pool row (`queue_marks`), so claims read that priority's
        partition (app/dispatch_controls.py queue_tiers) and the sweeper reads the pool's queue
        timeouts (app/leases/queue_timeouts.py); a pool with neither reads neither. Marked first and
        on its own: a mark without its lease (a commit that then fails) costs an empty read
        until the sweeper drops it; a lease without its mark could be missed. A mark newer
        than PRIORITY_MARK_REFRESH_MS is left as it is: the sweeper drops only marks older
        than PRIORITY_MARK_GRACE_MS whose partition it finds empty."""
        wanted: set[tuple[str, str]] = set()
        for write in change.leases:
            new = write.new
            if new.state is not LeaseState.PENDING or write.expect is not None:
                continue
            if new.priority is not None and new.priority != DEFAULT_PRIORITY:
                wanted.add((new.pool, str(new.priority)))
            if new.queue_expires_at is not None:
                wanted.add((new.pool, QUEUE_EXPIRY_MARK))
        now = self.clock.now_ms()
        for pool_name, mark in sorted(wanted):
            marked = (self.catalog.pool(pool_name).queue_marks or {}).get(mark)
            if marked is not None and now - marked < PRIORITY_MARK_REFRESH_MS:
                continue
            self.pools.mark_queue(pool_name, mark, now)
            self.catalog.forget_pool(pool_name)

    def with_successor(
        self, change: Change, lease: Lease, recovered: bool, job: Job | None = None
    ) -> Change:
        """Add to `change` the job's next pending lease under fence + 1 (same attempt);
        `job` is the lease's, when the caller has just read it at the lease's fence."""
        if job is None or job.id != lease.job_id or job.fence != lease.fence:
            job = self.job_at(lease)
        successor, next_job = successor_of(
            lease,
            job,
            self.clock.now_ms(),
            self.ids.new_id("lease"),
            recovered,
            self.gates.first_stamps(lease.subject_kind),
        )
        return Change(
            leases=[*change.leases, LeaseWrite(successor)],
            jobs=[*change.jobs, JobWrite(next_job, expect_fence=job.fence)],
            tasks=change.tasks,
        )

    # ---------------------------------------------------------------- stale reports

    def job_of(self, lease: Lease, task: Task | None = None) -> Job | None:
        """The lease's job: its row, or for a task's first job that has none yet
        (domain/model.py first_job_id), the job its first lease and its task (`task`, when
        the caller has read it) imply."""
        job = self.leases.get_job(lease.job_id)
        if job is not None or lease.task_id is None or lease.job_id != first_job_id(lease.task_id):
            return job
        first_id = first_lease_id(lease.task_id)
        first = lease if lease.id == first_id else self.leases.get_lease(first_id)
        if task is None or task.id != lease.task_id:
            task = self.tasks.get_task(lease.task_id)
        return implied_job(task, first) if task is not None and first is not None else None

    def job_at(self, lease: Lease, task: Task | None = None) -> Job:
        """The lease's job, still at the lease's fence (else the job moved on: Conflict)."""
        job = self.job_of(lease, task)
        if job is None or job.fence != lease.fence:
            raise Conflict(f"job {lease.job_id} moved on")
        return job

    # ----------------------------------------------------------------------- lookups

    def task_as_filed(self, task_id: str) -> Task | None:
        """The task, for fields its filing wrote once and nothing rewrites (its parent, its
        creator lease and whether to wake it): any copy has them right, so an eventually
        consistent read does, at half a read unit. Only a copy not visible yet (a task filed
        a moment ago) is read again consistently."""
        return self.tasks.get_task(task_id, consistent=False) or self.tasks.get_task(task_id)

    def newest_lease(self, task: Task) -> Lease | None:
        if task.job_id is None:
            return None
        job = self.leases.get_job(task.job_id)
        if job is None and task.job_id == first_job_id(task.id):
            return self.leases.get_lease(first_lease_id(task.id))  # its job has no row yet
        return self.leases.get_lease(job.lease_id) if job else None

    def lease(self, lease_id: str, consistent: bool = True) -> Lease:
        lease = (
            self.leases.get_lease(lease_id, consistent=consistent)
            if len(lease_id) <= fencing.MAX_ID_LENGTH
            else None
        )
        if lease is None:
            raise LeaseNotFound(f"lease {lease_id} does not exist")
        return lease

    def task(self, task_id: str) -> Task:
        task = self.tasks.get_task(task_id) if len(task_id) <= fencing.MAX_ID_LENGTH else None
        if task is None:
            raise TaskNotFound(f"task {task_id} does not exist")
        return task

    # ------------- what the claim and the completion stages still ask the kernel for: the
    # catalog's reads and the schema's gates, passed on as they are until they take them.

    def claims_may_start(self) -> bool:
        return self.gates.claims_may_start()

    def event(self, lease: Lease, type_: str, data: dict[str, Any]) -> Event:
        return self.stale.event(lease, type_, data)

    def acting_lease(self, actor: Principal) -> Lease:
        return self.owned.acting_lease(actor)

    def pool(self, name: str) -> Pool:
        return self.catalog.pool(name)

    def fresh_pool(self, name: str) -> Pool:
        return self.catalog.fresh_pool(name)

    def space_cached(self, key: str) -> Space:
        return self.catalog.space_cached(key)

    def fresh_space(self, key: str) -> Space:
        return self.catalog.fresh_space(key)

    def instance(self) -> Instance:
        return self.catalog.instance()

    def fresh_instance(self) -> Instance:
        return self.catalog.fresh_instance()

    def pool_in_space(self, name: str, space: str) -> Pool:
        return self.catalog.pool_in_space(name, space)

    def refuse_archived(self, key: str) -> None:
        self.catalog.refuse_archived(key)

    def reclaimed_at(self, lease: Lease) -> int | None:
        return self.catalog.reclaimed_at(lease)

    def files_untransacted(self) -> bool:
        return self.gates.files_untransacted()

    def successes_derived(self) -> bool:
        return self.gates.successes_derived()


def over(seen: Lease, new: Lease) -> LeaseWrite:
    """Replace the row `seen` with `new`: fenced on its state and fence, and on its version and
    deadline so that no transition or heartbeat landing in between is overwritten."""
    return LeaseWrite(new, expect=(seen.state, seen.fence), seen=seen)
