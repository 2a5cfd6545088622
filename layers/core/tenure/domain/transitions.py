"""The lease state machine as data (docs/states.md): the only place a lease's state changes,
and the rows a move writes (the lease's next version, a job's next lease)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from tenure.domain.errors import InvalidTransition
from tenure.domain.events import (
    LEASE_CANCELLED,
    LEASE_CANCELLING,
    LEASE_CLAIMED,
    LEASE_COMPLETED,
    LEASE_CREATED,
    LEASE_FAILED,
    LEASE_FORCE_FAILED,
    LEASE_FORCE_RELEASED,
    LEASE_KILLED,
    LEASE_KILLING,
    LEASE_LOST,
    LEASE_PARENT_STOPPED,
    LEASE_PAUSED,
    LEASE_QUEUE_TIMED_OUT,
    LEASE_RELEASED,
    LEASE_RESUMED,
    LEASE_STARTED,
    LEASE_TIMING_OUT,
    LEASE_TTL_EXPIRED,
)
from tenure.domain.model import Job, Lease
from tenure.domain.states import REPORTABLE, EndReason, LeaseState, ReportKind, Revoke
from tenure.domain.timeline import with_stamp
from tenure.records import record


class Action(StrEnum):
    """What can happen to a lease: a worker's report, an operator's act, the sweeper's verdict."""

    CLAIM = "claim"
    START = "start"
    HEARTBEAT = "heartbeat"
    COMPLETE = "complete"  # outcome success
    COMPLETE_FAILURE = "complete_failure"  # complete with outcome failure
    FAIL = "fail"
    RELEASE = "release"
    EXPIRE = "expire"  # silent past toleration, pool on_expiry requeue
    EXPIRE_FAIL = "expire_fail"  # silent past toleration, pool on_expiry fail
    CANCEL = "cancel"
    KILL = "kill"
    PAUSE = "pause"
    RESUME = "resume"
    FORCE_RELEASE = "force_release"  # an operator takes a held lease from its holder
    FORCE_FAIL = "force_fail"  # an operator ends a lease as failed, operator_forced
    TTL_EXPIRE = "ttl_expire"  # a delegated child's ttl passed (the sweeper)
    PARENT_STOP = "parent_stop"  # a delegated child's creator lease ended cancelled/killed/lost
    QUEUE_TIMEOUT = "queue_timeout"  # a pending lease not claimed before its expiry (the sweeper)
    TIME_OUT = "time_out"  # a held lease ran past its max_run_seconds (the sweeper)


class Stage(StrEnum):
    """A lease's state, with `cancelling` split by what the operator asked for (the report or
    the silence that ends it ends it `cancelled` or `killed`)."""

    PENDING = "pending"
    DISPATCHING = "dispatching"
    DISPATCHED = "dispatched"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLING = "cancelling"
    KILLING = "killing"  # cancelling, with revoke "kill"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"
    KILLED = "killed"


def stage_of(state: LeaseState, revoke: Revoke | None) -> Stage:
    if state is LeaseState.CANCELLING and revoke is Revoke.KILL:
        return Stage.KILLING
    return Stage(state.value)


@record
class Move:
    """Where an action takes a lease: its next state and revoke, the timeline event it records,
    its end reason when it ends, and whether its job gets a new pending lease (fence + 1)."""

    to: LeaseState
    event: str
    revoke: Revoke | None = None
    end_reason: EndReason | None = None
    requeue: bool = False


# Marks a (stage, action) pair that changes nothing and answers the lease as it is.
NOOP = None

_STARTED = Move(LeaseState.RUNNING, LEASE_STARTED)
_COMPLETED = Move(LeaseState.COMPLETED, LEASE_COMPLETED, end_reason=EndReason.COMPLETED)
_FAILED = Move(LeaseState.FAILED, LEASE_FAILED, end_reason=EndReason.FAILED)
_RELEASED = Move(LeaseState.CANCELLED, LEASE_RELEASED, end_reason=EndReason.RELEASED, requeue=True)
_EXPIRED = Move(LeaseState.LOST, LEASE_LOST, end_reason=EndReason.EXPIRED, requeue=True)
_WORKER_LOST = Move(LeaseState.LOST, LEASE_LOST, end_reason=EndReason.WORKER_LOST)
_CANCELLED = Move(LeaseState.CANCELLED, LEASE_CANCELLED, end_reason=EndReason.CANCELLED)
_KILLED = Move(LeaseState.KILLED, LEASE_KILLED, end_reason=EndReason.KILLED)
_TO_CANCELLING = Move(LeaseState.CANCELLING, LEASE_CANCELLING, revoke=Revoke.CANCEL)
_TO_KILLING = Move(LeaseState.CANCELLING, LEASE_KILLING, revoke=Revoke.KILL)

