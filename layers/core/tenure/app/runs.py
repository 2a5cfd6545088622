"""The one path that opens a run of a task: a new job and its first pending lease, committed
with the task's pointer to the job, so a task never has two open runs."""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING

from tenure.app.ports import Change, GraphOp, HoldOp, JobWrite, LeaseWrite, TaskWrite
from tenure.domain.errors import InvalidTransition, ValidationFailed
from tenure.domain.events import LEASE_CREATED, LEASE_RETRIED
from tenure.domain.model import (
    DEFAULT_PRIORITY,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Job,
    Lease,
    Pool,
    Task,
    first_job_id,
    implied_job,
)
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.timeline import CREATED_STAMP, first_lease_id, first_lease_stamps
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


@record
class RunControls:
    """The scheduling controls a filing or an enqueue names: claim priority (0-9, higher
    first; None is the default), a queue timeout and a run timeout, in whole seconds (>= 1;
    None: none)."""

    priority: int | None = None
    expires_in_seconds: int | None = None
    max_run_seconds: int | None = None

    def __post_init__(self) -> None:
        _whole("max_run_seconds", self.max_run_seconds, "a whole number of seconds, at least 1")
        _whole(
            "expires_in_seconds",
            self.expires_in_seconds,
            "a whole number of seconds, at least 1",
        )
        _whole(
            "priority",
            self.priority,
            f"an integer from {MIN_PRIORITY} to {MAX_PRIORITY}",
            low=MIN_PRIORITY,
            high=MAX_PRIORITY,
        )


def _whole(name: str, value: object, what: str, low: int = 1, high: int | None = None) -> None:
    """ValidationFailed naming `name` unless `value` is None or an int (not a bool) within
    [low, high]."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        raise ValidationFailed(f"{name} must be {what}", field=name)


@record
class RunStart:
    """How a new run starts: a first run (attempt 1), or an operator's retry of an ended lease
    (attempt + 1, `previous_lease_id`, `retry_depth` + 1), with the graph writes that must land
    in the same transaction (e.g. auto-enqueue's mark)."""

    attempt: int = 1
    recovery_count: int = 0
    retry_depth: int = 0
    previous_lease_id: str | None = None
    graph: tuple[GraphOp, ...] = field(default_factory=tuple)
    holds: tuple[HoldOp, ...] = field(default_factory=tuple)
    # Scheduling controls for this run; None takes the task's own (what it was filed with).
    priority: int | None = None
    expires_in_seconds: int | None = None
    max_run_seconds: int | None = None
    # What the new lease's timeline entry is called when it follows a previous lease, and
    # what it adds to the entry's data.
    follows_as: str = LEASE_RETRIED
    follows_data: dict[str, object] = field(default_factory=dict)


class Runs:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def open_run(
        self,
        task: Task,
        pool: Pool,
        create_task: bool,
        expect_job_id: str | None,
        job_checks: list[tuple[str, str]] | None = None,
        not_before: int | None = None,
        run: RunStart | None = None,
    ) -> tuple[Task, Lease]:
        task, lease, change = self.run_change(
            task, pool, create_task, expect_job_id, job_checks, not_before, run
        )
        self.kernel.commit(change)
        return task, lease

    def run_change(
        self,
        task: Task,
        pool: Pool,
        create_task: bool,
        expect_job_id: str | None,
        job_checks: list[tuple[str, str]] | None = None,
        not_before: int | None = None,
        run: RunStart | None = None,
    ) -> tuple[Task, Lease, Change]:
        """The run as one change, not yet committed (a caller may add it to its own)."""
        if task.cancelled is not None:
            raise InvalidTransition(f"task {task.key} is cancelled; it opens no run")
        if run is None:
            run = RunStart()
        now = self.kernel.clock.now_ms()
        job_id = self.kernel.ids.new_id("job")
        expires_in = (
            run.expires_in_seconds
            if run.expires_in_seconds is not None
            else task.expires_in_seconds
        )
        lease = Lease(
            event_type=LEASE_CREATED,
            tl=self.kernel.gates.first_stamps(SubjectKind.TASK),
            event_data={"pool": pool.name},
            updated_at=now,
            id=self.kernel.ids.new_id("lease"),
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
            concurrency_key=task.concurrency_key,
            priority=stored_priority(run.priority if run.priority is not None else task.priority),
            queue_expires_at=queue_expiry(now, not_before, expires_in),
            expires_in_seconds=expires_in,
            max_run_seconds=(
                run.max_run_seconds if run.max_run_seconds is not None else task.max_run_seconds
            ),
        )
        if create_task and run.previous_lease_id is None and lease.tl is not None:
            lease = self._first_of_task(lease)
            lease = self._listed_by_task(task, lease)
        if run.previous_lease_id is not None:
            lease = replace(
                lease,
                event_type=run.follows_as,
                event_data={
                    "pool": pool.name,
                    "previous_lease_id": run.previous_lease_id,
                    **run.follows_data,
                },
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
        jobs = [JobWrite(job, ahead=True)]  # a fresh id: nothing names it until this commits
        implied = replace(job, id=first_job_id(task.id))
        if (
            lease.id == first_lease_id(task.id)
            and self.kernel.gates.first_jobs_implied()
            and implied_job(task, replace(lease, job_id=implied.id)) == implied
        ):
            # The task's first job, all of which its first lease and the task say: no row
            # (and no write unit) until it moves on (domain/model.py first_job_id).
            job, jobs = implied, []
            lease = replace(lease, job_id=job.id)
        task = task.with_job(job.id)
        change = Change(
            leases=[LeaseWrite(lease)],
            jobs=jobs,
            tasks=[TaskWrite(task, expect_job_id=expect_job_id, create=create_task)],
            job_checks=job_checks or [],
            graph=list(run.graph),
            holds=list(run.holds),
        )
        return task, lease, change

    def _first_of_task(self, lease: Lease) -> Lease:
        """The task's first lease, made with it: its id derived from the task's and its
        creation a stamp, so it needs no anchor row for a timeline read to find it."""
        if not self.kernel.gates.first_lease_stamped() or lease.task_id is None:
            return lease
        first = replace(lease, id=first_lease_id(lease.task_id))
        if not first_lease_stamps(lease.task_id, first.id, first.pool, first.event_data or {}):
            return lease
        return replace(first, tl={**(lease.tl or {}), CREATED_STAMP: first.version})

    def _listed_by_task(self, task: Task, lease: Lease) -> Lease:
        """The task's first lease, made with it, listed through its task's list entry: it
        takes the task's creation time, so that entry's place in the list is the lease's
        own (store.reads.list_leases), and it gets no list entry of its own."""
        if (
            lease.id != first_lease_id(task.id)
            or not self.kernel.gates.first_leases_listed_by_task()
        ):
            return lease
        return replace(lease, created_at=task.created_at, via_task=True)


def stored_priority(priority: int | None) -> int | None:
    """What a lease stores: nothing for the default priority (its row stays as it was)."""
    return None if priority is None or priority == DEFAULT_PRIORITY else priority


def queue_expiry(now: int, not_before: int | None, seconds: int | None) -> int | None:
    """When a pending lease filed now stops waiting: `seconds` after it becomes claimable (a
    deferred lease's wait starts at its not-before)."""
    if seconds is None:
        return None
    return max(now, not_before or 0) + 1000 * seconds
