"""The rows of the service's settings every use case goes by, cached on a warm instance.

The pool, space and instance rows, each read under one of three policies, named by the method:
cached (`pool`, `space_cached`, `instance`: this warm instance's copy, at most POOL_CACHE_MS
old), fresh (`fresh_*`: a consistent read that refreshes the cache and is kept for the
request), or the request's (`request_*`: what this request last read fresh or wrote, else
fresh now). And the schema version the table's data is at, read as rarely, with the behaviours
that wait for it (`SchemaGates`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, TypeVar

from tenure.app.ports import Clock
from tenure.app.rows import PoolRows, SchemaRows, SpaceRows
from tenure.app.schema_versions import (
    CLAIM_START_FROM_SCHEMA,
    CREATED_STAMPS_FROM_SCHEMA,
    DERIVED_RECLAIMS_FROM_SCHEMA,
    HANDOVER_INTENTS_FROM_SCHEMA,
    IMPLIED_JOBS_FROM_SCHEMA,
    LISTED_BY_TASK_FROM_SCHEMA,
    POOL_GATES_FROM_SCHEMA,
    RULE_MINTS_FROM_SCHEMA,
    SCHEMA_VERSION,
    STAMPS_FROM_SCHEMA,
    SUCCESSES_DERIVED_FROM_SCHEMA,
    UNTRANSACTED_FILING_FROM_SCHEMA,
    WORKER_SIGNALS_FROM_SCHEMA,
)
from tenure.domain import fencing
from tenure.domain.errors import InvalidTransition, NotFound, ValidationFailed
from tenure.domain.model import (
    MIN_RETENTION_MS,
    Instance,
    Lease,
    Pool,
    Space,
    derived_reclaimed_at,
)
from tenure.domain.timeline import first_stamps

T = TypeVar("T")

# Pools and spaces change rarely; a warm function keeps them this long instead of a read per
# heartbeat. (Pause and archive take effect within this window on every warm instance.)
POOL_CACHE_MS = 30_000
# A long poll reads its pool's row again this often, so a pause, a resume, an archive or an
# unarchive reaches a waiting claim within this bound.
POOL_REFRESH_MS = 2_000

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


def note(kind: str, key: str, row: Any) -> None:
    rows = _REQUEST_ROWS.get()
    if rows is not None:
        rows[(kind, key)] = row


def noted(kind: str, key: str, shape: type[T]) -> T | None:
    """The row of this kind and key the current request read fresh or wrote, if any."""
    known = (_REQUEST_ROWS.get() or {}).get((kind, key))
    return known if isinstance(known, shape) else None


def taken(kind: str, key: str, shape: type[T]) -> T | None:
    """As noted, once: the row is handed out and forgotten, so a later read in the same
    request (after a write of its own, say) goes to the table."""
    known = (_REQUEST_ROWS.get() or {}).pop((kind, key), None)
    return known if isinstance(known, shape) else None


class Catalog:
    def __init__(self, pools: PoolRows, spaces: SpaceRows, clock: Clock) -> None:
        self.pools = pools
        self.spaces = spaces
        self.clock = clock
        self._pools: dict[str, tuple[int, Pool]] = {}
        self._spaces: dict[str, tuple[int, Space]] = {}
        self._instance_at: tuple[int, Instance] | None = None

    def forget_pool(self, name: str) -> None:
        """Drop this instance's copy of the pool: the next `pool` reads it again."""
        self._pools.pop(name, None)

    def space(self, key: str) -> Space:
        """Read policy: consistent, every call (what an operator's change of the space goes by)."""
        space = self.spaces.get_space(key) if len(key) <= fencing.MAX_ID_LENGTH else None
        if space is None:
            raise NotFound(f"space {key!r} does not exist")
        return space

    def space_cached(self, key: str) -> Space:
        """Read policy: this instance's copy, at most POOL_CACHE_MS old."""
        now = self.clock.now_ms()
        cached = self._spaces.get(key)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        space = self.space(key)
        self._spaces[key] = (now, space)
        return space

    def pool(self, name: str) -> Pool:
        """Read policy: this instance's copy, at most POOL_CACHE_MS old."""
        now = self.clock.now_ms()
        cached = self._pools.get(name)
        if cached is not None and now - cached[0] < POOL_CACHE_MS:
            return cached[1]
        pool = self.pools.get_pool(name) if len(name) <= fencing.MAX_ID_LENGTH else None
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
        note("pool", name, pool)
        return pool

    def fresh_space(self, key: str) -> Space:
        """Read policy: consistent, refreshing the cache and kept for this request."""
        self._spaces.pop(key, None)
        space = self.space_cached(key)
        note("space", key, space)
        return space

    def refuse_archived(self, key: str) -> None:
        """An archived space takes no new work (409 until it is unarchived); read fresh, as a
        claim does."""
        if self.fresh_space(key).archived:
            raise InvalidTransition(f"space {key!r} is archived; unarchive it first")

    def fresh_instance(self) -> Instance:
        """Read policy: consistent, refreshing the cache and kept for this request."""
        self._instance_at = None
        instance = self.instance()
        note("instance", "", instance)
        return instance

    def request_pool(self, name: str) -> Pool:
        """The pool as this request last read it fresh or wrote it, else read fresh now."""
        return noted("pool", name, Pool) or self.fresh_pool(name)

    def request_space(self, key: str) -> Space:
        """As request_pool, for the space."""
        return noted("space", key, Space) or self.fresh_space(key)

    def request_instance(self) -> Instance:
        """As request_pool, for the instance settings."""
        return noted("instance", "", Instance) or self.fresh_instance()

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
        note("pool", pool.name, pool)

    def remember_space(self, space: Space) -> None:
        """As remember_pool, for the space."""
        self._spaces[space.key] = (self.clock.now_ms(), space)
        note("space", space.key, space)

    def remember_instance(self, instance: Instance) -> None:
        """As remember_pool, for the instance settings."""
        self._instance_at = (self.clock.now_ms(), instance)
        note("instance", "", instance)

    def pool_in_space(self, name: str, space: str) -> Pool:
        """Read policy: consistent (as fresh_pool), refused unless it is `space`'s."""
        pool = self.fresh_pool(name)  # a new run pins the pool's version as it is now
        if pool.space != space:
            # Names only what the caller sent and its own space: never whose pool it is.
            raise ValidationFailed(f"pool: {name!r} is not a pool of space {space!r}")
        return pool