# Every report that ends a held lease, and the sweeper's verdict on a silent one.
_ENDINGS_HELD = {
    Action.COMPLETE: _COMPLETED,
    Action.COMPLETE_FAILURE: _FAILED,
    Action.FAIL: _FAILED,
    Action.RELEASE: _RELEASED,
    Action.EXPIRE: _EXPIRED,
    Action.EXPIRE_FAIL: _WORKER_LOST,
    Action.CANCEL: _TO_CANCELLING,
    Action.KILL: _TO_KILLING,
}
# A lease asked to stop ends the way the operator asked, whatever the worker reports.
_ENDS_AS = {Stage.CANCELLING: _CANCELLED, Stage.KILLING: _KILLED}
_REPORTS = (
    Action.COMPLETE,
    Action.COMPLETE_FAILURE,
    Action.FAIL,
    Action.RELEASE,
    Action.EXPIRE,
    Action.EXPIRE_FAIL,
)

# (stage, action) -> Move, or NOOP; a pair that is absent is a forbidden transition.
TABLE: dict[tuple[Stage, Action], Move | None] = {
    # Not yet held: a claim takes it; cancel and kill end it at once (nobody holds it).
    (Stage.PENDING, Action.CLAIM): Move(LeaseState.DISPATCHED, LEASE_CLAIMED),
    (Stage.PENDING, Action.CANCEL): _CANCELLED,
    (Stage.PENDING, Action.KILL): _CANCELLED,
    (Stage.DISPATCHING, Action.CLAIM): Move(LeaseState.DISPATCHED, LEASE_CLAIMED),
    (Stage.DISPATCHING, Action.CANCEL): _CANCELLED,
    (Stage.DISPATCHING, Action.KILL): _CANCELLED,
    # Held: the first heartbeat or an explicit start makes it running.
    (Stage.DISPATCHED, Action.START): _STARTED,
    (Stage.DISPATCHED, Action.HEARTBEAT): _STARTED,
    **{(Stage.DISPATCHED, a): m for a, m in _ENDINGS_HELD.items()},
    (Stage.RUNNING, Action.START): NOOP,
    (Stage.RUNNING, Action.HEARTBEAT): NOOP,
    (Stage.RUNNING, Action.PAUSE): Move(LeaseState.PAUSED, LEASE_PAUSED, revoke=Revoke.PAUSE),
    (Stage.RUNNING, Action.RESUME): NOOP,
    **{(Stage.RUNNING, a): m for a, m in _ENDINGS_HELD.items()},
    (Stage.PAUSED, Action.START): NOOP,
    (Stage.PAUSED, Action.HEARTBEAT): NOOP,
    (Stage.PAUSED, Action.PAUSE): NOOP,
    (Stage.PAUSED, Action.RESUME): Move(LeaseState.RUNNING, LEASE_RESUMED),
    **{(Stage.PAUSED, a): m for a, m in _ENDINGS_HELD.items()},
    # Asked to stop: the worker still heartbeats (and hears the revoke) until it reports.
    **{
        (stage, a): _ENDS_AS[stage] for stage in (Stage.CANCELLING, Stage.KILLING) for a in _REPORTS
    },
    (Stage.CANCELLING, Action.START): NOOP,
    (Stage.CANCELLING, Action.HEARTBEAT): NOOP,
    (Stage.CANCELLING, Action.CANCEL): NOOP,
    (Stage.CANCELLING, Action.KILL): _TO_KILLING,
    (Stage.KILLING, Action.START): NOOP,
    (Stage.KILLING, Action.HEARTBEAT): NOOP,
    (Stage.KILLING, Action.CANCEL): NOOP,
    (Stage.KILLING, Action.KILL): NOOP,
    # Ended: cancelling or killing an ended lease is a no-op; nothing else applies.
    **{
        (stage, a): NOOP
        for stage in (
            Stage.COMPLETED,
            Stage.FAILED,
            Stage.CANCELLED,
            Stage.LOST,
            Stage.KILLED,
        )
        for a in (Action.CANCEL, Action.KILL)
    },
}


