"""Why a queued lease is still queued: one rule, read by every view of a lease, so the list
and the single read always agree."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tenure.app.ports import INSTANCE_CEILING, KEY_CEILING, RATE_CEILING, key_ceiling, rate_ceiling
from tenure.app.rows import QueueRows, WorkerRows
from tenure.app.workers import WORKERS_PAGE, reachable
from tenure.domain.fencing import utc
from tenure.domain.model import Instance, Lease, Pool, Space
from tenure.domain.states import LeaseState
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# States in which a lease has a queued condition (every other state has none).
QUEUED_STATES = frozenset({LeaseState.PENDING, LeaseState.DISPATCHING, LeaseState.DISPATCHED})


@record
class QueuedCondition:
    code: str
    label: str
    needs_person: bool

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code, "label": self.label, "needs_person": self.needs_person}


@record
class PoolFacts:
    """What holds for a pool right now, as far as its queued leases are concerned."""

    paused: bool = False
    space_archived: bool = False
    runtime_refusing: bool = False
    token_pool_unreachable: bool = False
    instance_full: bool = False
    space_full: bool = False
    pool_full: bool = False
    # The pool's claims for the current minute are used up (max_claims_per_minute).
    rate_limited: bool = False


# Conditions that only a person can clear, in precedence order (when several hold, the first
# is shown; all of these come before the ones that clear by themselves).
_NEEDS_PERSON = (
    ("pool_paused", "paused"),
    ("space_archived", "space_archived"),
    ("runtime_refusing", "runtime_refusing"),
    ("token_pool_unreachable", "token_pool_unreachable"),
)
# Conditions that clear on their own, after waiting_until, in precedence order.
_CAPACITY = (
    ("instance_full", "instance_full"),
    ("space_full", "space_full"),
    ("pool_full", "pool_full"),
)


def queued_condition(
    lease: Lease, facts: PoolFacts, not_before: int | None = None, key_full: bool = False
) -> QueuedCondition | None:
    """The condition a lease in pending, dispatching or dispatched reads; None otherwise.
    `key_full`: its concurrency key already has the pool's max_active_per_key held."""
    if lease.state not in QUEUED_STATES:
        return None
    for code, fact in _NEEDS_PERSON:
        if getattr(facts, fact):
            return QueuedCondition(code, code.replace("_", " "), True)
    if lease.state is LeaseState.PENDING and not_before is not None:
        at = utc(not_before).strftime("%H:%M")
        return QueuedCondition("waiting_until", f"waiting until {at}", False)
    for code, fact in _CAPACITY:
        if getattr(facts, fact):
            return QueuedCondition(code, code.replace("_", " "), False)
    if lease.state is LeaseState.PENDING:
        # Only a claim is held back by these two: a lease already claimed is past them.
        if key_full:
            return QueuedCondition("key_full", f"waiting for {lease.concurrency_key}", False)
        if facts.rate_limited:
            return QueuedCondition("rate_limited", "rate limited", False)
        return QueuedCondition("awaiting_agent", "awaiting agent", False)
    return QueuedCondition("starting", "starting", False)


