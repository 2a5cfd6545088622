"""The instance's settings: reading and changing them, its ceiling's counter, its timeline,
and the one read of them the rest of the service makes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.ports import INSTANCE_CEILING
from tenure.app.rows import PoolRows, QueueRows, TimelineRows
from tenure.app.setup.pool_gates import copy_gates
from tenure.app.setup.pools import Pools, _settings
from tenure.app.setup.tokens import INSTANCE_TIMELINE
from tenure.domain import authz
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Event, Instance, Principal

if TYPE_CHECKING:
    from tenure.app.catalog import Catalog
    from tenure.app.ports import Clock

# What PATCH /instance may change.
INSTANCE_SETTINGS = (
    "max_active",
    "block_recurrence_limit",
    "allow_agent_force",
    "retry_chain_cap",
    "event_ttl_seconds",
)
# GET /instance/activity answers at most this many events.
MAX_ACTIVITY = 500


class InstanceSettings:
    """The instance's row (GET/PATCH /instance), the counter of its ceiling, and its timeline
    of tokens made and revoked."""

    def __init__(
        self,
        ceilings: Pools,
        *,
        catalog: Catalog,
        clock: Clock,
        pools: PoolRows,
        queues: QueueRows,
        timeline: TimelineRows,
    ) -> None:
        self.catalog = catalog
        self.clock = clock
        # The pools' use case: a ceiling just set counts the leases already held through it.
        self.ceilings = ceilings
        self.pools = pools
        self.queues = queues
        self.timeline = timeline

    def get_instance(self, actor: Principal) -> Instance:
        authz.require_operator(actor, "admin")
        instance = self.pools.get_instance()
        self.catalog.remember_instance(instance)
        return instance

    def update_instance(self, actor: Principal, changes: dict[str, Any]) -> Instance:
        """Change the named instance settings; a null max_active is unlimited again, a null
        elsewhere resets the default."""
        authz.require_operator(actor, "admin")
        for setting in changes:
            if setting not in INSTANCE_SETTINGS:
                raise ValidationFailed(f"{setting}: not an instance setting")
        defaults = Instance()
        values = {k: v if v is not None else getattr(defaults, k) for k, v in changes.items()}
        values["updated_at"] = self.clock.now_ms()
        before = self.pools.get_instance()
        instance = self.pools.update_instance(_settings(values))
        self.catalog.remember_instance(instance)
        if (before.max_active is None) != (instance.max_active is None):
            # Every pool says so before the answer: a claim reads its pool row alone.
            ceiling = {"instance_ceiling": instance.max_active is not None}
            copy_gates(self.pools, self.catalog, ceiling, None)
        if before.max_active is None and instance.max_active is not None:
            pools = [p.name for p in self.pools.list_pools()]
            self.ceilings.count_held(INSTANCE_CEILING, INSTANCE_CEILING, pools)
        return instance

    def instance_held(self) -> int:
        """The instance ceiling's counter: leases claimed while the instance had a ceiling."""
        return self.queues.held_count(INSTANCE_CEILING, INSTANCE_CEILING)

    def instance_activity(self, actor: Principal, limit: int) -> list[Event]:
        """The instance's timeline (tokens made and revoked), oldest first: its newest
        `limit` events."""
        authz.require_operator(actor, "admin")
        return self.timeline.timeline(*INSTANCE_TIMELINE, min(limit, MAX_ACTIVITY))


def instance_settings(store: PoolRows) -> Instance:
    """The settings row when one exists, else the defaults, read on every call (no cached
    copy, so a change holds for the very next request). (`GET/PATCH /instance` own the row;
    this is the only place the task graph and force operations read it.)"""
    return store.get_instance()
