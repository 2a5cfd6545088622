"""Approval: a task filed with `requires_approval` (or delegated into a pool that does not
accept its filer's pool) waits, blocked, for a member to approve or reject it.

The request lives on the task's own row (`Task.approval`), so approving and rejecting are each
one conditional write of that row (on its version). A waiting task gets no run: filing opens
none, an enqueue is refused and auto-enqueue skips it (`skips`), and the claim gate holds any
lease of it it meets (`holds`). Approval is a cleared cause: an opted-in task, or one filed
with a pool, gets its one pending lease through the graph's at-most-one-open-run path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app.ports import Change, SchedulerState, TaskWrite
from tenure.app.rows import TaskRows
from tenure.domain import authz, fencing
from tenure.domain.errors import Conflict, InvalidTransition, Unavailable
from tenure.domain.events import TASK_DECIDED
from tenure.domain.model import Pool, Principal, Task
from tenure.domain.tasks import next_version

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.operator import Operator
    from tenure.app.tasks.filing import Placing, TaskLinks, TaskView
    from tenure.app.tasks.graph import Graph

# A decision loses its condition only to another write of the same task row; past this many
# tries the caller hears 503 with Retry-After.
DECISION_TRIES = 6


def approval_reasons(task: Task, now: int) -> list[dict[str, Any]]:
    """A read's `blocked_reasons` entry while the task waits for approval."""
    if not task.awaiting_approval or task.approval is None:
        return []
    return [
        {"source": "approval", "requested_at": fencing.iso_ms(int(task.approval["requested_at"]))}
    ]


def awaits_approval(task: Task, now: int) -> bool:
    """Auto-enqueue waits while approval is pending: approving enqueues."""
    return task.awaiting_approval


def held_for_approval(tasks: TaskRows) -> Callable[[tuple[str, ...], SchedulerState], bool]:
    """The claim gate's approval hold. A waiting task has no run to claim (none is opened for
    it), so this only meets a lease of a task the scheduler row already names as held back
    (`blocked`), and then reads the task row (one item) for the truth."""

    def held(chain: tuple[str, ...], gate: SchedulerState) -> bool:
        if not chain or chain[0] not in gate.blocked:
            return False
        task = tasks.get_task(chain[0])
        return task is not None and task.awaiting_approval

    return held


class Approval:
    """The filing stage that asks for approval, and approve / reject."""

    def __init__(self, kernel: Kernel, graph: Graph, operator: Operator) -> None:
        self.kernel = kernel
        self.graph = graph
        self.operator = operator

    # ------------------------------------------------------------------ filing

    def ask(self, placing: Placing) -> Placing:
        """Filing's first link: a task that asks for approval, or that a lease delegates into
        a pool that does not accept the lease's pool, waits for a person and is not enqueued
        at once (the pool it was filed for is kept: approval enqueues it there)."""
        links, pool = placing.links, placing.pool
        if not (links.requires_approval or self._delegated_across(links, pool)):
            return placing
        request: dict[str, Any] = {"state": "requested", "requested_at": self.kernel.clock.now_ms()}
        if pool is not None:
            request["pool"] = pool.name
        return replace(placing, task=replace(placing.task, approval=request), enqueue=False)

    def _delegated_across(self, links: TaskLinks, pool: Pool | None) -> bool:
        if links.creator_lease is None or pool is None:
            return False
        creator = self.kernel.lease(links.creator_lease)
        return pool.name != creator.pool and creator.pool not in pool.accepts_delegation_from

    # --------------------------------------------------------------- deciding

    def approve(self, actor: Principal, task_id: str, note: str | None) -> TaskView:
        self._decide(actor, task_id, "approved", note)
        task = self.kernel.task(task_id)
        pool = (task.approval or {}).get("pool")
        # A cleared cause: the one pending lease, if the task opted in or was filed for a pool.
        self.graph.auto_enqueue(task.id, pool=None if task.auto_enqueue_on_ready else pool)
        return self.graph.get_task(actor, task_id)

    def reject(self, actor: Principal, task_id: str, note: str) -> TaskView:
        task = self._decide(actor, task_id, "rejected", note)
        current = self.kernel.newest_lease(task)
        if current is not None and current.state.active:
            self.operator.cancel(actor, current.id)
        return self.graph.get_task(actor, task_id)

    def _decide(self, actor: Principal, task_id: str, state: str, note: str | None) -> Task:
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "member", task.space)
        fencing.refuse_token_fields({"note": note})
        verb = "approve" if state == "approved" else "reject"
        for _ in range(DECISION_TRIES):
            if not task.awaiting_approval or task.approval is None:
                raise InvalidTransition(f"task {task.key} is not awaiting approval; cannot {verb}")
            now = self.kernel.clock.now_ms()
            decided = {**task.approval, "state": state, "by": actor.token_id, "at": now}
            if note is not None:
                decided["note"] = note
            new = next_version(
                task,
                TASK_DECIDED[state],
                {"by": actor.token_id, "actor_kind": actor.kind, "note": note},
                now,
                approval=decided,
            )
            write = TaskWrite(new, expect_job_id=task.job_id, expect_version=task.version)
            try:
                self.kernel.commit(Change(tasks=[write]))
            except Conflict:
                task = self.kernel.task(task_id)
                continue
            return new
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)
