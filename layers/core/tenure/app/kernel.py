"""What every use case shares: lookups, the one commit path, fencing helpers, bounded retries."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, TypeVar, cast

from tenure.app.migrations import (
    CLAIM_START_FROM_SCHEMA,
    CREATED_STAMPS_FROM_SCHEMA,
    DERIVED_RECLAIMS_FROM_SCHEMA,
    IMPLIED_JOBS_FROM_SCHEMA,
    LISTED_BY_TASK_FROM_SCHEMA,
    SCHEMA_VERSION,
    STAMPS_FROM_SCHEMA,
    SUCCESSES_DERIVED_FROM_SCHEMA,
    UNTRANSACTED_FILING_FROM_SCHEMA,
)
from tenure.app.ports import Ceiling, Change, Clock, Ids, JobWrite, LeaseWrite
from tenure.app.rows import Rows, Store
from tenure.domain import authz
from tenure.domain import fencing as rules
from tenure.domain.errors import (
    Conflict,
    InvalidTransition,
    LeaseNotFound,
    NotFound,
    StaleLease,
    TaskNotFound,
    Unavailable,
    ValidationFailed,
)
from tenure.domain.model import (
    DEFAULT_PRIORITY,
    MIN_RETENTION_MS,
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
    derived_reclaimed_at,
    first_job_id,
    implied_job,
)
from tenure.domain.states import REPORTABLE, EndReason, LeaseState
from tenure.domain.timeline import first_lease_id, first_stamps, with_stamp
from tenure.domain.transitions import Move

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
# Pools and spaces change rarely; a warm function keeps them this long instead of a read per
# heartbeat. (Pause and archive take effect within this window on every warm instance.)
POOL_CACHE_MS = 30_000

# The pool, space and instance rows read fresh (consistent) during the current request, by
# (kind, key). A view of what the request just did — a claim's answer, a new task's lease —
# judges its queued condition by those same reads instead of making them again (3 read
# units per answer). None outside a request: the reactor, the sweeper and direct callers
# read fresh every time.
_REQUEST_ROWS: ContextVar[dict[tuple[str, str], Any] | None] = ContextVar(
    "request_rows", default=None
)


@contextlib.contextmanager
def one_request() -> Iterator[None]:
    """Scope the fresh reads of one request (see _REQUEST_ROWS). Within a request's scope
    already (the worker function opens it before it checks the bearer), the same scope."""
    if _REQUEST_ROWS.get() is not None:
        yield
        return
    scope = _REQUEST_ROWS.set({})
    try:
        yield
    finally:
        _REQUEST_ROWS.reset(scope)


def _note(kind: str, key: str, row: Any) -> None:
    rows = _REQUEST_ROWS.get()
    if rows is not None:
        rows[(kind, key)] = row


def _noted(kind: str, key: str, shape: type[T]) -> T | None:
    """The row of this kind and key the current request read fresh or wrote, if any."""
    known = (_REQUEST_ROWS.get() or {}).get((kind, key))
    return known if isinstance(known, shape) else None


def _taken(kind: str, key: str, shape: type[T]) -> T | None:
    """As _noted, once: the row is handed out and forgotten, so a later read in the same
    request (after a write of its own, say) goes to the table."""
    known = (_REQUEST_ROWS.get() or {}).pop((kind, key), None)
    return known if isinstance(known, shape) else None


class Kernel:
    def __init__(self, rows: Rows, clock: Clock, ids: Ids) -> None:
        self.leases = rows.leases
        self.tasks = rows.tasks
        self.pools = rows.pools
        self.spaces = rows.spaces
        self.schema = rows.schema
        self.timeline = rows.timeline
        self.committer = rows.committer
        # The one object behind every port, for the claim (its own package's, next) and the
        # sweep's and figures' free functions until they take their ports too.
        self.store = cast(Store, rows.committer)
        self.clock = clock
        self.ids = ids
        self._pools: dict[str, tuple[int, Pool]] = {}
        self._spaces: dict[str, tuple[int, Space]] = {}
        self._instance_at: tuple[int, Instance] | None = None
        self._schema_at: tuple[int, int] | None = None
        # What the API reports as metrics after each request (claims, lost races, …).
        self.counters: Counter[str] = Counter()

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
            if not self.derived_reclaims():
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
        change = replace(change, leases=stamped)
        self.mark_priorities(change)
        self.committer.commit(change)

    def mark_priorities(self, change: Change) -> None:
        """Before a new pending lease at a priority other than the default, or with a queue
        timeout, is written, mark the pool row (`queue_marks`), so claims read that priority's
        partition (app/leases/claims.py queue_tiers) and the sweeper reads the pool's queue
        timeouts (app/leases/timeouts.py); a pool with neither reads neither. Marked first and
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
            marked = (self.pool(pool_name).queue_marks or {}).get(mark)
            if marked is not None and now - marked < PRIORITY_MARK_REFRESH_MS:
                continue
            self.pools.mark_queue(pool_name, mark, now)
            self._pools.pop(pool_name, None)

    def with_successor(
        self, change: Change, lease: Lease, recovered: bool, job: Job | None = None
    ) -> Change:
        """Add to `change` the job's next pending lease under fence + 1 (same attempt);
        `job` is the lease's, when the caller has just read it at the lease's fence."""
        if job is None or job.id != lease.job_id or job.fence != lease.fence:
            job = self.job_at(lease)
        now = self.clock.now_ms()
        successor = Lease(
            event_type="lease.created",
            tl=self.first_stamps(lease.subject_kind),
            event_data={"previous_lease_id": lease.id, "recovered": recovered},
            updated_at=now,
            id=self.ids.new_id("lease"),
            job_id=job.id,
            space=lease.space,
            pool=lease.pool,
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            task_id=lease.task_id,
            task_key=lease.task_key,
            workflow=lease.workflow,
            state=LeaseState.PENDING,
            fence=job.fence + 1,
            attempt=job.attempt,
            created_at=now,
            pool_version=lease.pool_version,  # the job keeps the version it was created under
            lineage=lease.lineage,
            previous_lease_id=lease.id,  # what its lease.created event names, on the row too
            retry_depth=lease.retry_depth,
            concurrency_key=lease.concurrency_key,
            priority=lease.priority,  # the job keeps its place in line
            max_run_seconds=lease.max_run_seconds,  # what its run asked for
            # Pending again: it waits at most its run's queue timeout, from now.
            expires_in_seconds=lease.expires_in_seconds,
            queue_expires_at=(
                now + 1000 * lease.expires_in_seconds
                if lease.expires_in_seconds is not None
                else None
            ),
        )
        next_job = replace(
            job,
            fence=successor.fence,
            lease_id=successor.id,
            recovery_count=job.recovery_count + (1 if recovered else 0),
        )
        return Change(
            leases=[*change.leases, LeaseWrite(successor)],
            jobs=[*change.jobs, JobWrite(next_job, expect_fence=job.fence)],
            tasks=change.tasks,
        )

    # ---------------------------------------------------------------- stale reports

    def refuse_if_stale(self, lease: Lease, what: str) -> None:
        if lease.superseded:
            self.record_stale(lease, what, lease.fence)
            raise StaleLease(
                f"lease {lease.id} (fence {lease.fence}) was {lease.end_reason or lease.state}; "
                "its job has moved on"
            )

    def refuse_old_fence(self, lease: Lease, fence: int | None, what: str) -> None:
        """A report naming a fence other than the lease's is stale, whatever became of the
        lease, and is recorded on its subject's timeline (`lease.stale_report`)."""
        if fence is not None and fence != lease.fence:
            self.record_stale(lease, what, fence)
            raise StaleLease(f"fence {fence} of lease {lease.id} is not current")

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

    def record_stale(self, lease: Lease, what: str, fence: int) -> None:
        self.counters["stale_reports"] += 1
        self.timeline.put_event(
            self.event(lease, "lease.stale_report", {"report": str(what), "fence": fence})
        )

    def event(self, lease: Lease, type_: str, data: dict[str, Any]) -> Event:
        return Event(
            id=self.ids.new_id("ev"),
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            type=type_,
            at=self.clock.now_ms(),
            lease_id=lease.id,
            fence=lease.fence,
            data=data,
        )

    # ----------------------------------------------------------------------- lookups

    def own_lease(
        self, actor: Principal, lease_id: str, use: str = authz.ACT, read: Lease | None = None
    ) -> Lease:
        """The lease of this lease token, read once, and refused for a `use` its end has
        taken away (authz.require_lease_power): the one check on the row itself, so a
        principal cached from before the end is caught here. `read`: the row this request
        already read consistently (a worker's bound report resolves the lease first), taken
        instead of a second read; so is the row the request's own token check read
        (`token_checked`). A write judged on it is still conditional on its state and fence,
        and one that loses is judged again on a fresh read."""
        authz.require_lease(actor, lease_id)
        checked = self.token_checked_row(lease_id)
        if read is None or read.id != lease_id:
            read = checked
        lease = read if read is not None and read.id == lease_id else self.lease(lease_id)
        authz.require_lease_power(authz.lease_ended_at(lease), self.clock.now_ms(), use)
        return lease

    def token_checked(self, lease: Lease) -> None:
        """The lease row a lease token was just checked against, read consistently in this
        request: kept for the request's first own_lease of it. Outside a request (the
        authorizer's own function) nothing is kept."""
        _note("lease", lease.id, lease)

    def token_checked_row(self, lease_id: str) -> Lease | None:
        """The row `token_checked` kept for this lease in this request, handed out once."""
        return _taken("lease", lease_id, Lease)

    def acting_lease(self, actor: Principal) -> Lease:
        """The lease a lease token acts from (its space, its task), while it is active."""
        return self.own_lease(actor, actor.lease_id or "")

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
            if len(lease_id) <= rules.MAX_ID_LENGTH
            else None
        )
        if lease is None:
            raise LeaseNotFound(f"lease {lease_id} does not exist")
        return lease

    def task(self, task_id: str) -> Task:
        task = self.tasks.get_task(task_id) if len(task_id) <= rules.MAX_ID_LENGTH else None
        if task is None:
            raise TaskNotFound(f"task {task_id} does not exist")
        return task

    def space(self, key: str) -> Space:
        space = self.spaces.get_space(key) if len(key) <= rules.MAX_ID_LENGTH else None
        if space is None:
            raise NotFound(f"space {key!r} does not exist")
        return space

    def space_cached(self, key: str) -> Space:
        now = self.clock.now_ms()
        cached = self._spaces.get(key)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        space = self.space(key)
        self._spaces[key] = (now, space)
        return space

    def pool(self, name: str) -> Pool:
        now = self.clock.now_ms()
        cached = self._pools.get(name)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        pool = self.pools.get_pool(name) if len(name) <= rules.MAX_ID_LENGTH else None
        if pool is None:
            raise NotFound(f"pool {name!r} does not exist")
        self._pools[name] = (now, pool)
        return pool

    def reclaimed_at(self, lease: Lease) -> int | None:
        """When the lease's detail was reclaimed, as every view tells it: the sweeper's mark,
        or, for a lease that ended with no logs and no attachments, its end plus its pool's
        retention once that has passed (nothing was written: there was nothing to delete).
        Reads the pool (cached) only for a lease that ended at least the shortest retention
        ago."""
        if lease.reclaimed_at is not None or lease.keeps_detail or lease.ended_at is None:
            return lease.reclaimed_at
        now = self.clock.now_ms()
        if not lease.state.terminal or now < lease.ended_at + MIN_RETENTION_MS:
            return None
        try:
            retention = self.pool(lease.pool).retention_seconds
        except NotFound:
            return None  # a pool that is gone has no retention to pass (nor a sweeper pass)
        at = derived_reclaimed_at(lease, retention)
        return at if at is not None and at <= now else None

    def shown(self, lease: Lease) -> Lease:
        """The lease as views show it: `reclaimed_at` derived when it has passed."""
        at = self.reclaimed_at(lease)
        return lease if at == lease.reclaimed_at else replace(lease, reclaimed_at=at)

    def fresh_pool(self, name: str) -> Pool:
        """The pool row as it is now (a consistent read), refreshing the cache: what a claim
        and a new run go by, so a pause or a new version holds for them at once."""
        self._pools.pop(name, None)
        pool = self.pool(name)
        _note("pool", name, pool)
        return pool

    def fresh_space(self, key: str) -> Space:
        self._spaces.pop(key, None)
        space = self.space_cached(key)
        _note("space", key, space)
        return space

    def refuse_archived(self, key: str) -> None:
        """An archived space takes no new work (409 until it is unarchived); read fresh, as a
        claim does."""
        if self.fresh_space(key).archived:
            raise InvalidTransition(f"space {key!r} is archived; unarchive it first")

    def fresh_instance(self) -> Instance:
        self._instance_at = None
        instance = self.instance()
        _note("instance", "", instance)
        return instance

    def first_stamps(self, subject_kind: str) -> dict[str, Any] | None:
        """A new lease's stamps (domain/timeline.py), or None while the table's schema is
        below STAMPS_FROM_SCHEMA (app/migrations.py): every event of that lease is then a
        timeline row, as an earlier release wrote it."""
        return first_stamps(subject_kind) if self._schema() >= STAMPS_FROM_SCHEMA else None

    def claims_may_start(self) -> bool:
        """Whether a claim may start its lease in the same write: not while the table's schema
        is below CLAIM_START_FROM_SCHEMA (app/migrations.py), when a reactor of an earlier
        release may still be reading the stream."""
        return self._schema() >= CLAIM_START_FROM_SCHEMA

    def first_lease_stamped(self) -> bool:
        """Whether a task's first lease, made with the task, may keep its creation as a stamp
        (domain/timeline.py CREATED_STAMP): not while the table's schema is below
        CREATED_STAMPS_FROM_SCHEMA, when a timeline read of an earlier release, which finds
        leases only by their anchors, may still be serving."""
        return self._schema() >= CREATED_STAMPS_FROM_SCHEMA

    def files_untransacted(self) -> bool:
        """Whether filing may write a task's first lease (marked task-pending) and then the
        task, each on its own: not while the table's schema is below
        UNTRANSACTED_FILING_FROM_SCHEMA, when a claim of an earlier release, which does not
        know the mark, may still be serving."""
        return self._schema() >= UNTRANSACTED_FILING_FROM_SCHEMA

    def first_jobs_implied(self) -> bool:
        """Whether a task's first job, opened with the task, may go without a row
        (domain/model.py first_job_id): not while the table's schema is below
        IMPLIED_JOBS_FROM_SCHEMA, when an earlier release, which finds a task's lease
        through its job's row, may still be serving."""
        return self._schema() >= IMPLIED_JOBS_FROM_SCHEMA

    def first_leases_listed_by_task(self) -> bool:
        """Whether a task's first lease, made with the task, may go without an entry in the
        space's lease list (its task's entry lists it): not while the table's schema is below
        LISTED_BY_TASK_FROM_SCHEMA, when a lease list of an earlier release, which reads the
        lease entries only, may still be serving."""
        return self._schema() >= LISTED_BY_TASK_FROM_SCHEMA

    def successes_derived(self) -> bool:
        """Whether the success of a task nothing is linked to may stay its lease's, with no
        graph row written for it: not while the table's schema is below
        SUCCESSES_DERIVED_FROM_SCHEMA, when an earlier release, which reads a task's success
        only from its graph row and links to a task without checking its lease, may still
        be serving."""
        return self._schema() >= SUCCESSES_DERIVED_FROM_SCHEMA

    def derived_reclaims(self) -> bool:
        """Whether a lease may end without entering the ended index when it has no logs and
        no attachments (reclaimed by derivation: domain/model.py derived_reclaimed_at): not
        while the table's schema is below DERIVED_RECLAIMS_FROM_SCHEMA, when an earlier
        release, which reads a lease as reclaimed only once its sweeper has marked it, and
        finds what to mark only in that index, may still be serving."""
        return self._schema() >= DERIVED_RECLAIMS_FROM_SCHEMA

    def _schema(self) -> int:
        """The schema version the data is at, read once per POOL_CACHE_MS like the pools. A
        table no release has migrated (a new stack) is at this release's version: no earlier
        release shares it. The version only rises, and every gate asks for at least one: once
        the data is at this release's version it is not read again."""
        now = self.clock.now_ms()
        known = self._schema_at
        if known is None or (now - known[0] >= POOL_CACHE_MS and known[1] < SCHEMA_VERSION):
            state = self.schema.schema_state()
            version = SCHEMA_VERSION if state.step == 0 else state.version
            known = self._schema_at = (now, version)
        return known[1]

    def request_pool(self, name: str) -> Pool:
        """The pool as this request last read it fresh or wrote it, else read fresh now."""
        return _noted("pool", name, Pool) or self.fresh_pool(name)

    def request_space(self, key: str) -> Space:
        return _noted("space", key, Space) or self.fresh_space(key)

    def request_instance(self) -> Instance:
        return _noted("instance", "", Instance) or self.fresh_instance()

    def instance(self) -> Instance:
        """The instance settings, cached like pools (its ceiling is judged on the row itself,
        see store.keys.BELOW_CEILING, so a stale copy never lets a claim past it)."""
        now = self.clock.now_ms()
        if self._instance_at is not None and now - self._instance_at[0] < POOL_CACHE_MS:
            return self._instance_at[1]
        instance = self.pools.get_instance()
        self._instance_at = (now, instance)
        return instance

    def remember_pool(self, pool: Pool) -> None:
        """Keep the pool row this request just wrote, so this instance reads it at once."""
        self._pools[pool.name] = (self.clock.now_ms(), pool)
        _note("pool", pool.name, pool)

    def remember_space(self, space: Space) -> None:
        self._spaces[space.key] = (self.clock.now_ms(), space)
        _note("space", space.key, space)

    def remember_instance(self, instance: Instance) -> None:
        self._instance_at = (self.clock.now_ms(), instance)
        _note("instance", "", instance)

    def pool_in_space(self, name: str, space: str) -> Pool:
        pool = self.fresh_pool(name)  # a new run pins the pool's version as it is now
        if pool.space != space:
            # Names only what the caller sent and its own space: never whose pool it is.
            raise ValidationFailed(f"pool: {name!r} is not a pool of space {space!r}")
        return pool


def over(seen: Lease, new: Lease) -> LeaseWrite:
    """Replace the row `seen` with `new`: fenced on its state and fence, and on its version and
    deadline so that no transition or heartbeat landing in between is overwritten."""
    return LeaseWrite(new, expect=(seen.state, seen.fence), seen=seen)


def moved(old: Lease, new: Lease, event_type: str, data: dict[str, Any], now: int) -> Lease:
    """Mark `new` as the next version of `old`, naming the transition for the timeline (and
    stamping it when the row itself tells it: domain/timeline.py)."""
    marked = replace(
        new,
        version=old.version + 1,
        event_type=event_type,
        event_data=data,
        updated_at=now,
        # An ended lease leaves the sweeper's index: the row drops due_at, so does the answer.
        due_at=None if new.state.terminal else new.due_at,
    )
    return with_stamp(old, marked)