class Conditions:
    def __init__(self, kernel: Kernel, *, queues: QueueRows, workers: WorkerRows) -> None:
        self.kernel = kernel
        self.queues = queues
        self.workers = workers

    def queued_conditions(self, leases: Iterable[Lease]) -> dict[str, QueuedCondition | None]:
        """Each lease's condition. What it rests on is read fresh once per call, and only for
        pools with a queued lease among `leases`: the pool, its space and the instance rows
        (consistent, so that every process answers alike the moment a pause, an archive or a
        ceiling lands; rows this request has read fresh already are not read again), the
        ceiling counters and the pool's worker rows."""
        facts: dict[str, PoolFacts] = {}
        pools: dict[str, Pool] = {}
        spaces: dict[str, Space] = {}
        instance: list[Instance] = []
        keys_full: dict[tuple[str, str], bool] = {}
        found: dict[str, QueuedCondition | None] = {}
        for lease in leases:
            if lease.state not in QUEUED_STATES:
                found[lease.id] = None
                continue
            if lease.pool not in facts:
                pool = pools[lease.pool] = self.kernel.catalog.request_pool(lease.pool)
                facts[lease.pool] = self._pool_facts(pool, *self._gates(pool, spaces, instance))
            deferred = (
                lease.not_before if (lease.not_before or 0) > self.kernel.clock.now_ms() else None
            )
            key_full = False
            limit = pools[lease.pool].max_active_per_key
            key = lease.concurrency_key
            if lease.state is LeaseState.PENDING and key is not None and limit is not None:
                if (lease.pool, key) not in keys_full:  # one small read per key and call
                    held = self.queues.held_count(KEY_CEILING, key_ceiling(lease.pool, key))
                    keys_full[(lease.pool, key)] = held >= limit
                key_full = keys_full[(lease.pool, key)]
            found[lease.id] = queued_condition(lease, facts[lease.pool], deferred, key_full)
        return found

    def queued_condition_of(self, lease: Lease) -> QueuedCondition | None:
        return self.queued_conditions([lease])[lease.id]

    def _gates(
        self, pool: Pool, spaces: dict[str, Space], instance: list[Instance]
    ) -> tuple[bool, int | None, int | None]:
        """Whether the pool's space is archived, and the space's and the instance's ceilings:
        from the pool row's copy, reading the space or instance row only for a ceiling it has
        (until the table's schema has the copy, both rows, as an earlier release did)."""
        gated = self.kernel.gates.pool_gates()
        if pool.space not in spaces and (not gated or pool.space_ceiling):
            spaces[pool.space] = self.kernel.catalog.request_space(pool.space)
        if not instance and (not gated or pool.instance_ceiling):
            instance.append(self.kernel.catalog.request_instance())
        space = spaces.get(pool.space)
        archived = pool.space_archived if gated else space is not None and space.archived
        space_limit = (
            space.max_active if space is not None and (pool.space_ceiling or not gated) else None
        )
        instance_limit = (
            instance[0].max_active if instance and (pool.instance_ceiling or not gated) else None
        )
        return archived, space_limit, instance_limit

    def _pool_facts(
        self, pool: Pool, archived: bool, space_limit: int | None, instance_limit: int | None
    ) -> PoolFacts:
        full = {
            f"{scope}_full": self.queues.held_count(scope, name) >= limit
            for scope, name, limit in (
                ("pool", pool.name, pool.max_active),
                ("space", pool.space, space_limit),
                (INSTANCE_CEILING, INSTANCE_CEILING, instance_limit),
            )
            if limit is not None
        }
        rate_limited = False
        if pool.max_claims_per_minute is not None:
            minute = rate_ceiling(pool.name, self.kernel.clock.now_ms() // 60_000)
            claimed = self.queues.held_count(RATE_CEILING, minute)
            rate_limited = claimed >= pool.max_claims_per_minute
        return PoolFacts(
            paused=pool.paused,
            space_archived=archived,
            rate_limited=rate_limited,
            **self._fleet_facts(pool),
            **full,
        )

    def _fleet_facts(self, pool: Pool) -> dict[str, bool]:
        """runtime_refusing / token_pool_unreachable: every reachable worker of the pool says
        so in its worker heartbeat (and there is at least one). One bounded read of the pool's
        worker rows (WORKERS_PAGE), only for a pool with a queued lease in view."""
        now = self.kernel.clock.now_ms()
        workers = [
            w
            for w in self.workers.list_workers(pool.name, limit=WORKERS_PAGE, now_ms=now)
            if reachable(w, pool, now)
        ]

        def everyone(attribute: str, state: str) -> bool:
            return bool(workers) and all(
                (getattr(w, attribute) or {}).get("state") == state for w in workers
            )

        return {
            "runtime_refusing": everyone("runtime", "refusing"),
            "token_pool_unreachable": everyone("credentials", "unreachable"),
        }
