"""Inspect: a read-only triage snapshot of a task or a lease, and the next action
an operator or an agent should take. It reads a bounded number of rows and never a token:
claim evidence is the first 8 hex characters of the claim token's hash, nothing more."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from tenure.app.rows import LeaseRows, SweeperRows, TaskRows, TimelineRows, WorkerRows
from tenure.app.tasks.filing import TaskView
from tenure.app.workers import reachable
from tenure.domain import authz
from tenure.domain.errors import NotFound
from tenure.domain.events import LEASE_STALE_REPORT
from tenure.domain.fencing import DEADLINE_SLACK, iso_ms
from tenure.domain.model import Event, Lease, Principal, Task
from tenure.domain.states import REPORTABLE, LeaseState, SubjectKind, TaskStatus
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.conditions import Conditions
    from tenure.app.kernel import Kernel
    from tenure.app.tasks.graph import Graph

RECENT_EVENTS = 20
RECENT_LEASES = 10
# The timeline is read this far back (newest first) to find the recent leases.
LEASE_EVENTS_SCAN = 100


class NextAction(StrEnum):
    CLAIM_AVAILABLE = "claim_available"  # pending, nothing holds it back, a worker is there
    WAITING_FOR_SESSION = "waiting_for_session"  # pending or unstarted; no worker yet, or held
    STRANDED = "stranded"  # a holder silent past its deadline, or pending work starved
    RUNNING = "running"  # held, heard from within its deadline
    RECOVERY_REQUIRED = "recovery_required"  # needs attention, or its last run failed
    TERMINAL = "terminal"  # completed or cancelled, nothing open


@record
class Diagnostic:
    """One thing inspect found wrong, by rule (docs/task-graph.md, Inspect): its code, in
    words, and since when it holds (epoch ms)."""

    code: str
    message: str
    since: int


@record
class Snapshot:
    task: TaskView | None
    current_lease: Lease | None
    recent_leases: list[Lease]
    recent_events: list[Event]
    scheduler: dict[str, Any]
    diagnostics: list[Diagnostic]
    next_action: NextAction
    as_of: int
    facts: dict[str, Any]  # what the rules were judged on (pool, workers, ages, condition…)


class Inspection:
    def __init__(
        self,
        kernel: Kernel,
        conditions: Conditions,
        graph: Graph,
        *,
        leases: LeaseRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
        timeline: TimelineRows,
        workers: WorkerRows,
    ) -> None:
        self.conditions = conditions
        self.graph = graph
        self.kernel = kernel
        self.leases = leases
        self.sweeper = sweeper
        self.tasks = tasks
        self.timeline = timeline
        self.workers = workers

    def inspect(self, actor: Principal, some_id: str) -> Snapshot:
        """A task id or a lease id: the snapshot of that task (a lease's own task), or of the
        lease alone when it answers for a workflow or a space."""
        authz.require_role(actor, "read")
        task = self.tasks.get_task(some_id) if len(some_id) <= 128 else None
        lease: Lease | None = None
        if task is None:
            lease = self.leases.get_lease(some_id) if len(some_id) <= 128 else None
            if lease is None:
                raise NotFound(f"no task or lease {some_id}")
            if lease.task_id is not None:
                task = self.tasks.get_task(lease.task_id)
        space = task.space if task is not None else lease.space if lease is not None else None
        authz.require_operator(actor, "read", space)
        now = self.kernel.clock.now_ms()
        current = self.kernel.newest_lease(task) if task is not None else lease
        if current is not None and current.job_id and lease is not None and task is None:
            job = self.kernel.job_of(current)
            newest = self.leases.get_lease(job.lease_id) if job else None
            current = newest or current
        view = self.graph.describe_task(task, current) if task is not None else None
        subject = (SubjectKind.TASK.value, task.id) if task else _subject(current)
        events = self.timeline.timeline_page(
            *subject,
            RECENT_EVENTS,
            None,
            newest_first=True,
            reclaimed=self.kernel.catalog.reclaimed_at,
        ).events
        recent = self._recent_leases(subject, current)
        gate = self.sweeper.get_scheduler()
        scheduler = {
            "paused": gate.paused,
            "effective_paused": bool(view and view.effective_paused),
            "paused_by_task_id": view.paused_by_task_id if view else None,
            "parked": bool(task and task.id in gate.attention),
        }
        facts = self._diagnose(task, view, current, now)
        facts["capacity_waiting"] = _capacity_waiting(current, events)
        action = self._next_action(view, current, facts, gate.paused)
        paused = gate.paused or bool(facts.get("pool_paused")) or bool(facts.get("space_archived"))
        paused = paused or bool(view and (view.effective_paused or view.blocked_reasons))
        found = diagnostics(current, facts, events, recent, paused, now)
        shown = self.kernel.catalog.shown
        current = shown(current) if current is not None else None
        recent = [shown(x) for x in recent]
        return Snapshot(view, current, recent, events, scheduler, found, action, now, facts)

    def _recent_leases(self, subject: tuple[str, str], current: Lease | None) -> list[Lease]:
        page = self.timeline.timeline_page(*subject, LEASE_EVENTS_SCAN, None, newest_first=True)
        ids = list(dict.fromkeys(e.lease_id for e in page.events if e.lease_id))
        if current is not None and current.id not in ids:
            ids.insert(0, current.id)
        found = self.leases.get_leases(ids[:RECENT_LEASES])
        return sorted(found.values(), key=lambda x: (x.created_at, x.id), reverse=True)

    def _diagnose(
        self, task: Task | None, view: TaskView | None, lease: Lease | None, now: int
    ) -> dict[str, Any]:
        found: dict[str, Any] = {
            "status": view.status.value if view else None,
            "blocked_reasons": list(view.blocked_reasons) if view else [],
            "needs_attention": bool(task and task.attention),
            "pool": None,
            "pool_paused": None,
            "reachable_workers": None,
            "queued_condition": None,
            "queued_for_ms": None,
            "starved": False,
            "deadline_passed": False,
            "heard_from_ms_ago": None,
            "claim_token_hash_truncated": None,
            "attempt": None,
            "retry_depth": None,
        }
        if lease is None:
            return found
        pool = self.kernel.catalog.pool(lease.pool)
        workers = self.workers.list_workers(pool.name, now_ms=now)
        reachable_now = sum(1 for w in workers if reachable(w, pool, now))
        condition = self.conditions.queued_condition_of(lease)
        found.update(
            pool=pool.name,
            pool_paused=pool.paused,
            reachable_workers=reachable_now,
            queued_condition=condition.as_dict() if condition else None,
            claim_token_hash_truncated=lease.token_hash[:8] if lease.token_hash else None,
            attempt=lease.attempt,
            retry_depth=lease.retry_depth,
        )
        found["grace_ms"] = pool.grace_seconds * 1000
        if lease.state.active:
            # The sweeper's mass-expiry brake holds the pool's expiries back until then: a
            # silent holder is not expired, nor its job handed on, before it.
            until = self.sweeper.get_sweeper_state().holds.get(pool.name)
            found["mass_expiry_hold_until"] = until if until is not None and until > now else None
        found["space_archived"] = self.kernel.catalog.space_cached(pool.space).archived
        if lease.worker_id is not None and lease.state in REPORTABLE:
            worker = self.workers.get_worker(pool.name, lease.worker_id)
            found["holder_reachable"] = worker is not None and reachable(worker, pool, now)
            found["holder_last_seen"] = worker.last_seen if worker is not None else None
        if lease.state is LeaseState.PENDING:
            age = now - lease.created_at
            found["queued_for_ms"] = age
            found["starved"] = reachable_now == 0 and age > pool.min_queued_age_seconds * 1000
        if lease.state in REPORTABLE:
            found["deadline_passed"] = lease.deadline is not None and lease.deadline <= now
            # When the holder was last heard from: the lease's heartbeat_at is written only
            # with its deadline (up to half a toleration apart), the worker's last_seen at
            # least every half grace, so the later of the two is the nearer to the truth
            # (both are at or before the real last contact: late, never early).
            heard = [
                t for t in (lease.heartbeat_at, found.get("holder_last_seen")) if t is not None
            ]
            if heard:
                found["heard_from_at"] = max(heard)
                found["heard_from_ms_ago"] = now - max(heard)
            # A lease whose own heartbeats stopped while its worker goes on (another lease's
            # heartbeats, claims): heartbeat_at may lag by the deadline's slack, no more.
            tol = 1000 * (lease.lease_seconds or pool.toleration_seconds)
            found["beat_window_ms"] = int(tol * DEADLINE_SLACK)
        return found

    def _next_action(
        self,
        view: TaskView | None,
        lease: Lease | None,
        found: dict[str, Any],
        scheduler_paused: bool,
    ) -> NextAction:
        if view is not None and view.status is TaskStatus.NEEDS_ATTENTION:
            return NextAction.RECOVERY_REQUIRED
        if lease is not None and lease.state in REPORTABLE:
            return NextAction.STRANDED if found["deadline_passed"] else NextAction.RUNNING
        if lease is not None and lease.state.active:  # pending, dispatching
            if found["starved"]:
                return NextAction.STRANDED
            held = (
                scheduler_paused
                or found["pool_paused"]
                or bool(view and view.blocked_reasons)
                or not found["reachable_workers"]
            )
            return NextAction.WAITING_FOR_SESSION if held else NextAction.CLAIM_AVAILABLE
        if view is not None and view.status is TaskStatus.COMPLETED:
            return NextAction.TERMINAL
        if lease is not None and lease.state in (
            LeaseState.FAILED,
            LeaseState.LOST,
            LeaseState.KILLED,
        ):
            return NextAction.RECOVERY_REQUIRED  # retry (or enqueue) is the way on
        if lease is not None:
            return NextAction.TERMINAL  # completed or cancelled
        return NextAction.WAITING_FOR_SESSION  # never enqueued: waits for a run to be opened


def diagnostics(
    lease: Lease | None,
    facts: dict[str, Any],
    events: list[Event],
    recent: list[Lease],
    paused: bool,
    now: int,
) -> list[Diagnostic]:
    """The rules, each on what inspect read (a held run is never an orphan or stuck once it
    has ended: the rules look only at the current run's own state):

    * `stuck`: the run is running and its holder has not been heard from (a heartbeat of
      the lease or of its worker) for its pool's grace, or the lease itself has had no
      heartbeat for its grace plus the deadline's slack (heartbeats between deadline writes
      are not written) while its worker goes on;
    * `orphan`: the run is held by a worker that is no longer reachable;
    * `stranded`: the run is pending, no worker of its pool is reachable, and nothing pauses
      it (pool, space, scheduler, the task or an ancestor, a blocking reason);
    * `crashed`: the run was lost (its holder went silent past toleration) and no later run
      of the task exists;
    * `mass_expiry_hold`: the run is open and its pool's expiries are held back by the
      sweeper (most of the pool's workers fell silent together), its end in the message;
    * `stale_lease`: a late report on one of the task's runs was refused (the newest such).
    """
    found: list[Diagnostic] = []
    if lease is not None:
        grace = int(facts.get("grace_ms") or 0)
        found += _stuck(lease, facts, grace, now)
        found += _orphan(lease, facts, grace, now)
        if lease.state is LeaseState.PENDING and facts.get("reachable_workers") == 0 and not paused:
            found.append(
                Diagnostic(
                    "stranded",
                    f"queued with no reachable worker in pool {lease.pool}",
                    lease.created_at,
                )
            )
        found += _held_back(lease, facts, now)
        found += _crashed(lease, recent, now)
    return found + _stale_lease(events)


def _stuck(lease: Lease, facts: dict[str, Any], grace: int, now: int) -> list[Diagnostic]:
    beat = facts.get("heard_from_at", lease.heartbeat_at)
    own = lease.heartbeat_at
    window = int(facts.get("beat_window_ms") or 0)
    if lease.state is LeaseState.RUNNING and beat is not None and now - beat > grace:
        return [
            Diagnostic(
                "stuck",
                f"running, and its holder not heard from for {(now - beat) // 1000} s "
                f"(its pool's grace is {grace // 1000} s)",
                beat + grace,
            )
        ]
    if lease.state is LeaseState.RUNNING and own is not None and now - own > grace + window:
        return [
            Diagnostic(
                "stuck",
                f"running, and no heartbeat of this lease for over {(now - own) // 1000} s "
                f"though its worker is heard from (grace {grace // 1000} s, plus "
                f"{window // 1000} s that heartbeats may go unwritten)",
                own + grace + window,
            )
        ]
    return []


def _orphan(lease: Lease, facts: dict[str, Any], grace: int, now: int) -> list[Diagnostic]:
    if lease.state not in REPORTABLE or facts.get("holder_reachable") is not False:
        return []
    seen = facts.get("holder_last_seen")
    return [
        Diagnostic(
            "orphan",
            f"held by worker {lease.worker_id}, which is no longer reachable",
            int(seen) + grace if seen is not None else lease.claimed_at or now,
        )
    ]


def _held_back(lease: Lease, facts: dict[str, Any], now: int) -> list[Diagnostic]:
    hold_until = facts.get("mass_expiry_hold_until")
    if hold_until is None:
        return []
    return [
        Diagnostic(
            "mass_expiry_hold",
            f"most of pool {lease.pool}'s workers fell silent together, so the sweeper "
            f"expires none of its leases until {iso_ms(int(hold_until))}",
            now,  # the hold's start is not kept: when inspect saw it
        )
    ]


def _crashed(lease: Lease, recent: list[Lease], now: int) -> list[Diagnostic]:
    newest = max(recent, key=lambda x: (x.created_at, x.id), default=lease)
    if lease.state is not LeaseState.LOST or newest.id != lease.id:
        return []
    return [
        Diagnostic(
            "crashed",
            "its last run was lost (the holder went silent past toleration) and no "
            "later run exists",
            lease.ended_at or now,
        )
    ]


def _stale_lease(events: list[Event]) -> list[Diagnostic]:
    stale = [e for e in events if e.type == LEASE_STALE_REPORT]
    if not stale:
        return []
    last = max(stale, key=lambda e: e.at)
    return [
        Diagnostic(
            "stale_lease",
            f"a late report on lease {last.lease_id} (fence "
            f"{(last.data or {}).get('fence', last.fence)}) was refused",
            last.at,
        )
    ]


def _capacity_waiting(lease: Lease | None, events: list[Event]) -> dict[str, Any] | None:
    """The sweeper's word that this pending run waits on a full ceiling with workers
    reachable (`scheduler.capacity_waiting`, newest first in `events`), or None."""
    if lease is None or lease.state is not LeaseState.PENDING:
        return None
    for event in events:
        if event.type == "scheduler.capacity_waiting" and event.lease_id == lease.id:
            return {k: event.data.get(k) for k in ("pool", "held", "max_active", "since")}
    return None


def _subject(lease: Lease | None) -> tuple[str, str]:
    if lease is None:
        raise NotFound("nothing to inspect")
    return lease.subject_kind.value, lease.subject_id
