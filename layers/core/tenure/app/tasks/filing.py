"""Tasks: filing them, opening a run (at most one open run per task), reading them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app.ports import (
    Ceiling,
    Change,
    CopySuccess,
    EventPage,
    GraphOp,
    LeaseWrite,
    TaskWrite,
)
from tenure.app.rows import GraphRows, SpaceRows, TaskRows, TimelineRows
from tenure.app.runs import RunControls, RunStart, stored_priority
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    CeilingReached,
    Conflict,
    InvalidTransition,
    NotFound,
    TenureError,
    Unavailable,
    ValidationFailed,
)
from tenure.domain.model import (
    DEFAULT_MAX_ATTEMPTS,
    Lease,
    Pool,
    Principal,
    Task,
)
from tenure.domain.states import LeaseState, SubjectKind, TaskStatus
from tenure.domain.task_keys import task_id_of_key
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.runs import Runs

# A page of a timeline, unless the caller asks for fewer.
ACTIVITY_PAGE = 200
# A filing whose write lost to a concurrent one (a counter or a blocker it names moved
# meanwhile) places the task again from fresh reads, at most this many times in all.
FILING_TRIES = 4


@record
class TaskView:
    task: Task
    lease: Lease | None
    status: TaskStatus
    # Derived on every read, never stored (Graph.view, app/tasks/graph.py).
    blocked_reasons: tuple[dict[str, Any], ...] = ()
    effective_paused: bool = False
    paused_by_task_id: str | None = None
    children_total: int = 0
    children_done: int = 0
    usage: dict[str, Any] | None = None  # summed over its leases (app/usage.py)


@record
class TaskLinks:
    """Where a new task sits in the graph: its parent, the tasks it waits for, and whether
    their success enqueues it."""

    parent_id: str | None = None
    depends_on: tuple[str, ...] = ()
    auto_enqueue_on_ready: bool = False
    # Delegation: None means the default (true when filed with a lease token).
    wake_creator: bool | None = None
    # Set by the service, never by a caller: the lease whose token files, its pool, and the
    # task at the top of its tree of delegation.
    creator_lease: str | None = None
    creator_pool: str | None = None
    delegation_root: str | None = None
    # Held for a person's approval before any run (app/tasks/approval.py).
    requires_approval: bool = False
    # Delegation: the child's open runs are ended this long after filing (lease tokens only).
    ttl_seconds: int | None = None


# Who files, where, and with which links: a stage may refuse the filing or return them
# changed (a lease token files as a member of its lease's space).
Filer = Callable[
    [Principal, "str | None", "TaskLinks"], tuple[Principal, "str | None", "TaskLinks"]
]


@record
class Placing:
    """A new task as filing's `links` place it, each stage handing the next this value with
    its own changes: the task row, its links, the pool it is enqueued on (None: filed
    without a run), the graph writes so far, and whether it is still to be enqueued at once."""

    task: Task
    links: TaskLinks
    pool: Pool | None
    ops: tuple[GraphOp, ...] = ()
    enqueue: bool = True


# Places the new task: returns the placing extended (or refuses the filing).
Link = Callable[[Placing], Placing]
# What a filing counts against: given the task and its links, the counters its own write
# moves (each +1, only while below its limit), each with the refusal that answers a filing
# whose counter was full. None of them for a filing that counts nothing.
Bound = Callable[[Task, "TaskLinks"], list[tuple[Ceiling, TenureError]]]


def operator_files(
    actor: Principal, space: str | None, links: TaskLinks
) -> tuple[Principal, str, TaskLinks]:
    """The filer when no stage claims the filing: an operator names the space."""
    if space is None:
        authz.require_role(actor, "member")  # who may file at all, before the body
        raise ValidationFailed("space: Field required (an operator names the space)")
    return actor, space, links


class Filing:
    """Filing tasks and enqueueing them: `filers` decide who files where (the first that
    answers wins, `operator_files` last), `links` place the task in the graph, in order, and
    `bounds` name the counters the filing moves in its own write."""

    def __init__(
        self,
        kernel: Kernel,
        runs: Runs,
        filers: tuple[Filer, ...] = (),
        links: tuple[Link, ...] = (),
        bounds: tuple[Bound, ...] = (),
        *,
        graph: GraphRows,
        spaces: SpaceRows,
        tasks: TaskRows,
        timeline: TimelineRows,
    ) -> None:
        self.kernel = kernel
        self.graph = graph
        self.spaces = spaces
        self.tasks = tasks
        self.timeline = timeline
        self.runs = runs
        self.filers = filers
        self.links = links
        self.bounds = bounds

    def create_task(
        self,
        actor: Principal,
        space: str | None,
        title: str,
        workflow: str | None,
        body: str | None,
        properties: dict[str, Any],
        pool: str | None,
        max_attempts: int | None,
        not_before: int | None = None,
        links: TaskLinks | None = None,
        controls: RunControls | None = None,
        concurrency_key: str | None = None,
    ) -> tuple[Task, Lease | None]:
        controls = controls or RunControls()
        links = links or TaskLinks()
        for filer in self.filers:
            actor, space, links = filer(actor, space, links)
        actor, space, links = operator_files(actor, space, links)
        authz.require_operator(actor, "member", space)
        fencing.refuse_tokens({"title": title, "body": body, "properties": properties}, "the task")
        target = self._open_pool(pool, space)
        if workflow is not None and self.spaces.get_workflow(space, workflow) is None:
            raise NotFound(f"workflow {workflow!r} does not exist in space {space!r}")
        number = self.tasks.next_task_number(space)
        task = Task(
            id=task_id_of_key(f"{space}-{number}"),
            key=f"{space}-{number}",
            space=space,
            title=title,
            body=body,
            properties=properties,
            workflow=workflow,
            max_attempts=max_attempts or DEFAULT_MAX_ATTEMPTS,
            created_at=self.kernel.clock.now_ms(),
            concurrency_key=check_concurrency_key(concurrency_key),
            priority=stored_priority(controls.priority),
            expires_in_seconds=controls.expires_in_seconds,
            max_run_seconds=controls.max_run_seconds,
        )
        for attempt in range(FILING_TRIES):
            if attempt:
                self.kernel.back_off(attempt - 1)
            counted = [pair for bound in self.bounds for pair in bound(task, links)]
            try:
                return self._place(task, links, target, not_before, counted)
            except CeilingReached as full:
                for ceiling, refusal in counted:
                    if (ceiling.scope, ceiling.name) == (
                        full.details.get("scope"),
                        full.details.get("name"),
                    ):
                        raise refusal from full
                raise
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
        raise Unavailable(f"filing in space {space} kept losing to other writes; try again")

    def _open_pool(self, pool: str | None, space: str) -> Pool | None:
        """The pool a filing or an enqueue names (read fresh, and `space`'s), refused (409)
        when the space is archived. The pool row says so; until the table's schema has that
        copy, and for a filing with no pool, the space row is read fresh too."""
        if pool is not None and self.kernel.gates.pool_gates():
            target = self.kernel.pool_in_space(pool, space)
            if target.space_archived:
                raise InvalidTransition(f"space {space!r} is archived; unarchive it first")
            return target
        self.kernel.refuse_archived(space)
        return self.kernel.pool_in_space(pool, space) if pool is not None else None

    def _place(
        self,
        task: Task,
        links: TaskLinks,
        target: Pool | None,
        not_before: int | None,
        counted: list[tuple[Ceiling, TenureError]],
    ) -> tuple[Task, Lease | None]:
        """The task's graph writes from fresh reads, committed with it (and its first run)."""
        placing = Placing(task, links, target)
        for link in self.links:
            placing = link(placing)
        task, graph, enqueue = placing.task, list(placing.ops), placing.enqueue
        ceilings = [ceiling for ceiling, _ in counted]
        if target is None or not enqueue:
            change = Change(tasks=[TaskWrite(task, create=True)], graph=graph, ceilings=ceilings)
            self.kernel.commit(change)
            return task, None
        run = RunStart(graph=tuple(graph))
        task, lease, change = self.runs.run_change(
            task, target, create_task=True, expect_job_id=None, not_before=not_before, run=run
        )
        change = replace(change, ceilings=[*change.ceilings, *ceilings])
        if self.kernel.files_untransacted() and alone(change):
            return task, self._lease_then_task(change)
        self.kernel.commit(change)
        return task, lease

    def _lease_then_task(self, change: Change) -> Lease:
        """A task and its first lease, and nothing else, written one after the other rather
        than in a transaction (which bills each item twice): the lease first, marked
        task-pending, then the task, each only if new. A claim hands the lease out only once
        it has read the task (app/leases/orphans.py); a filing that dies between the two
        leaves a lease that the first claim to meet it after a while ends."""
        [first] = change.leases
        lease = replace(first.new, tp=True)
        self.kernel.commit(Change(leases=[LeaseWrite(lease)], jobs=change.jobs))
        try:
            self.kernel.commit(Change(tasks=change.tasks))
        except Conflict as lost:
            # Only a claim that took this filing for dead (it waited long enough for the
            # task, then gave its id up) makes the task's write lose: nothing was filed.
            raise Unavailable("filing took too long and was given up; try again") from lost
        return lease

    def enqueue(
        self,
        actor: Principal,
        task_id: str,
        pool: str,
        not_before: int | None = None,
        controls: RunControls | None = None,
        concurrency_key: str | None = None,
    ) -> Lease:
        """A new run of the task on `pool`; a `concurrency_key` given here becomes the task's
        (this run and the later ones count under it), none keeps the task's own; `controls`
        are this run's priority and timeouts, the task's own where left out."""
        controls = controls or RunControls()
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        if concurrency_key is not None:
            task = replace(task, concurrency_key=check_concurrency_key(concurrency_key))
        authz.require_operator(actor, "member", task.space)
        target = self._open_pool(pool, task.space)
        assert target is not None
        current = self.kernel.newest_lease(task)
        if current is not None and current.state.active:
            raise InvalidTransition(f"task {task.key} already has an open run ({current.id})")
        if task.attention:
            raise InvalidTransition(f"task {task.key} needs attention; recover it first")
        if task.awaiting_approval:
            raise InvalidTransition(f"task {task.key} is awaiting approval; approve it first")
        if task.rejected:
            raise InvalidTransition(f"task {task.key} was rejected; it takes no run")
        if (
            current is not None
            and current.state is LeaseState.FAILED
            and current.attempt >= task.max_attempts
        ):
            # Its failures used up its attempts: a new run would start the count over. A
            # person decides that with a retry (which counts on) or a new task.
            raise InvalidTransition(
                f"task {task.key} failed on attempt {current.attempt} of {task.max_attempts}; "
                "its attempts are used up (retry its lease to go on counting)"
            )
        if current is not None and current.outcome == "success" and self.kernel.successes_derived():
            self._keep_success(task, current)
        # The last run must still be the ended lease just read: a release or an expiry between
        # the reads would have handed its job to a successor (an open run after all).
        checks = [(task.job_id, current.id)] if task.job_id and current else []
        try:
            _, lease = self.runs.open_run(
                task,
                target,
                create_task=False,
                expect_job_id=task.job_id,
                job_checks=checks,
                not_before=not_before,
                run=RunStart(
                    priority=controls.priority,
                    expires_in_seconds=controls.expires_in_seconds,
                    max_run_seconds=controls.max_run_seconds,
                ),
            )
        except Conflict as lost:
            raise InvalidTransition(f"task {task.key} already has an open run") from lost
        return lease

    def _keep_success(self, task: Task, succeeded: Lease) -> None:
        """Before a new run of a task whose last run succeeded: that success copied to the
        task's graph row (once, while it is due), unless the row has one. A task nothing is
        linked to keeps its success on its newest lease, and once the new run is the newest, a
        dependent or a child filed later would find no success anywhere and its inputs no
        result. One consistent read, and one write only the first time; a rare path."""
        if succeeded.state is not LeaseState.COMPLETED:
            return
        if self.graph.get_graph(task.id).succeeded_at is not None:
            return
        at = succeeded.ended_at or self.kernel.clock.now_ms()
        copy = CopySuccess(task.id, at=at, lease_id=succeeded.id)
        with contextlib.suppress(Conflict):  # no longer due: copied meanwhile, or not its own
            self.kernel.commit(Change(graph=[copy]))

    def activity(
        self, actor: Principal, task_id: str, limit: int = ACTIVITY_PAGE, cursor: str | None = None
    ) -> EventPage:
        """One page of the task's timeline, oldest first (with the derived `lease.reclaimed`
        of a lease that had nothing to delete, once its retention has passed)."""
        authz.require_role(actor, "read")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "read", task.space)
        return self.timeline.timeline_page(
            SubjectKind.TASK, task.id, limit, cursor, reclaimed=self.kernel.reclaimed_at
        )


def alone(change: Change) -> bool:
    """Whether a filing's change is only its new task and its first lease (and a job written
    ahead of them): nothing else that must land with them, so they need no transaction."""
    return (
        len(change.leases) == 1
        and change.leases[0].expect is None
        and len(change.tasks) == 1
        and change.tasks[0].create
        and all(job.ahead and job.expect_fence is None for job in change.jobs)
        and not (change.ceilings or change.records or change.job_checks)
        and not (change.graph or change.holds)
    )


# A concurrency key is shown on the board and in labels (`waiting for <key>`) and is part of
# a counter row's key.
MAX_CONCURRENCY_KEY = 128


def check_concurrency_key(key: str | None) -> str | None:
    """The key as stored, or ValidationFailed: 1 to 128 characters, no control characters."""
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_CONCURRENCY_KEY:
        raise ValidationFailed(f"concurrency_key: must be 1 to {MAX_CONCURRENCY_KEY} characters")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in key):
        raise ValidationFailed("concurrency_key: must not contain control characters")
    return key
