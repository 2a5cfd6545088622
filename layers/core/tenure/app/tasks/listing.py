"""A space's task list, newest first (the board's columns): every task, whether or not it has
ever had a lease, with the status and blocked reasons a single read derives."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from tenure.app.ports import SchedulerState, TaskEntry
from tenure.app.rows import GraphRows, SweeperRows, TaskRows
from tenure.app.tasks.filing import TaskView
from tenure.app.tasks.status import cancelled_above
from tenure.domain import authz
from tenure.domain.model import Lease, Principal, TaskGraph
from tenure.domain.states import TaskStatus
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.tasks.graph import Graph

# One store page holds at most this many tasks (a caller's limit is at most this too).
TASK_PAGE_MAX = 100
# A status-filtered request examines at most this many tasks (two store pages): fewer than
# `limit` may match, and the answer then carries a cursor resuming after the last examined.
TASK_FILTER_BUDGET = 200


@record
class ListedTask:
    view: TaskView
    lease: Lease | None  # the newest lease of its latest run, open or ended (None: never run)


class TaskList(NamedTuple):
    tasks: list[ListedTask]
    next_cursor: str | None


class TaskListing:
    def __init__(
        self,
        kernel: Kernel,
        graph: Graph,
        *,
        graph_rows: GraphRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
    ) -> None:
        self.graph = graph
        self.kernel = kernel
        self.graph_rows = graph_rows
        self.sweeper = sweeper
        self.tasks = tasks

    def list_tasks(
        self,
        actor: Principal,
        space: str,
        limit: int,
        cursor: str | None,
        status: TaskStatus | None = None,
    ) -> TaskList:
        """One page of the space's tasks. Reads are bounded: per store page one index Query,
        batched rows by key, the blockers' graph rows of tasks still waiting on some (at most
        MAX_DEPENDS_ON each), and one read of the scheduler row per request."""
        authz.require_operator(actor, "read", space)
        if not 1 <= limit <= TASK_PAGE_MAX:
            raise ValueError(f"a task page holds 1 to {TASK_PAGE_MAX} tasks")
        gate = self.sweeper.get_scheduler(consistent=False)
        found: list[ListedTask] = []
        examined = 0
        while True:
            if status is None:
                size = limit - len(found)
            else:
                size = min(TASK_PAGE_MAX, TASK_FILTER_BUDGET - examined)
            page = self.tasks.task_page(space, size, cursor)
            examined += size
            views = self._page_views(page.entries, gate)
            for number, (entry, view) in enumerate(zip(page.entries, views, strict=True)):
                if status is not None and view.status is not status:
                    continue
                found.append(ListedTask(view, entry.lease))
                if len(found) == limit:
                    last = number == len(page.entries) - 1
                    return TaskList(found, page.next_cursor if last else entry.cursor)
            cursor = page.next_cursor
            if cursor is None or status is None or examined >= TASK_FILTER_BUDGET:
                return TaskList(found, cursor)

    def _page_views(self, entries: list[TaskEntry], gate: SchedulerState) -> list[TaskView]:
        waiting = {
            b for e in entries if e.graph.blockers_outstanding for b in e.task.depends_on or ()
        }
        blockers: dict[str, TaskGraph] = (
            self.graph_rows.get_graphs(sorted(waiting)) if waiting else {}
        )
        views = []
        for e in entries:
            unmet = (
                [
                    b
                    for b in e.task.depends_on or ()
                    if b not in blockers or blockers[b].succeeded_at is None
                ]
                if e.graph.blockers_outstanding
                else []
            )
            views.append(
                self.graph.view(
                    e.task,
                    e.lease,
                    e.graph,
                    self.graph.paused_by(e.task, gate.paused_tasks),
                    unmet,
                    cancelled_above(e.task, gate),
                )
            )
        return views
