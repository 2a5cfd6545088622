"""The pool rows' copy of what their space and the instance say that a claim or a filing
needs (domain/model.py Pool.space_archived): written by every write that changes it, before
that write answers, so that a claim or a filing reading the pool row alone goes by the change
from the moment the operator has the answer."""

from __future__ import annotations

from dataclasses import replace

from tenure.app.catalog import Catalog
from tenure.app.migrations import GATE_COPY_TRIES
from tenure.app.rows import PoolRows
from tenure.domain.model import Pool, gates_differ, pool_gates


def copy_gates(pools: PoolRows, catalog: Catalog, gates: dict[str, bool], space: str | None) -> int:
    """Write `gates` on every pool row of `space` (every pool when None) that does not say
    them yet: the pool rows read consistently (a pool made a moment ago is among them; at most
    POOL_CAP, paged by the store), one write per pool that differs. Returns how many were
    written. A pool made while this runs copies the gates itself (with_gates)."""
    written = 0
    for pool in pools.list_pools(consistent=True):
        if space is not None and pool.space != space:
            continue
        differ = gates_differ(pool, gates)
        if not differ:
            continue
        if pools.write_pool_gates(pool, differ):
            catalog.remember_pool(_gated(pool, differ))  # what this request's views go by
            written += 1
        # else gone, or what it copies moved meanwhile: the write that moved it copies its own
    return written


def with_gates(pools: PoolRows, catalog: Catalog, pool: Pool) -> Pool:
    """A new pool as it is written: with its space's and the instance's gates as they are
    now (both read consistently)."""
    return _gated(pool, pool_gates(catalog.space(pool.space), pools.get_instance()))


def settle_gates(pools: PoolRows, catalog: Catalog, pool: Pool) -> Pool:
    """After a new pool's row is written: its space and the instance read again, and the
    pool's gates written again if an archive or a ceiling landed between the first read and
    the pool's write (that write's own copy, which lists the pools, may have missed it). Each
    side writes first and reads second, so at least one of them sees the other."""
    for _ in range(GATE_COPY_TRIES):
        gates = pool_gates(catalog.space(pool.space), pools.get_instance())
        if not gates_differ(pool, gates):
            return pool
        if pools.write_pool_gates(pool, gates):
            return _gated(pool, gates)
    return pool  # each try lost to a move whose own copy covers this pool (it exists now)


def _gated(pool: Pool, gates: dict[str, bool]) -> Pool:
    """The pool as its row reads once `gates` (some or all of the three) are written on it."""
    return replace(
        pool,
        space_archived=gates.get("space_archived", pool.space_archived),
        space_ceiling=gates.get("space_ceiling", pool.space_ceiling),
        instance_ceiling=gates.get("instance_ceiling", pool.instance_ceiling),
    )
