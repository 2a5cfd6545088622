"""Tasks: filing them, opening a run (at most one open run per task), reading them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tenure.app.kernel import ServiceBase
from tenure.app.ports import (
    Change,
    EventPage,
    GraphOp,
    HoldOp,
    JobWrite,
    LeaseWrite,
    TaskWrite,
)
from tenure.domain import authz
from tenure.domain import fencing as rules
from tenure.domain.errors import Conflict, InvalidTransition, NotFound
from tenure.domain.model import (
    DEFAULT_MAX_ATTEMPTS,
    Job,
    Lease,
    Pool,
    Principal,
    Task,
    task_status,
)
from tenure.domain.states import LeaseState, SubjectKind, TaskStatus

# A page of a timeline, unless the caller asks for fewer.
ACTIVITY_PAGE = 200


@dataclass(frozen=True)
class TaskView:
    task: Task
    lease: Lease | None
    status: TaskStatus
    # Derived on every read, never stored (core/tasks_graph.py).
    blocked_reasons: tuple[dict[str, Any], ...] = ()
    effective_paused: bool = False
    paused_by_task_id: str | None = None
    children_total: int = 0
    children_done: int = 0
    usage: dict[str, Any] | None = None  # summed over its leases (DESIGN §14, core/usage.py)


@dataclass(frozen=True)
class TaskLinks:
    """Where a new task sits in the graph (DESIGN §13)."""

    parent_id: str | None = None
    depends_on: tuple[str, ...] = ()
    auto_enqueue_on_ready: bool = False
    # Delegation (DESIGN §14): None means the default (true when filed with a lease token).
    wake_creator: bool | None = None
    creator_lease: str | None = None  # set by the service, never by a caller


@dataclass(frozen=True)
class RunStart:
    """How a new run starts: a first run (attempt 1), or a retry of an ended lease (DESIGN §13),
    with the graph writes that must land in the same transaction (e.g. auto-enqueue's mark)."""

    attempt: int = 1
    recovery_count: int = 0
    retry_depth: int = 0
    previous_lease_id: str | None = None
    graph: tuple[GraphOp, ...] = field(default_factory=tuple)
    holds: tuple[HoldOp, ...] = field(default_factory=tuple)


class TaskOps(ServiceBase):
    def create_task(
        self,
        actor: Principal,
        space: str,
        title: str,
        workflow: str | None,
        body: str | None,
        properties: dict[str, Any],
        pool: str | None,
        max_attempts: int | None,
        not_before: int | None = None,
        links: TaskLinks | None = None,
    ) -> tuple[Task, Lease | None]:
        authz.require_operator(actor, "member", space)
        rules.refuse_tokens({"title": title, "body": body, "properties": properties}, "the task")
        self._refuse_archived(space)
        if workflow is not None and self.store.get_workflow(space, workflow) is None:
            raise NotFound(f"workflow {workflow!r} does not exist in space {space!r}")
        target = self._pool_in_space(pool, space) if pool is not None else None
        number = self.store.next_task_number(space)
        task = Task(
            id=self.ids.new_id("task"),
            key=f"{space}-{number}",
            space=space,
            title=title,
            body=body,
            properties=properties,
            workflow=workflow,
            max_attempts=max_attempts or DEFAULT_MAX_ATTEMPTS,
            created_at=self.clock.now_ms(),
        )
        task, graph, enqueue = self._link(task, links or TaskLinks(), target)
        if target is None or not enqueue:
            self._commit(Change(tasks=[TaskWrite(task, create=True)], graph=graph))
            return task, None
        run = RunStart(graph=tuple(graph))
        task, lease = self._open_run(
            task, target, create_task=True, expect_job_id=None, run=run, not_before=not_before
        )
        return task, lease

    def _link(
        self, task: Task, links: TaskLinks, pool: Pool | None
    ) -> tuple[Task, list[GraphOp], bool]:
        """The task placed in the graph, the graph writes that file it, and whether it is
        enqueued at once (core/tasks_graph.py fills this in; here: no graph)."""
        return task, [], True

    def enqueue(
        self, actor: Principal, task_id: str, pool: str, not_before: int | None = None
    ) -> Lease:
        authz.require_role(actor, "member")
        task = self._task(task_id)
        authz.require_operator(actor, "member", task.space)
        target = self._pool_in_space(pool, task.space)
        self._refuse_archived(task.space)
        current = self._newest_lease(task)
        if current is not None and current.state.active:
            raise InvalidTransition(f"task {task.key} already has an open run ({current.id})")
        if task.attention:
            raise InvalidTransition(f"task {task.key} needs attention; recover it first")
        # The last run must still be the ended lease just read: a release or an expiry between
        # the reads would have handed its job to a successor (an open run after all).
        checks = [(task.job_id, current.id)] if task.job_id and current else []
        try:
            _, lease = self._open_run(
                task,
                target,
                create_task=False,
                expect_job_id=task.job_id,
                job_checks=checks,
                not_before=not_before,
            )
        except Conflict as lost:
            raise InvalidTransition(f"task {task.key} already has an open run") from lost
        return lease

    def get_task(self, actor: Principal, task_id: str) -> TaskView:
        authz.require_role(actor, "read")
        task = self._task(task_id)
        authz.require_operator(actor, "read", task.space)
        lease = self._newest_lease(task)
        status = task_status(task, lease)
        return TaskView(
            task=task, lease=lease if lease and lease.state.active else None, status=status
        )

    def activity(
        self, actor: Principal, task_id: str, limit: int = ACTIVITY_PAGE, cursor: str | None = None
    ) -> EventPage:
        """One page of the task's timeline, oldest first."""
        authz.require_role(actor, "read")
        task = self._task(task_id)
        authz.require_operator(actor, "read", task.space)
        return self.store.timeline_page(SubjectKind.TASK, task.id, limit, cursor)

    def _open_run(
        self,
        task: Task,
        pool: Pool,
        create_task: bool,
        expect_job_id: str | None,
        job_checks: list[tuple[str, str]] | None = None,
        not_before: int | None = None,
        run: RunStart | None = None,
    ) -> tuple[Task, Lease]:
        run = run or RunStart()
        now = self.clock.now_ms()
        job_id = self.ids.new_id("job")
        lease = Lease(
            event_type="lease.created",
            event_data={"pool": pool.name},
            updated_at=now,
            id=self.ids.new_id("lease"),
            job_id=job_id,
            space=task.space,
            pool=pool.name,
            subject_kind=SubjectKind.TASK,
            subject_id=task.id,
            task_id=task.id,
            task_key=task.key,
            workflow=task.workflow,
            state=LeaseState.PENDING,
            fence=1,
            attempt=run.attempt,
            created_at=now,
            # A time already past defers nothing: the lease is claimable at once.
            not_before=not_before if not_before is not None and not_before > now else None,
            pool_version=pool.version,
            lineage=task.ancestors,
            previous_lease_id=run.previous_lease_id,
            retry_depth=run.retry_depth,
        )
        if run.previous_lease_id is not None:
            lease = replace(
                lease,
                event_type="lease.retried",
                event_data={"pool": pool.name, "previous_lease_id": run.previous_lease_id},
            )
        job = Job(
            id=job_id,
            space=task.space,
            pool=pool.name,
            subject_kind=SubjectKind.TASK,
            subject_id=task.id,
            task_id=task.id,
            lease_id=lease.id,
            max_attempts=task.max_attempts,
            created_at=now,
            attempt=run.attempt,
            recovery_count=run.recovery_count,
            retry_depth=run.retry_depth,
        )
        task = task.with_job(job_id)
        self._commit(
            Change(
                leases=[LeaseWrite(lease)],
                jobs=[JobWrite(job)],
                tasks=[TaskWrite(task, expect_job_id=expect_job_id, create=create_task)],
                job_checks=job_checks or [],
                graph=list(run.graph),
                holds=list(run.holds),
            )
        )
        return task, lease
