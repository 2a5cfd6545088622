"""A task's status, derived on every read from its row, its newest lease and its graph row
(never stored), and whether a subtree cancel above it is still walking down."""

from __future__ import annotations

from tenure.app.ports import SchedulerState
from tenure.domain.model import Lease, Task, TaskGraph, TaskStatus, task_status
from tenure.domain.states import LeaseState

TERMINAL_TASK = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
_HELD = frozenset(
    {LeaseState.DISPATCHED, LeaseState.RUNNING, LeaseState.PAUSED, LeaseState.CANCELLING}
)


def derive_status(task: Task, lease: Lease | None, graph: TaskGraph, blocked: bool) -> TaskStatus:
    """A task's status, derived on every read. needs_attention first; a held run is running
    (or queued while it is only dispatched); a queued run, or none, that something blocks is
    blocked; a success (its own, or its children's rollup) is completed unless a newer run was
    opened; otherwise the run's own ending. A parent whose own run succeeded with children
    outstanding stays running."""
    if task.cancelled is not None:
        return TaskStatus.CANCELLED
    if task.attention:
        return TaskStatus.NEEDS_ATTENTION
    if lease is not None and lease.state in _HELD:
        return task_status(task, lease)
    if blocked and (lease is None or lease.state.active):
        return TaskStatus.BLOCKED
    if lease is not None and lease.state.active:
        return task_status(task, lease)
    if graph.succeeded_at is not None:
        return TaskStatus.COMPLETED
    if lease is not None and lease.state is LeaseState.COMPLETED and graph.children_outstanding:
        return TaskStatus.RUNNING
    return task_status(task, lease)


def cancelled_above(task: Task, gate: SchedulerState) -> str | None:
    """The nearest ancestor whose subtree cancel is still walking down (the scheduler row's
    `cancelled` set), or None: such a task is cancelled before the walk reaches it."""
    if not gate.cancelled or task.cancelled is not None:
        return None
    return next((x for x in reversed(task.ancestors or ()) if x in gate.cancelled), None)