class SchemaGates:
    """Feature gates on the schema version the table's data is at, cached like the pools: a
    behaviour a release of the service brings starts only once no earlier release that would
    misread it may still be serving."""

    def __init__(self, schema: SchemaRows, clock: Clock) -> None:
        self.schema = schema
        self.clock = clock
        self._schema_at: tuple[int, int] | None = None
        self._pool_gated = False  # the data has reached the pool rows' gates (it stays there)

    def first_stamps(self, subject_kind: str) -> dict[str, Any] | None:
        """A new lease's stamps (domain/timeline.py), or None while the table's schema is
        below STAMPS_FROM_SCHEMA (app/schema_versions.py): every event of that lease is then a
        timeline row, as an earlier release wrote it."""
        return first_stamps(subject_kind) if self._schema() >= STAMPS_FROM_SCHEMA else None

    def claims_may_start(self) -> bool:
        """Whether a claim may start its lease in the same write: not while the table's schema
        is below CLAIM_START_FROM_SCHEMA (app/schema_versions.py), when a reactor of an earlier
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

    def pool_gates(self) -> bool:
        """Whether a claim and a filing may read their pool's row alone for what its space
        and the instance say (domain/model.py Pool.space_archived): not while the table's
        schema is below POOL_GATES_FROM_SCHEMA, when an earlier release's archive or ceiling,
        which does not copy itself onto the pool rows, may still be serving, and pools made
        before carry no copy yet. Asked of the schema only until it holds: the version only
        rises, so a warm process's claims and filings go by the pool row without asking again."""
        if not self._pool_gated:
            self._pool_gated = self._schema() >= POOL_GATES_FROM_SCHEMA
        return self._pool_gated

    def worker_signals(self) -> bool:
        """Whether every write a worker heartbeat must report raises the holder's signal epoch
        (domain/signals.py), so that a heartbeat may trust it: not while the table's schema
        is below WORKER_SIGNALS_FROM_SCHEMA, when a writer of an earlier release, which does
        not raise it, may still be serving."""
        return self._schema() >= WORKER_SIGNALS_FROM_SCHEMA

    def handover_intents(self) -> bool:
        """Whether a final report that claims the next lease may keep the claim's intent on the
        lease it ends, with no claim_id record: not while the table's schema is below
        HANDOVER_INTENTS_FROM_SCHEMA, when a resend handled by an earlier release, which looks
        for the record, may still come."""
        return self._schema() >= HANDOVER_INTENTS_FROM_SCHEMA

    def rule_mints_untransacted(self) -> bool:
        """Whether a rule's firing may write its job, its lease and its task one after the
        other (the job first, as the occasion's lock): not while the table's schema is below
        RULE_MINTS_FROM_SCHEMA, when a delivery handled by an earlier release, which takes a
        job for proof that its lease exists, may still come."""
        return self._schema() >= RULE_MINTS_FROM_SCHEMA

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
