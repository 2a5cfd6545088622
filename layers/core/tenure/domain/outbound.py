"""Outbound events: what the stack's EventBridge bus carries for lease and task transitions.

Which of them go out is a setting (`OutboundEvents`): `endings` (the default) publishes the end
of every lease and a task's endings (`task.completed`, `task.failed`, `task.cancelled`,
`task.needs_attention`); `all` every transition as well; `none` nothing.

The detail is built from the row, never from the timeline event's data (which holds the final
report): ids, space, pool, state and outcome only — no token, payload body or result. `id` is
the timeline event's id (`<row>.v<version>`), the same on every redelivery, so a consumer
de-duplicates on it."""

from __future__ import annotations

from typing import Any

from tenure.domain.events import (
    LEASE_CLAIMED,
    LEASE_STARTED,
    TASK_CANCELLED,
    TASK_COMPLETED,
    TASK_FAILED,
    TASK_NEEDS_ATTENTION,
)
from tenure.domain.model import Event, Lease, Task, TaskGraph
from tenure.domain.states import EndReason, LeaseState
from tenure.records import record

SOURCE = "tenure"


@record
class Outbound:
    detail_type: str  # the timeline event's type, e.g. lease.completed
    detail: dict[str, Any]


def lease_outbound(event: Event, lease: Lease) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "lease_id": lease.id,
            "task_id": lease.task_id,
            "task_key": lease.task_key,
            "job_id": lease.job_id,
            "space": lease.space,
            "pool": lease.pool,
            "state": lease.state.value,
            "outcome": lease.outcome,
            "end_reason": lease.end_reason.value if lease.end_reason else None,
            "fence": lease.fence,
            "attempt": lease.attempt,
            "worker_id": lease.worker_id,
        },
    )


def task_outbound(event: Event, task: Task) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "task_id": task.id,
            "task_key": task.key,
            "job_id": task.job_id,
            "space": task.space,
            "pool": task.pool,
            "parent_id": task.parent_id,
            "attention": task.attention,
            "paused": task.paused,
        },
    )


def graph_outbound(event: Event, graph: TaskGraph) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "task_id": graph.task_id,
            "children": graph.children_total,
        },
    )


def outbound_of(entity: str, row: Any, event: Event) -> Outbound:
    """The bus event of one timeline event derived from `row` (a lease, task or graph row)."""
    if entity == "lease":
        return lease_outbound(event, row)
    if entity == "task":
        return task_outbound(event, row)
    return graph_outbound(event, row)


# What the stack publishes (the template's OutboundEvents parameter): every transition, only
# endings, or nothing. EventBridge bills every entry, so the default keeps what integrations
# act on: a lease's end and a task's.
ALL = "all"
ENDINGS = "endings"
NONE = "none"
SETTINGS = (ENDINGS, ALL, NONE)

# A task's endings, as their own events: the status the task reached.
TASK_ENDINGS = (TASK_COMPLETED, TASK_FAILED, TASK_CANCELLED, TASK_NEEDS_ATTENTION)

# A lease ending that ends its task's run (no successor): the task's status, by the lease's.
_TASK_STATUS_OF = {
    LeaseState.FAILED: TASK_FAILED,
    LeaseState.LOST: TASK_FAILED,
    LeaseState.CANCELLED: TASK_CANCELLED,
    LeaseState.KILLED: TASK_CANCELLED,
}
# Endings that hand the task's run on (a successor lease) or leave its task row to tell it
# (recovery exhausted: needs_attention).
_HANDED_ON = (EndReason.RELEASED, EndReason.EXPIRED)


def setting_of(value: str | None) -> str:
    """The setting named by `value`; unset means the default, anything else is refused."""
    if value is None or value == "":
        return ENDINGS
    if value not in SETTINGS:
        raise ValueError(f"OutboundEvents must be one of {', '.join(SETTINGS)}, not {value!r}")
    return value


