"""The pool, space and instance rows every use case goes by, each read under one of three
policies, named by the method: cached (`pool`, `space_cached`, `instance`: this warm instance's
copy, at most POOL_CACHE_MS old), fresh (`fresh_*`: a consistent read that refreshes the cache
and is kept for the request), or the request's (`request_*`: what this request last read fresh
or wrote, else fresh now)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, TypeVar

from tenure.app.ports import Clock
from tenure.app.rows import PoolRows, SpaceRows
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

T = TypeVar("T")

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
