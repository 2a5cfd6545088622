"""Pools: making them, reading and changing their settings, pausing and resuming them, and
making a ceiling just set count the leases already held."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from tenure.app import ports
from tenure.app.catalog import POOL_REFRESH_MS
from tenure.app.kernel import MAX_WRITE_TRIES, RETRY_AFTER_SECONDS, over
from tenure.app.ports import KEY_CEILING, Ceiling, Change, Settings, key_ceiling
from tenure.app.rows import LeaseRows, PoolRows, QueueRows, TimelineRows
from tenure.app.setup.pool_gates import settle_gates, with_gates
from tenure.app.setup.versions import check_settings, require_settings
from tenure.app.usage import check_rates
from tenure.domain import authz
from tenure.domain.errors import Conflict, Unavailable, ValidationFailed
from tenure.domain.events import (
    LEASE_COUNTED,
    POOL_PAUSED,
    POOL_RESUMED,
    POOL_UPDATED,
)
from tenure.domain.model import Event, Lease, Pool, Principal
from tenure.domain.states import REPORTABLE
from tenure.domain.transitions import moved

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.setup.versions import Versions

# What PATCH /pools/{name} may change; a setting the Pool entity does not (yet) have is left
# out of the API's model and refused here, so it is never silently dropped.
POOL_SETTINGS = (
    "display_name",
    "max_active",
    "renew_seconds",
    "grace_seconds",
    "toleration_seconds",
    "on_expiry",
    "keeps_logs",
    "retention_seconds",
    "attachment_quota_bytes",
    "agent",
    "classifier",
    "rates",
    "accepts_delegation_from",
    "max_delegated_per_lease",
    "max_delegated_per_tree",
    "retry",
    "max_active_per_key",
    "max_claims_per_minute",
    "max_run_seconds",
)
# A pool's `active` in its view counts at most this many held leases (one bounded Query).
HELD_SHOWN = 1000
# A ceiling set while leases are held counts at most this many of each pool's held leases
# (the held-lease index, read bounded); past it the counter under-counts, which the docs say.
SEED_PER_POOL = 10_000
# How long after the first count a second one runs: a long-polling claim refreshes its pool,
# space and instance rows this often, so one that read them before the ceiling was set has
# landed (and is counted) by then.
SETTLE_AFTER_CEILING_S = POOL_REFRESH_MS / 1000 + 0.5
# Changing one of these makes a new pool version (a lease keeps the one it was created under).
VERSIONED = ("agent", "classifier")


class Pools:
    def __init__(
        self,
        kernel: Kernel,
        versions: Versions,
        *,
        leases: LeaseRows,
        pools: PoolRows,
        queues: QueueRows,
        timeline: TimelineRows,
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.pools = pools
        self.queues = queues
        self.timeline = timeline
        self.versions = versions

    # ---------------------------------------------------------------------- reading

    def list_pools_of(self, actor: Principal, space: str) -> list[Pool]:
        """Every pool of one space, by name (pools share one partition and are few)."""
        authz.require_operator(actor, "read", space)
        self.kernel.catalog.space(space)
        return sorted((p for p in self.pools.list_pools() if p.space == space), key=_by_name)

    def get_pool(self, actor: Principal, name: str) -> Pool:
        authz.require_role(actor, "read")
        pool = self.kernel.catalog.fresh_pool(name)
        authz.require_operator(actor, "read", pool.space)
        return pool

    def held(self, pool: Pool) -> int:
        """How many leases the pool holds right now (at most HELD_SHOWN): its held-lease index,
        counted, not the ceiling counter, which counts only while the pool has a ceiling."""
        return self.queues.count_held(pool.name, HELD_SHOWN)

    # --------------------------------------------------------------------- changing

    def create_pool(self, actor: Principal, pool: Pool) -> Pool:
        authz.require_operator(actor, "admin", pool.space)
        self.kernel.catalog.space(pool.space)
        check_settings(pool.kind, pool.agent, pool.classifier)
        require_settings(pool.kind, pool.agent, pool.classifier)
        check_rates(pool.rates)
        if len(self.pools.list_pools()) >= ports.POOL_CAP:
            raise ValidationFailed(f"this instance already has {ports.POOL_CAP} pools")
        pool = replace(pool, created_at=self.kernel.clock.now_ms())
        pool = with_gates(self.pools, self.kernel.catalog, pool)  # its space's and instance's
        self.pools.put_pool(pool)
        return settle_gates(self.pools, self.kernel.catalog, pool)

    def update_pool(self, actor: Principal, name: str, changes: dict[str, Any]) -> Pool:
        """Change the named settings (a null resets one to its default). A change of the agent
        or classifier settings makes a new version, the old one kept readable."""
        authz.require_role(actor, "admin")
        pool = self.kernel.catalog.fresh_pool(name)
        authz.require_operator(actor, "admin", pool.space)
        known = {f.name for f in fields(Pool)}
        for setting in changes:
            if setting not in POOL_SETTINGS or setting not in known:
                raise ValidationFailed(f"{setting}: not a setting a pool has")
        for attempt in range(MAX_WRITE_TRIES):
            if attempt:
                self.kernel.back_off(attempt - 1)
            target = _changed(pool, changes)
            check_settings(target.kind, target.agent, target.classifier)
            if set(changes) & set(VERSIONED):  # a pool made before they were required still patches
                require_settings(target.kind, target.agent, target.classifier)
            check_rates(target.rates)
            settings = _settings({k: getattr(target, k) for k in changes})
            versioned = any(getattr(target, k) != getattr(pool, k) for k in VERSIONED)
            try:
                if versioned:
                    now = self.kernel.clock.now_ms()
                    bumped = Settings(
                        set={**settings.set, "version": pool.version + 1}, remove=settings.remove
                    )
                    updated = self.pools.update_pool(
                        name, bumped, pool.version, self.versions.superseded(pool, now)
                    )
                elif changes:
                    updated = self.pools.update_pool(name, settings)
                else:
                    updated = pool
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                pool = self.kernel.catalog.fresh_pool(name)
                continue
            self._remember(updated)
            self._record_pool(updated, POOL_UPDATED, {"changed": sorted(changes)})
            if pool.max_active is None and updated.max_active is not None:
                self.count_held("pool", name, [name])
            if pool.max_active_per_key is None and updated.max_active_per_key is not None:
                self.count_held_keys(name)
            return updated
        raise Unavailable(
            f"pool {name} kept changing during this request; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def pause_pool(self, actor: Principal, name: str) -> Pool:
        return self._set_paused(actor, name, True)

    def resume_pool(self, actor: Principal, name: str) -> Pool:
        return self._set_paused(actor, name, False)

    def _set_paused(self, actor: Principal, name: str, paused: bool) -> Pool:
        authz.require_role(actor, "admin")
        pool = self.kernel.catalog.fresh_pool(name)
        authz.require_operator(actor, "admin", pool.space)
        if pool.paused == paused:
            return pool  # already so: nothing written, nothing recorded
        now = self.kernel.clock.now_ms()
        updated = self.pools.update_pool(
            name, Settings(set={"paused": paused, "paused_changed_at": now})
        )
        self._remember(updated)
        self._record_pool(updated, POOL_PAUSED if paused else POOL_RESUMED, {})
        return updated

    # ----------------------------------------------------------- ceilings set late

    def count_held(self, scope: str, name: str, pools: list[str]) -> int:
        """Make a ceiling just set count the leases already held. A claim counts itself
        toward a scope only while that scope has a ceiling, so the leases held when one is
        set were never counted: each of them (held in `pools`, not yet counted for this
        scope) is marked counted and the scope's counter moved, in one conditional write per
        lease. Then once more after a claim's settings refresh (POOL_REFRESH_MS): a claim
        that read the pool before the ceiling was set and lands a moment later is counted
        too. Returns how many leases were counted."""
        return self._count_twice(lambda _lease: (scope, name), pools)

    def count_held_keys(self, pool: str) -> int:
        """The same for a pool's max_active_per_key just set: each held lease with a
        concurrency key counts toward its own key's counter."""

        def key_of(lease: Lease) -> tuple[str, str] | None:
            if lease.concurrency_key is None:
                return None
            return KEY_CEILING, key_ceiling(pool, lease.concurrency_key)

        return self._count_twice(key_of, [pool])

    def _count_twice(self, scope_of: _ScopeOf, pools: list[str]) -> int:
        counted = self._count_held_once(scope_of, pools)
        self.kernel.clock.sleep(SETTLE_AFTER_CEILING_S)
        return counted + self._count_held_once(scope_of, pools)

    def _count_held_once(self, scope_of: _ScopeOf, pools: list[str]) -> int:
        counted = 0
        for pool in pools:
            ids = self.queues.due_leases(pool, None, limit=SEED_PER_POOL)
            for lease in self.leases.get_leases(ids).values():
                found = scope_of(lease)
                if found is None:
                    continue
                scope, name = found
                entry = f"{scope}:{name}"
                for _ in range(MAX_WRITE_TRIES):
                    if lease.state not in REPORTABLE or entry in (lease.counted or ()):
                        break
                    marked = moved(
                        lease,
                        replace(lease, counted=(*(lease.counted or ()), entry)),
                        LEASE_COUNTED,
                        {"scope": scope, "name": name},
                        self.kernel.clock.now_ms(),
                    )
                    try:
                        self.kernel.commit(
                            Change(
                                leases=[over(lease, marked)],
                                ceilings=[Ceiling(scope, name, +1, None)],
                            )
                        )
                    except Conflict:  # it moved meanwhile (a heartbeat, an end): judge again
                        self.kernel.counters["lost_writes"] += 1
                        lease = self.kernel.lease(lease.id)
                        continue
                    counted += 1
                    break
        return counted

    # ---------------------------------------------------------------------- helpers

    def _remember(self, pool: Pool) -> None:
        self.kernel.catalog.remember_pool(pool)

    def _record_pool(self, pool: Pool, type_: str, data: dict[str, Any]) -> None:
        """A pool's own timeline (subject "pool"): who changed what, and which version."""
        self.timeline.put_event(
            Event(
                id=self.kernel.ids.new_id("ev"),
                subject_kind="pool",
                subject_id=pool.name,
                type=type_,
                at=self.kernel.clock.now_ms(),
                data={**data, "version": pool.version},
            )
        )


# Which counter a held lease counts toward for the ceiling being set (None: none).
_ScopeOf = Callable[[Lease], "tuple[str, str] | None"]


def _by_name(pool: Pool) -> str:
    return pool.name


def _changed(pool: Pool, changes: dict[str, Any]) -> Pool:
    """The pool as the changes would leave it (a null: the setting's default), timings kept
    in order: renew <= grace <= toleration."""
    defaults: dict[str, Any] = {f.name: f.default for f in fields(Pool)}
    values: dict[str, Any] = {k: v if v is not None else defaults[k] for k, v in changes.items()}
    target = replace(pool, **values)
    if target.grace_seconds < target.renew_seconds:
        raise ValidationFailed("grace_seconds: must be at least renew_seconds")
    if target.toleration_seconds < target.grace_seconds:
        raise ValidationFailed("toleration_seconds: must be at least grace_seconds")
    return target


def _settings(values: dict[str, Any]) -> Settings:
    """SET what has a value, REMOVE what is null (the row then reads the default)."""
    return Settings(
        set={k: v.value if hasattr(v, "value") else v for k, v in values.items() if v is not None},
        remove=tuple(k for k, v in values.items() if v is None),
    )
