"""Wake-creator: a delegated task's endings wake the lease that filed it.

From the table's stream (triggers/stream.py plays each changed row through the reactions
table compose() builds in tenure.py: `on_lease` for a lease row, `on_task` for a task row), a
child task filed with a lease token (`created_by_lease`, `wake_creator` on) that reaches a
terminal status (its run completed, failed, cancelled, killed or lost as worker_lost),
`blocked` (a block placed) or `needs_attention` (escalated or exhausted) publishes one
EventBridge event (`source: "tenure"`, `detail-type: "task.wake_creator"`) and records
`task.wake_creator` on the creator lease's subject timeline. A parent (a task with children)
is completed when its graph row's `succeeded_at` appears (`on_graph`: its own success with no
child outstanding, or its children's rollup), never when its own run alone succeeds.

At most once per transition: the timeline event's id and instant are derived from the row
version that made the transition, and it is written first, conditionally (a new id only); a
redelivered stream record loses that write and publishes nothing. The price is that a publish
the bus does not take, after the publisher's own bounded tries (store/events.py), is not sent
again: logged as an error naming the creator and the child, counted (`wake_publish_failed`,
the reactor's `WakesUnpublished`), never published twice. No wake when the creator lease has
ended, or when the transition was made by the creator lease itself (its own block of the
child). The detail names ids only, never a token. A second block on a task already blocked
is no transition and wakes nobody.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tenure.app.autonomy import blocks
from tenure.app.ports import EventPublisher
from tenure.app.rows import GraphRows, LeaseRows, TaskRows, TimelineRows
from tenure.domain.errors import Conflict
from tenure.domain.events import (
    TASK_BLOCKED,
    TASK_ESCALATED,
    TASK_RUN_LEASE_RECOVERY_EXHAUSTED,
    TASK_RUN_RELEASED,
    TASK_STARVATION_ESCALATED,
    TASK_WAKE_CREATOR,
)
from tenure.domain.model import Event, Task
from tenure.domain.outbound import ends_orphan
from tenure.domain.states import EndReason, LeaseState

_log = logging.getLogger(__name__)
# The service's count of wakes the bus never took (the reactor publishes it as a metric).
WAKE_PUBLISH_FAILED = "wake_publish_failed"

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.domain.events import GraphMoved, LeaseEnded, TaskMoved

WAKE_SOURCE = "tenure"
# Task-row transitions that wake: the event each row names → the child's new status.
_TASK_WAKES = {
    TASK_BLOCKED: "blocked",
    TASK_RUN_RELEASED: "blocked",
    TASK_ESCALATED: "needs_attention",
    TASK_STARVATION_ESCALATED: "needs_attention",
    TASK_RUN_LEASE_RECOVERY_EXHAUSTED: "needs_attention",
}
_TERMINAL = {
    LeaseState.COMPLETED: "completed",
    LeaseState.FAILED: "failed",
    LeaseState.CANCELLED: "cancelled",
    LeaseState.KILLED: "cancelled",
    # Only a lost lease that is not requeued (pool on_expiry fail) reaches here: its run failed.
    LeaseState.LOST: "failed",
}
# Endings that hand the job on (a successor lease) or leave the task row to tell it (exhausted).
_HANDED_ON = (EndReason.RELEASED, EndReason.EXPIRED)


class Wake:
    """Two stream reactions: a child's lease ending and a child's task row moving to blocked
    or needs_attention wake the creator. `publisher` is the bus (None: recorded only)."""

    def __init__(
        self,
        kernel: Kernel,
        publisher: EventPublisher | None = None,
        *,
        graph: GraphRows,
        leases: LeaseRows,
        tasks: TaskRows,
        timeline: TimelineRows,
    ) -> None:
        self.kernel = kernel
        self.graph = graph
        self.leases = leases
        self.tasks = tasks
        self.timeline = timeline
        self.publisher = publisher

    def on_lease(self, event: LeaseEnded, context: Context) -> None:
        new = event.lease
        if new.task_id is None:
            return
        if new.end_reason in _HANDED_ON:
            return  # handed on (a new pending lease), or exhausted: the task row says so
        if ends_orphan(new):
            return  # its filing died before its task: no task ended, nobody to wake
        status = _TERMINAL.get(new.state)
        if status == "completed" and new.outcome != "success":
            status = "failed"
        if status is None:
            return
        child = context.task_as_filed(new.task_id)
        if child is None or not child.wake_creator or child.created_by_lease is None:
            return  # nobody to wake (judged before the graph row is read: most tasks)
        graph = self.graph.get_graph(child.id) if status == "completed" else None
        if graph is not None and graph.children_total and not graph.success_copied:
            return  # a parent: its success is told when its graph row says it (on_graph)
        by_lease = (new.event_data or {}).get("by_lease")  # a force operation by a lease token
        transition = f"{new.id}.v{new.version:06d}"
        # Whether the child's run goes on: an ending that hands the job a successor (a retry
        # the service schedules) is not final; every other terminal ending is.
        final = not (new.event_data or {}).get("retry_scheduled")
        self._wake(child, status, transition, new.updated_at, by_lease, new.id, final=final)

    def on_graph(self, event: GraphMoved, context: Context) -> None:
        """A parent's real completion: `succeeded_at` appearing on its graph row (its own
        success with no child outstanding, or the rollup of its children). A leaf's success
        is told by its lease (on_lease); a parent's own run succeeding early tells nothing."""
        old, new = event.before, event.row
        if new.succeeded_at is None or new.children_total == 0 or new.success_copied:
            return  # a copied success was its lease's: on_lease told it
        if old is not None and old.succeeded_at is not None:
            return
        parent = self.tasks.get_task(new.task_id)
        if parent is None:
            return
        transition = f"{parent.id}.succeeded.{new.succeeded_at}"
        self._wake(parent, "completed", transition, new.succeeded_at, None, None, final=True)

    def on_task(self, event: TaskMoved, context: Context) -> None:
        old, new = event.before, event.task
        if new.event_type not in _TASK_WAKES:
            return
        already = old is not None and old.blocks and blocks.open_blocks(old, new.updated_at or 0)
        if new.event_type == TASK_BLOCKED and already:
            return  # a second block on a task already blocked: no transition to tell
        data = new.event_data or {}
        by_lease = data.get("by_lease")
        self._wake(
            new,
            _TASK_WAKES[new.event_type],
            f"{new.id}.v{new.version:06d}",
            new.updated_at,
            by_lease,
            None,
        )

    def _wake(
        self,
        child: Task,
        status: str,
        transition: str,
        at: int | None,
        by_lease: str | None,
        child_lease_id: str | None,
        final: bool | None = None,
    ) -> bool:
        if not child.wake_creator or child.created_by_lease is None:
            return False
        if by_lease is not None and by_lease == child.created_by_lease:
            return False  # the creator did this itself: nothing to tell it
        creator = self.leases.get_lease(child.created_by_lease)
        if creator is None or creator.state.terminal:
            return False  # nobody is left to wake
        detail = {
            "child_task_id": child.id,
            "child_task_key": child.key,
            "child_status": status,
            "child_lease_id": child_lease_id,
            "creator_lease_id": creator.id,
            "creator_task_id": creator.task_id,
            "space": child.space,
            "transition": transition,
            # On a terminal status: whether the run is over (true) or will be retried.
            **({"final": final} if final is not None else {}),
        }
        event = Event(
            id=f"wake.{transition}",
            subject_kind=creator.subject_kind,
            subject_id=creator.subject_id,
            type=TASK_WAKE_CREATOR,
            at=at or self.kernel.clock.now_ms(),
            lease_id=creator.id,
            fence=creator.fence,
            data=detail,
        )
        try:
            self.timeline.put_event(event)
        except Conflict:
            return False  # this transition already woke it (a redelivered record)
        if self.publisher is None:
            self.kernel.counters["wake_unpublished"] += 1
            return True
        try:
            self.publisher.publish(WAKE_SOURCE, TASK_WAKE_CREATOR, detail)
        except Exception as err:  # the timeline has it; a second publish would break at-most-once
            self.kernel.counters[WAKE_PUBLISH_FAILED] += 1
            _log.error(
                "the wake of creator lease %s for task %s (%s) was not published and will "
                "not be sent again: %s",
                creator.id,
                child.id,
                transition,
                err,
            )
            raise
        self.kernel.counters["wakes_published"] += 1
        return True