def ends_lease(old: Lease | None, new: Lease) -> bool:
    """Whether this row change is the lease's end (it reached completed, failed, cancelled,
    lost or killed, whichever event names it)."""
    return new.state.terminal and (old is None or not old.state.terminal)


def lease_publishes(setting: str, old: Lease | None, new: Lease, event: Event) -> bool:
    """Whether `event`, one of this lease row change's timeline events, goes on the bus."""
    if setting == ALL:
        return True
    if setting == NONE:
        return False
    # A write may stand for two transitions; only the one that ended the lease is its end.
    return ends_lease(old, new) and event.type != LEASE_CLAIMED and event.type != LEASE_STARTED


# The key of the event data the end of a lease whose filing died before its task carries
# (app/leases/orphans.py): that task was never filed, so its lease's end is no task's ending.
ORPHAN = "orphan"


def ends_orphan(lease: Lease) -> bool:
    """Whether this write is the end of a lease whose filing died before writing its task.
    Told by the ending write itself, not by the task-pending mark: a filed task's lease ended
    before any claim keeps its mark too, and its task's ending is announced."""
    return bool((lease.event_data or {}).get(ORPHAN))


def task_ending_of_lease(old: Lease | None, new: Lease) -> str | None:
    """The task ending a lease's end is, if any: a task's run that failed or was cancelled
    with no retry or successor to follow (and none for a lease whose task was never filed).
    A success is told by the task's graph row instead
    (`task_completed`): a parent with children outstanding has not completed yet; the success
    of a task nothing is linked to, which no graph row records, is told from its lease by the
    reactor (the record's `Context.told_by_lease`, set by tasks/graph.py `after_lease`)."""
    if new.task_id is None or not ends_lease(old, new) or new.end_reason in _HANDED_ON:
        return None
    if (new.event_data or {}).get("retry_scheduled") or ends_orphan(new):
        return None  # a retry follows, or there is no task to end
    if new.state is LeaseState.COMPLETED:
        return TASK_FAILED if new.outcome != "success" else None
    return _TASK_STATUS_OF.get(new.state)


def task_completed(old: TaskGraph | None, new: TaskGraph) -> bool:
    """Whether this graph row change is its task's completion: `succeeded_at` appears once
    the task's own run succeeded with no child outstanding, or its children rolled it up."""
    if new.success_copied:
        return False  # its lease's success, told from the lease before it was copied here
    return new.succeeded_at is not None and (old is None or old.succeeded_at is None)


def task_needs_attention(old: Task | None, new: Task) -> bool:
    """Whether this task row change parked the task in needs_attention."""
    return new.attention and (old is None or not old.attention)


def lease_task_ending(kind: str, event: Event, lease: Lease) -> Outbound:
    """A task's failure or cancellation, told from the lease that ended its run; or the
    success of a task nothing is linked to, with the id its graph row's would have had."""
    told = f"{lease.task_id}.succeeded.{lease.ended_at}" if kind == TASK_COMPLETED else None
    return Outbound(
        kind,
        {
            "id": told or f"{event.id}.{kind}",
            "type": kind,
            "at": event.at,
            "task_id": lease.task_id,
            "task_key": lease.task_key,
            "job_id": lease.job_id,
            "space": lease.space,
            "pool": lease.pool,
            "status": kind.removeprefix("task."),
            "lease_id": lease.id,
            "end_reason": lease.end_reason.value if lease.end_reason else None,
            "outcome": lease.outcome,
            "attempt": lease.attempt,
        },
    )


def task_ending(kind: str, event_id: str, at: int, task: Task) -> Outbound:
    """A task's completion or parking, told from its task or graph row."""
    return Outbound(
        kind,
        {
            "id": event_id,
            "type": kind,
            "at": at,
            "task_id": task.id,
            "task_key": task.key,
            "job_id": task.job_id,
            "space": task.space,
            "pool": task.pool,
            "status": kind.removeprefix("task."),
            "parent_id": task.parent_id,
        },
    )
