"""The scheduler: its pause and drain, its status and backlog, starvation, and the gate
every claim passes (ClaimGate).

How a claim learns that a lease's task is effectively paused without walking the tree: every
task carries its ancestors (root first) and every lease copies them (`lineage`). Task pause
adds the task's id to a string set on the one scheduler row, in the same transaction as the
task's own row; so one read of that row per claim look tells, for any candidate, whether its
task or an ancestor is paused — `{task_id, *lineage}` against the set, no tree walk. Tasks
parked in needs_attention (exhausted, starved) sit in a second set, which holds back the
parked task's own runs only, not its descendants'.
A lease's lineage never changes, so each process remembers it for the lease ids it has read,
and a later claim skips a held candidate from the queue index's keys alone, without
re-reading its row. The set's size is bounded by DynamoDB's 400 KB item (about 10,000
paused subtree roots), far beyond what an operator pauses at once.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Set
from typing import TYPE_CHECKING, Any

from tenure.app.ports import Change, HoldOp, SchedulerState, TaskWrite
from tenure.app.rows import (
    LeaseRows,
    PoolRows,
    QueueRows,
    SweeperRows,
    TaskRows,
    TimelineRows,
    WorkerRows,
)
from tenure.app.workers import reachable, unreachable_since
from tenure.domain import authz
from tenure.domain.errors import Conflict, ValidationFailed
from tenure.domain.events import TASK_STARVATION_ESCALATED
from tenure.domain.model import DEFAULT_PRIORITY, Event, Lease, Pool, Principal, Space
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.tasks import next_version
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# A claim looks this far down a pool's queue (index keys only) past candidates it knows are
# held back; beyond it, the held leases are older than anything it could claim anyway.
GATE_SCAN = 1000
LINEAGE_CACHE = 10_000
# How many pending leases one count reads (index keys, per pool): the counts say "at least"
# beyond it.
COUNT_BUDGET = 10_000
# While some task is held back (paused, parked, blocked), how many of a pool's oldest pending
# leases one status read checks against the hold sets, reading each lease row at most once per
# process (its lineage is then remembered); a lease beyond them is counted as claimable.
HOLD_SCAN = 1000
DRAIN_POLL_SECONDS = 0.5
MAX_DRAIN_SECONDS = 20
# How many starved leases one sweeper pass parks at most, per pool.
PARK_PER_PASS = 50
# How many queue-head leases of one pool a capacity-waiting episode is told on (each on its
# task's timeline), and how many pools' episodes the sweeper remembers at most.
CAPACITY_TELL = 10
CAPACITY_EPISODES = 500
BACKLOG_PAGE = 50
SCHEDULER_TIMELINE = ("system", "scheduler")


# A hold on a lease's chain (its task first, then the task's ancestors): true when a claim
# must skip it. The gate's own rule (paused or parked) comes first; wiring adds the others.
Hold = Callable[[tuple[str, ...], SchedulerState], bool]


class ClaimGate:
    """What a claim asks before it takes a candidate (app/leases/claims/): the scheduler row, and
    whether a lease is held back by any of `holds`, in order."""

    def __init__(
        self,
        kernel: Kernel,
        holds: tuple[Hold, ...] = (),
        *,
        leases: LeaseRows,
        queues: QueueRows,
        sweeper: SweeperRows,
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.queues = queues
        self.sweeper = sweeper
        self.holds = holds
        self._lineages: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def read(self) -> SchedulerState:
        # Read afresh on every look (eventually consistent: half a read unit), not cached
        # per process: API requests are served by many instances, and a resume answered by
        # one must not leave another handing out nothing (or a pause, everything) meanwhile.
        return self.sweeper.get_scheduler(consistent=False)

    def lineage_cache(self) -> OrderedDict[str, tuple[str, ...]]:
        return self._lineages

    def held_back(self, lease: Lease, gate: SchedulerState) -> bool:
        """True when the lease's task or an ancestor is paused, or its task is parked (or held
        by `holds`); remembers its chain."""
        chain = tuple(x for x in (lease.task_id, *(lease.lineage or ())) if x)
        cache = self.lineage_cache()
        cache[lease.id] = chain
        while len(cache) > LINEAGE_CACHE:
            cache.popitem(last=False)
        return self.chain_held(chain, gate)

    def chain_held(self, chain: tuple[str, ...], gate: SchedulerState) -> bool:
        """Whether anything holds a lease with this chain: pause or parking, then `holds`."""
        return _holds(chain, gate) or any(hold(chain, gate) for hold in self.holds)

    def held_in_queue(
        self, pool: str, count: int, gate: SchedulerState, priority: int | None = None
    ) -> list[bool]:
        """For a pool's oldest pending leases (at most HOLD_SCAN), oldest first: whether the
        claim gate would skip each. Empty when nothing is held anywhere, so an instance with
        no paused, parked or blocked task reads nothing more than the counts."""
        if (
            not (gate.paused_tasks or gate.attention or gate.blocked or gate.cancelled)
            or count <= 0
        ):
            return []
        ids = self.queues.queue_page(pool, None, min(count, HOLD_SCAN), priority)
        cache = self.lineage_cache()
        unknown = [x for x in ids if x not in cache]
        leases = self.leases.get_leases(unknown) if unknown else {}
        held: list[bool] = []
        for lease_id in ids:
            if lease_id in cache:
                held.append(self.chain_held(cache[lease_id], gate))
            elif lease_id in leases:
                lease = leases[lease_id]
                held.append(lease.state is LeaseState.PENDING and self.held_back(lease, gate))
            else:
                held.append(False)  # gone since the index was read: the count had it
        return held

    def candidates(
        self,
        pool: str,
        tried: set[str],
        gate: SchedulerState,
        want: int,
        priority: int | None = None,
        skip: Set[str] = frozenset(),
    ) -> list[str]:
        """Up to `want` untried queue heads of one priority's partition (None: the default),
        oldest first, past those known to be held back and those in `skip` (the claim knows
        they cannot be taken now, e.g. their concurrency key is full): the scan reaches past
        them, up to GATE_SCAN heads, so they do not hide what can be claimed."""
        cache = self.lineage_cache()
        limit = want + len(tried)
        fresh: list[str] = []
        while True:
            seen = self.queues.queue_candidates(
                pool, limit, due_by=self.kernel.clock.now_ms(), priority=priority
            )
            held = [x for x in seen if x in skip or (x in cache and _holds(cache[x], gate))]
            fresh = [x for x in seen if x not in tried and x not in held]
            if len(fresh) >= want or len(seen) < limit or limit >= GATE_SCAN:
                return fresh[:want]
            limit = min(GATE_SCAN, limit + len(held) + want)


def queue_tiers(pool: Pool) -> list[int | None]:
    """The pool's queue partitions in claim order: the marked priorities above the default,
    the default partition (None), then the marked ones below it."""
    marked = sorted({int(p) for p in (pool.queue_marks or {}) if p.isdigit()}, reverse=True)
    return [
        *(p for p in marked if p > DEFAULT_PRIORITY),
        None,
        *(p for p in marked if p < DEFAULT_PRIORITY),
    ]


def _holds(chain: tuple[str, ...], gate: SchedulerState) -> bool:
    """A pause or a cancel holds the task's whole subtree; parking holds the parked task alone
    (the chain's first id is the lease's own task): a child queued under a parked parent is
    still work a claim may take."""
    if chain and chain[0] in gate.attention:
        return True
    return any(x in gate.paused_tasks or x in gate.cancelled for x in chain)


@record
class SchedulerStatus:
    paused: bool
    queued_run_count: int
    capacity_waiting_count: int
    starved_run_count: int
    needs_attention_run_count: int
    paused_by: str | None = None


@record
class BacklogEntry:
    lease: Lease
    effective_paused: bool
    paused_by_task_id: str | None


@record
class Drained:
    drained: bool
    active: int


class Scheduler:
    def __init__(
        self,
        kernel: Kernel,
        gate: ClaimGate,
        *,
        leases: LeaseRows,
        pools: PoolRows,
        queues: QueueRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
        timeline: TimelineRows,
        workers: WorkerRows,
    ) -> None:
        self.gate = gate
        self.kernel = kernel
        self.leases = leases
        self.pools = pools
        self.queues = queues
        self.sweeper = sweeper
        self.tasks = tasks
        self.timeline = timeline
        self.workers = workers

    def pause_scheduler(self, actor: Principal) -> SchedulerStatus:
        return self._set_scheduler(actor, True)

    def resume_scheduler(self, actor: Principal) -> SchedulerStatus:
        return self._set_scheduler(actor, False)

    def _set_scheduler(self, actor: Principal, paused: bool) -> SchedulerStatus:
        authz.require_operator(actor, "admin")
        now = self.kernel.clock.now_ms()
        if self.sweeper.get_scheduler().paused != paused:
            self.sweeper.set_scheduler_paused(paused, actor.token_id, now)
            self._record(
                "scheduler.paused" if paused else "scheduler.resumed",
                {"by": actor.token_id, "actor_kind": actor.kind},
            )
        return self._status()

    def scheduler_status(self, actor: Principal) -> SchedulerStatus:
        # Counts over every space: a token limited to some spaces may not read them.
        authz.require_operator(actor, "read")
        return self._status()

    def _status(self) -> SchedulerStatus:
        """Counts from the queue index (keys only, COUNT, bounded per pool) and the scheduler
        row; no table scan. Only claimable leases count as queued: one whose task (or an
        ancestor) is paused, parked in needs_attention or blocked is held back by the same rule
        the claim gate applies (a parked run counts once, in needs_attention_run_count).
        Capacity-waiting: claimable in a pool with a reachable worker. Starved: claimable and
        pending longer than the pool's min_queued_age_seconds with none."""
        gate = self.sweeper.get_scheduler()
        now = self.kernel.clock.now_ms()
        queued = waiting = starved = 0
        spaces: dict[str, Space] = {}
        for pool in self.pools.list_pools():
            # Each priority's partition the pool marks, then the default one (queue_tiers).
            tiers = []
            for tier in queue_tiers(pool):
                count = self.queues.count_queue(pool.name, None, COUNT_BUDGET, tier)
                held = self.gate.held_in_queue(pool.name, count, gate, tier)
                tiers.append((tier, count - sum(held), held))
            claimable = sum(c for _, c, _ in tiers)
            queued += claimable
            if claimable <= 0:
                continue
            staffed, alone_since = self._staffing(pool, now)
            if staffed:
                waiting += claimable
                continue
            since = self._starving_since(pool, gate, spaces, alone_since)
            old = now - pool.min_queued_age_seconds * 1000
            if since is None or since > old:
                continue  # nothing could claim it (paused, archived), or not for long enough
            for tier, _, held in tiers:
                # Each partition is oldest first, so its old ones are a prefix of those checked.
                aged = self.queues.count_queue(pool.name, old, COUNT_BUDGET, tier)
                starved += max(0, aged - sum(held[:aged]))
        return SchedulerStatus(
            paused=gate.paused,
            queued_run_count=queued,
            capacity_waiting_count=waiting,
            starved_run_count=starved,
            needs_attention_run_count=len(gate.attention),
            paused_by=gate.paused_by if gate.paused else None,
        )

    def _starving_since(
        self,
        pool: Pool,
        gate: SchedulerState,
        spaces: dict[str, Space],
        alone_since: int | None,
    ) -> int | None:
        """Since when the pool's work could have been claimed with no reachable worker there,
        for starvation's age; None while nothing can claim it (its pool paused, its space
        archived, the scheduler paused). The age restarts when such a pause ends, and runs
        from `alone_since` (when the pool's last reachable worker went away): time queued
        behind a full ceiling, a full key or the rate limit while a worker was there is
        waiting for capacity, not starving."""
        if pool.space not in spaces:
            spaces[pool.space] = self.kernel.catalog.space_cached(pool.space)
        space = spaces[pool.space]
        if pool.paused or space.archived or gate.paused:
            return None
        ends = (pool.paused_changed_at, space.archived_changed_at, gate.paused_at, alone_since)
        return max((t for t in ends if t is not None), default=0)

    def _staffing(self, pool: Pool, now: int) -> tuple[bool, int | None]:
        """Whether the pool has a reachable worker now and, when it has none, since when (the
        worker rows already read for the first answer: no read more)."""
        workers = self.workers.list_workers(pool.name, now_ms=now)
        if any(reachable(w, pool, now) for w in workers):
            return True, None
        return False, unreachable_since(workers, pool)

    def _staffed(self, pool: Pool, now: int) -> bool:
        return self._staffing(pool, now)[0]

    def backlog(
        self,
        actor: Principal,
        space: str,
        include_paused: bool,
        limit: int = BACKLOG_PAGE,
        cursor: str | None = None,
    ) -> tuple[list[BacklogEntry], str | None]:
        """One page of a space's pending leases, newest first, each with its effective pause;
        paused ones only when asked for (a page may then hold fewer than `limit`)."""
        authz.require_operator(actor, "read", space)
        page = self.leases.list_leases(space, limit, cursor, LeaseState.PENDING, None)
        gate = self.sweeper.get_scheduler()
        found = []
        for lease in page.leases:
            by = next(
                (
                    x
                    for x in (lease.task_id, *reversed(lease.lineage or ()))
                    if x and x in gate.paused_tasks
                ),
                None,
            )
            if by is None or include_paused:
                found.append(BacklogEntry(lease, by is not None, by))
        return found, page.next_cursor

    def drain(self, actor: Principal, timeout_seconds: float) -> Drained:
        """Pause the scheduler, then wait (bounded) until no lease is held."""
        authz.require_operator(actor, "admin")
        if not 0 <= timeout_seconds <= MAX_DRAIN_SECONDS:
            raise ValidationFailed(f"timeout_seconds: between 0 and {MAX_DRAIN_SECONDS}")
        self._set_scheduler(actor, True)
        give_up = self.kernel.clock.now_ms() + int(timeout_seconds * 1000)
        while True:
            active = sum(
                self.queues.count_held(p.name, COUNT_BUDGET) for p in self.pools.list_pools()
            )
            left = give_up - self.kernel.clock.now_ms()
            if active == 0 or left <= 0:
                return Drained(drained=active == 0, active=active)
            self.kernel.clock.sleep(min(DRAIN_POLL_SECONDS, left / 1000))

    # -------------------------------------------------------------- starvation

    def park_starved(self, pools: list[Pool] | None = None) -> list[str]:
        """The sweeper's share: a claimable pending lease starved (no reachable worker) for
        longer than min_queued_age + starvation_escalation (counted from when it was queued,
        its pool's last reachable worker went away or a pause ended, the latest of them)
        parks its task in needs_attention,
        where claims skip it. Bounded: PARK_PER_PASS per pool per pass."""
        now = self.kernel.clock.now_ms()
        gate: SchedulerState | None = None
        parked: list[str] = []
        spaces: dict[str, Space] = {}
        for pool in self.pools.list_pools() if pools is None else pools:
            age = (pool.min_queued_age_seconds + pool.starvation_escalation_seconds) * 1000
            # Keys only, and only entries that old: a pass with nothing starved reads no item.
            ids = [
                lease_id
                for tier in queue_tiers(pool)
                for lease_id in self.queues.queue_page(pool.name, now - age, GATE_SCAN, tier)
            ][:GATE_SCAN]
            if not ids:
                continue
            staffed, alone_since = self._staffing(pool, now)
            if staffed:
                continue
            gate = gate or self.sweeper.get_scheduler()
            since = self._starving_since(pool, gate, spaces, alone_since)
            if since is None or now - since < age:
                continue  # held by a pause, or one ended too lately: not starved that long
            cache = self.gate.lineage_cache()
            fresh = [x for x in ids if not (x in cache and _holds(cache[x], gate))]
            for lease in self.leases.get_leases(fresh[:PARK_PER_PASS]).values():
                if lease.state is not LeaseState.PENDING or self.gate.held_back(lease, gate):
                    continue
                if lease.task_id and self._park(lease, now):
                    parked.append(lease.task_id)
        return parked

    # -------------------------------------------------------- capacity waiting

    def note_capacity_waiting(self, pools: list[Pool], episodes: dict[str, int]) -> dict[str, int]:
        """The sweeper's share: a pool whose claimable work waits on a full ceiling (a
        reachable worker, its held count at `max_active`) is in a capacity-waiting episode.
        Its start records `scheduler.capacity_waiting` once, on the scheduler's timeline and
        on the tasks of the queue's head (at most CAPACITY_TELL); later passes of the same
        episode record nothing. `episodes` (pool -> since) is what the previous pass
        remembered; the answer is what this one leaves (an episode ends when the pool stops
        waiting). Bounded: a ceiling count and a queue-head read per pool with a ceiling."""
        now = self.kernel.clock.now_ms()
        gate: SchedulerState | None = None
        kept: dict[str, int] = {}
        for pool in pools:
            if pool.max_active is None or pool.paused:
                continue
            held = self.queues.held_count("pool", pool.name)
            if held < pool.max_active:
                continue
            ids = []
            for tier in queue_tiers(pool):  # the heads a claim would take first
                ids = self.queues.queue_candidates(
                    pool.name, CAPACITY_TELL, due_by=now, priority=tier
                )
                if ids:
                    break
            if not ids or not self._staffed(pool, now):
                continue
            gate = gate or self.sweeper.get_scheduler()
            waiting = [
                lease
                for lease in self.leases.get_leases(ids).values()
                if lease.state is LeaseState.PENDING and not self.gate.held_back(lease, gate)
            ]
            if not waiting:
                continue
            if pool.name in episodes:
                kept[pool.name] = episodes[pool.name]
                continue
            if len(kept) >= CAPACITY_EPISODES:
                continue
            kept[pool.name] = now
            data = {"pool": pool.name, "held": held, "max_active": pool.max_active, "since": now}
            self._record("scheduler.capacity_waiting", {**data, "waiting": len(waiting)})
            for lease in sorted(waiting, key=lambda x: (x.created_at, x.id)):
                if lease.task_id is None:
                    continue
                event = Event(
                    id=f"capacity.{lease.id}.{now}",
                    subject_kind=SubjectKind.TASK,
                    subject_id=lease.task_id,
                    type="scheduler.capacity_waiting",
                    at=now,
                    lease_id=lease.id,
                    fence=lease.fence,
                    data=data,
                )
                with contextlib.suppress(Conflict):  # a pass retried: told already
                    self.timeline.put_event(event)
        return kept

    def _park(self, lease: Lease, now: int) -> bool:
        task = self.tasks.get_task(lease.task_id or "")
        if task is None or task.attention:
            return False
        flagged = next_version(
            task,
            TASK_STARVATION_ESCALATED,
            {
                "lease_id": lease.id,
                "pool": lease.pool,
                "queued_since": lease.created_at,
                "starved_ms": now - lease.created_at,
            },
            now,
            attention=True,
        )
        try:
            self.kernel.commit(
                Change(
                    tasks=[
                        TaskWrite(flagged, expect_job_id=task.job_id, expect_version=task.version)
                    ],
                    holds=[HoldOp("attention", task.id, True)],
                )
            )
        except Conflict:
            return False  # its run moved on meanwhile: judged again next pass
        return True

    def _record(self, type_: str, data: dict[str, Any]) -> None:
        now = self.kernel.clock.now_ms()
        self.timeline.put_event(
            Event(
                id=self.kernel.ids.new_id("ev"),
                subject_kind=SCHEDULER_TIMELINE[0],
                subject_id=SCHEDULER_TIMELINE[1],
                type=type_,
                at=now,
                data=data,
            )
        )
