"""Pure lease constructions the use cases share: a job's next lease, and a row's next version."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tenure.domain.events import LEASE_CREATED
from tenure.domain.model import Job, Lease
from tenure.domain.states import LeaseState
from tenure.domain.timeline import with_stamp


def successor_of(
    lease: Lease,
    job: Job,
    now: int,
    new_id: str,
    recovered: bool,
    stamps: dict[str, Any] | None,
) -> tuple[Lease, Job]:
    """The job's next pending lease after `lease` (under fence + 1, same attempt), and the job
    pointing at it. `job` is the lease's, at the lease's fence; `stamps` the new lease's first
    timeline stamps (None while the table's schema keeps every event a row of its own)."""
    successor = Lease(
        event_type=LEASE_CREATED,
        tl=stamps,
        event_data={"previous_lease_id": lease.id, "recovered": recovered},
        updated_at=now,
        id=new_id,
        job_id=job.id,
        space=lease.space,
        pool=lease.pool,
        subject_kind=lease.subject_kind,
        subject_id=lease.subject_id,
        task_id=lease.task_id,
        task_key=lease.task_key,
        workflow=lease.workflow,
        state=LeaseState.PENDING,
        fence=job.fence + 1,
        attempt=job.attempt,
        created_at=now,
        pool_version=lease.pool_version,  # the job keeps the version it was created under
        lineage=lease.lineage,
        previous_lease_id=lease.id,  # what its lease.created event names, on the row too
        retry_depth=lease.retry_depth,
        concurrency_key=lease.concurrency_key,
        priority=lease.priority,  # the job keeps its place in line
        max_run_seconds=lease.max_run_seconds,  # what its run asked for
        # Pending again: it waits at most its run's queue timeout, from now.
        expires_in_seconds=lease.expires_in_seconds,
        queue_expires_at=(
            now + 1000 * lease.expires_in_seconds if lease.expires_in_seconds is not None else None
        ),
    )
    next_job = replace(
        job,
        fence=successor.fence,
        lease_id=successor.id,
        recovery_count=job.recovery_count + (1 if recovered else 0),
    )
    return successor, next_job


def moved(old: Lease, new: Lease, event_type: str, data: dict[str, Any], now: int) -> Lease:
    """Mark `new` as the next version of `old`, naming the transition for the timeline (and
    stamping it when the row itself tells it: domain/timeline.py)."""
    marked = replace(
        new,
        version=old.version + 1,
        event_type=event_type,
        event_data=data,
        updated_at=now,
        # An ended lease leaves the sweeper's index: the row drops due_at, so does the answer.
        due_at=None if new.state.terminal else new.due_at,
    )
    return with_stamp(old, marked)
