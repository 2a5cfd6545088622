"""Pure lease constructions the use cases share: a job's next lease, and a row's next version."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tenure.domain.events import LEASE_CREATED
from tenure.domain.model import Job, Lease
from tenure.domain.states import REPORTABLE, LeaseState, ReportKind
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


# A worker's signal row (domain/signals.py says what it is for).
# The holder's own final reports: the worker that sends one knows its lease has ended.
_OWN_ENDINGS = frozenset({ReportKind.COMPLETE, ReportKind.FAIL})


@dataclass(frozen=True, order=True)
class SignalKey:
    """Whose signal row: the worker token that claimed the lease and the worker's id."""

    claimant: str
    worker_id: str


def holder(lease: Lease) -> SignalKey | None:
    """The worker holding `lease` as read, or None when no worker holds it."""
    if lease.state not in REPORTABLE or not lease.claimed_by or not lease.worker_id:
        return None
    return SignalKey(lease.claimed_by, lease.worker_id)


def must_signal(seen: Lease, new: Lease) -> SignalKey | None:
    """The signal row that writing `new` over `seen` must raise, or None.

    Raised when the lease was held and the write changes its state, its revoke, its fence, its
    holder or its lease_seconds (a job's own heartbeat that shortens its lease brings the
    deadline earlier than a signal knows), unless the write is the holder's own start or final
    complete / fail. A write that changes none of these (a renewal, a log stream's mark, a
    run-timeout mark) leaves the heartbeat's answer as it was, or moves its deadline later
    only, which a heartbeat answering from a signal meets as due the sooner."""
    key = holder(seen)
    if key is None:
        return None
    same = (
        new.state is seen.state
        and new.revoke == seen.revoke
        and new.fence == seen.fence
        and new.worker_id == seen.worker_id
        and new.claimed_by == seen.claimed_by
        and new.lease_seconds == seen.lease_seconds
    )
    if same:
        return None
    if seen.state is LeaseState.DISPATCHED and new.state is LeaseState.RUNNING:
        return None  # the holder's start (its claim's, its own call's or its first heartbeat's)
    if new.state.terminal and new.report_kind in _OWN_ENDINGS and seen.report_kind is None:
        return None
    return key