# Operator recovery (bulk force). Force release takes a held lease from its holder like the
# holder's own release (the job is requeued under fence + 1, no attempt used); a lease already
# asked to stop is not handed on. Force fail ends any open lease as failed.
_FORCE_RELEASED = Move(
    LeaseState.CANCELLED, LEASE_FORCE_RELEASED, end_reason=EndReason.RELEASED, requeue=True
)
_FORCE_FAILED = Move(LeaseState.FAILED, LEASE_FORCE_FAILED, end_reason=EndReason.FAILED)
TABLE.update(
    {
        **{
            (stage, Action.FORCE_RELEASE): _FORCE_RELEASED
            for stage in (Stage.DISPATCHED, Stage.RUNNING, Stage.PAUSED)
        },
        **{
            (stage, Action.FORCE_FAIL): _FORCE_FAILED
            for stage in (
                Stage.PENDING,
                Stage.DISPATCHING,
                Stage.DISPATCHED,
                Stage.RUNNING,
                Stage.PAUSED,
                Stage.CANCELLING,
                Stage.KILLING,
            )
        },
    }
)

# A delegated child's open run is ended, not handed on, when its ttl passes or its creator
# lease is stopped or lost: nobody is left to want its result.
_OPEN = (
    Stage.PENDING,
    Stage.DISPATCHING,
    Stage.DISPATCHED,
    Stage.RUNNING,
    Stage.PAUSED,
    Stage.CANCELLING,
    Stage.KILLING,
)
_TTL_EXPIRED = Move(LeaseState.CANCELLED, LEASE_TTL_EXPIRED, end_reason=EndReason.TTL_EXPIRED)
_PARENT_STOPPED = Move(
    LeaseState.CANCELLED, LEASE_PARENT_STOPPED, end_reason=EndReason.PARENT_STOPPED
)
TABLE.update(
    {
        **{(stage, Action.TTL_EXPIRE): _TTL_EXPIRED for stage in _OPEN},
        **{(stage, Action.PARENT_STOP): _PARENT_STOPPED for stage in _OPEN},
    }
)

# A pending lease nobody claimed before its queue expiry ends cancelled, no successor: whoever
# filed it said it is worth nothing later. Only a queued lease times out this way.
_QUEUE_TIMED_OUT = Move(
    LeaseState.CANCELLED, LEASE_QUEUE_TIMED_OUT, end_reason=EndReason.QUEUE_TIMEOUT
)
TABLE.update({(stage, Action.QUEUE_TIMEOUT): _QUEUE_TIMED_OUT for stage in _OPEN[:2]})

# A held lease past its run timeout is asked to stop the way a kill asks (its holder hears
# revoke "kill"); it ends killed, with end_reason timed_out (Kernel.apply), when its worker
# reports or its toleration passes. One asked to kill already is left as it is.
_TIMING_OUT = Move(LeaseState.CANCELLING, LEASE_TIMING_OUT, revoke=Revoke.KILL)
TABLE.update(
    {
        **{
            (stage, Action.TIME_OUT): _TIMING_OUT
            for stage in (Stage.DISPATCHED, Stage.RUNNING, Stage.PAUSED, Stage.CANCELLING)
        },
        (Stage.KILLING, Action.TIME_OUT): None,
    }
)


def move(lease_id: str, state: LeaseState, revoke: Revoke | None, action: Action) -> Move | None:
    """The move `action` makes from (state, revoke); None for a no-op.

    Raises InvalidTransition for a pair the table does not list (a move the lease's state
    does not allow)."""
    key = (stage_of(state, revoke), action)
    if key not in TABLE:
        raise InvalidTransition(f"lease {lease_id} is {state}; it cannot {_verb(action)}")
    return TABLE[key]


def must_move(lease_id: str, state: LeaseState, revoke: Revoke | None, action: Action) -> Move:
    """The move of a pair that always changes something (a claim of a pending lease, a final
    report or an expiry of a held one); a no-op there would be a bug in the caller."""
    to = move(lease_id, state, revoke, action)
    if to is None:
        raise InvalidTransition(f"lease {lease_id} is {state}; {action.value} changes nothing")
    return to


def _verb(action: Action) -> str:
    return {
        Action.COMPLETE_FAILURE: "complete",
        Action.EXPIRE: "expire",
        Action.EXPIRE_FAIL: "expire",
    }.get(action, action.value)


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


# A worker's signal row (domain/signals.py says what it is for): which lease writes raise it.
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
