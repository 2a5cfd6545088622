"""Cancelling a task, and with `subtree` every task under it at any depth.

A task's cancel is one transaction: its row gets `cancelled` (who, why, when) and records
`task.cancelled`, and its open run moves as an operator's cancel moves it (a pending lease
ends `cancelled`, a held one goes to `cancelling` and its heartbeat answers `revoke:
"cancel"`), each on the state and version read. A claim is a conditional write of that same
lease row, so a claim and a cancel never both land: a lease the cancel found pending is never
claimed afterwards, and one claimed first is asked to stop. Every later task write that does
not carry the cancel is refused by the row itself (store/keys.py TASK_NOT_CANCELLED), and
opening a run of a cancelled task is refused (app/runs.py), so an enqueue, a retry or an
auto-enqueue that read the task before the cancel opens nothing.

A subtree is walked down its child edges, a page at a time, each level from the one above:

* the top's cancel also marks its graph row reached (`cancel_reached_at`, `cancel_root`) and
  adds the top to the scheduler row's `cancelled` set, so every task under it reads cancelled
  and the claim gate skips every lease under it from that commit on, before the walk gets
  there;
* reaching a child is its own cancel (as above, copying the top's actor and reason) plus a
  once-only mark on the child's graph row, and +1 on the top's `cancel_open` when the child
  has children of its own to walk (a child without any is reached and walked in one write,
  on the condition that it still has none);
* a task's walk reads a page of its child edges after its `cancel_after` cursor; a full page
  moves the cursor on (only forward), a short one marks it walked (`cancel_walked_at`, once)
  with -1 on the top's `cancel_open`. The top walked with nothing open means every descendant
  was reached: the top leaves the `cancelled` set.

A claim skips a lease under a top in the `cancelled` set, but it read that set before its own
write: a claim that read it just before the top's commit writes just after, while the task
already reads cancelled and the walk has not reached it. So a claim of a lease whose task has
a parent, once its write has committed, reads its ancestors' graph rows consistently (one
batched read of at most MAX_DEPTH rows; a task with no parent reads nothing more) and
`withdraw_claim` looks for a reach mark: the top's is written by the top's own commit, so a
claim committed after it finds it. Then the claim is never answered: the claimer reaches the
task as the walk would (the once-only mark decides which of the two records the cancel) and,
as the lease's holder that never began, ends it `cancelled` on its state and fence.

The request itself walks at most CANCEL_BUDGET tasks; every mark and cursor move is a graph
row change the table's stream hands to `continue_walk`, which walks that task's next page, so
what the request left (or lost to a crash after the top's commit) is finished in the
background, each stream record doing one bounded page. A filing under a task the walk has
reached is refused by its own transaction (its parent's child count is conditional on it), so
no child slips in behind the walk.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tenure.app.kernel import over
from tenure.app.ports import AddCounts, Advance, Change, GraphOp, HoldOp, Mark, Reach, TaskWrite
from tenure.app.rows import GraphRows, LeaseRows, SweeperRows, TaskRows
from tenure.app.tasks.status import TERMINAL_TASK, cancelled_above, derive_status
from tenure.domain import authz, fencing
from tenure.domain.errors import Conflict, InvalidTransition, Unavailable, ValidationFailed
from tenure.domain.events import TASK_CANCELLED
from tenure.domain.model import Lease, Principal, Task, TaskGraph
from tenure.domain.states import LeaseState
from tenure.domain.tasks import next_version
from tenure.domain.transitions import Action, move, must_move
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.app.tasks.graph import Graph
    from tenure.domain.events import GraphMoved

# A reason is 1 to this many characters (the API model says the same).
MAX_REASON = 500
# How many tasks one request reaches at most (the top included); the rest is the stream's.
CANCEL_BUDGET = 50
# How many child edges one stream record reads and reaches.
WALK_PAGE = 100
# A task's cancel that keeps losing its condition is read again and tried this many times.
CANCEL_TRIES = 6


@record
class Cancelled:
    """A request's answer: the top task as it now reads, how many tasks this request ended,
    and how many descendants it knows of and has left to the background walk."""

    task_id: str
    cancelled: int
    remaining: int


@dataclass
class _Walk:
    """One request's share of a subtree walk."""

    budget: int
    ended: int = 0
    # task id -> (children it has, children of it this request reached)
    open: dict[str, tuple[int, int]] | None = None


def is_cancelled(task: Task, now: int) -> bool:
    """Auto-enqueue skips a cancelled task."""
    return task.cancelled is not None


class Cancellation:
    def __init__(
        self,
        kernel: Kernel,
        graph: Graph,
        *,
        graph_rows: GraphRows,
        leases: LeaseRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
    ) -> None:
        self.kernel = kernel
        self.graph_rows = graph_rows
        self.leases = leases
        self.sweeper = sweeper
        self.tasks = tasks
        self.graph = graph

    # ---------------------------------------------------------------- request

    def cancel(self, actor: Principal, task_id: str, reason: str, subtree: bool) -> Cancelled:
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "member", task.space)
        if not 1 <= len(reason) <= MAX_REASON:
            raise ValidationFailed(f"reason: 1 to {MAX_REASON} characters")
        fencing.refuse_token_fields({"reason": reason})
        marker = {
            "by": actor.token_id,
            "actor_kind": actor.kind,
            "reason": reason,
            "subtree": subtree,
        }
        walks = self._cancel_top(task_id, marker, subtree)
        if not walks:
            return Cancelled(task_id, 1, 0)
        walk = _Walk(budget=CANCEL_BUDGET - 1, ended=1, open={})
        with contextlib.suppress(Unavailable):  # the stream goes on from the cursors moved
            self._walk_down(task_id, walk)
        left = sum(total - done for total, done in (walk.open or {}).values())
        return Cancelled(task_id, walk.ended, max(0, left))

    def _cancel_top(self, task_id: str, marker: dict[str, Any], subtree: bool) -> bool:
        """The top's own cancel; True when its subtree has a walk to do."""
        for _ in range(CANCEL_TRIES):
            task, newest = self._settled(self.kernel.task(task_id))
            graph = self.graph_rows.get_graph(task.id)
            gate = self.sweeper.get_scheduler()
            status = derive_status(task, newest, graph, False)
            if status in TERMINAL_TASK or cancelled_above(task, gate) is not None:
                raise InvalidTransition(
                    f"task {task.key} is {status.value}; it cannot be cancelled"
                )
            now = self.kernel.clock.now_ms()
            ops: list[GraphOp] = []
            holds: list[HoldOp] = []
            walks = subtree and graph.children_total > 0
            if walks:
                ops.append(Reach(task.id, root=task.id, at=now))
                holds.append(HoldOp("cancelled", task.id, True))
            elif subtree:
                # Nothing under it: reached and walked at once, while it still has no child.
                ops.append(Reach(task.id, root=task.id, at=now, walked="cancel_walked_at"))
            change = self._task_cancel(task, newest, {**marker, "at": now}, now)
            try:
                self.kernel.commit(replace(change, graph=ops, holds=holds))
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                continue
            self.kernel.counters["tasks_cancelled"] += 1
            return walks
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)

    def _task_cancel(
        self, task: Task, newest: Lease | None, marker: dict[str, Any], now: int
    ) -> Change:
        """The task row with its cancel (and `task.cancelled` on its timeline) and its open
        run moved as an operator's cancel moves it, each on what was read."""
        data = {k: v for k, v in marker.items() if k != "at"}
        new = next_version(task, TASK_CANCELLED, data, now, cancelled=marker)
        tasks = [TaskWrite(new, expect_job_id=task.job_id, expect_version=task.version)]
        leases = []
        if newest is not None and newest.state.active:
            to = move(newest.id, newest.state, newest.revoke, Action.CANCEL)
            if to is not None:
                why = {"by": marker["by"], "reason": marker["reason"], "task_cancelled": True}
                leases.append(over(newest, self.kernel.apply(newest, to, why, now)))
        return Change(tasks=tasks, leases=leases)

    # ------------------------------------------------------------------ claims

    def withdraw_claim(self, claimed: Lease) -> bool:
        """After a claim's write committed: True, with the lease ended and its task reached,
        when a subtree cancel above the task had committed (an ancestor's graph row carries a
        reach mark); the claim must then not hand the lease out."""
        if not claimed.lineage or claimed.task_id is None:
            return False  # nothing above it: no subtree cancel can hold it (no read)
        graphs = self.graph_rows.get_graphs(list(claimed.lineage), consistent=True)
        # The nearest marked ancestor: its own cancel's walk is the one that comes this way.
        root = next(
            (
                graphs[x].cancel_root
                for x in reversed(claimed.lineage)
                if x in graphs and graphs[x].cancel_reached_at is not None
            ),
            None,
        )
        if root is None:
            return False
        with contextlib.suppress(Unavailable):  # the walk reaches it in any case
            self._reach(claimed.task_id, root, self._root_marker(root))
        self._end_withdrawn(claimed)
        return True

    def _end_withdrawn(self, claimed: Lease) -> None:
        """The withdrawn lease, asked to stop by the reach (the claimer's or the walk's),
        ended by its holder as a stopped lease ends: `cancelled`, on its state and fence.
        The same write drops its `claim_ref`: a withdrawn lease is no claim's own, so a claim
        with that claim_id moves its record on to the next lease rather than follow this one.
        Bounded; a lease still held when the tries run out is ended by its toleration."""
        why = {"by": "claim", "worker_id": claimed.worker_id, "task_cancelled": True}
        for _ in range(CANCEL_TRIES):
            current = self.leases.get_lease(claimed.id)
            if current is None or current.fence != claimed.fence or current.state.terminal:
                return
            action = Action.RELEASE if current.state is LeaseState.CANCELLING else Action.CANCEL
            to = must_move(current.id, current.state, current.revoke, action)
            now = self.kernel.clock.now_ms()
            try:
                ended = replace(self.kernel.apply(current, to, why, now), claim_ref=None)
                self.kernel.write(current, ended)
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
            # Asked to stop now (its reach failed): ended on the next round.

    # ------------------------------------------------------------------- walk

    def _walk_down(self, root: str, walk: _Walk) -> None:
        """Breadth first from the top, within the request's budget."""
        marker = self._root_marker(root)
        queue = [root]
        while queue and walk.budget > 0:
            node = queue.pop(0)
            current = self.graph_rows.get_graph(node)
            if current.cancel_walked_at is not None:
                continue
            assert walk.open is not None
            walk.open.setdefault(node, (current.children_total, 0))
            after = current.cancel_after
            while walk.budget > 0:
                limit = min(WALK_PAGE, walk.budget)
                page, parents = self._page(node, root, marker, after, limit, walk)
                total, done = walk.open[node]
                walk.open[node] = (total, done + len(page))
                queue.extend(parents)
                if len(page) < limit:
                    walk.open.pop(node, None)
                    break
                after = page[-1]

    def continue_walk(self, event: GraphMoved, context: Context) -> None:
        """A stream reaction: a graph row a subtree cancel reached, or whose cursor moved,
        gets its next page walked (judged on the row as it is now: a replay finds it
        walked, or reads on from where the cursor has got to)."""
        old, new = event.before, event.row
        if new.cancel_reached_at is None or new.cancel_root is None:
            return
        if new.cancel_walked_at is not None:
            return
        was = old or TaskGraph(new.task_id)
        if was.cancel_reached_at is not None and was.cancel_after == new.cancel_after:
            return  # another field moved (the top's counter): nothing new to walk
        current = self.graph_rows.get_graph(new.task_id)
        if current.cancel_walked_at is not None:
            return
        marker = self._root_marker(new.cancel_root)
        self._page(new.task_id, new.cancel_root, marker, current.cancel_after, WALK_PAGE, None)

    def _page(
        self,
        node: str,
        root: str,
        marker: dict[str, Any],
        after: str | None,
        limit: int,
        walk: _Walk | None,
    ) -> tuple[list[str], list[str]]:
        """One page of `node`'s children after `after`: each reached; then the cursor moves
        on (a full page) or the node is marked walked. Returns the page and those of its
        tasks that have children of their own."""
        page = self.graph_rows.graph_edges(node, "child", limit, after)
        parents = []
        for child in page:
            ended, children = self._reach(child, root, marker)
            if children:
                parents.append(child)
            if walk is not None:
                walk.budget -= 1
                walk.ended += int(ended)
                if children and walk.open is not None:
                    walk.open.setdefault(child, (children, 0))
        now = self.kernel.clock.now_ms()
        if len(page) == limit:
            step = Advance(node, name="cancel_after", to=page[-1])
            with contextlib.suppress(Conflict):  # a rival walk of the node got past it first
                self.kernel.commit(Change(graph=[step]))
            return page, parents
        done: list[GraphOp] = [Mark(node, name="cancel_walked_at", at=now)]
        if node != root:
            done.append(AddCounts(root, counts=(("cancel_open", -1),)))
        try:
            self.kernel.commit(Change(graph=done))
        except Conflict:
            return page, parents  # walked before (a replay or a rival)
        self._finish(root)
        return page, parents

    def _reach(self, task_id: str, root: str, marker: dict[str, Any]) -> tuple[bool, int]:
        """Reach one descendant: its cancel (unless it had ended) with the once-only mark.
        Returns (this call ended it, how many children it has left to walk)."""
        for _ in range(CANCEL_TRIES):
            task = self.tasks.get_task(task_id)
            if task is None:
                return False, 0
            graph = self.graph_rows.get_graph(task_id)
            if graph.cancel_reached_at is not None:
                return False, graph.children_total if graph.cancel_walked_at is None else 0
            now = self.kernel.clock.now_ms()
            parent = graph.children_total > 0
            reach = (
                Reach(task_id, root=root, at=now)
                if parent
                else Reach(task_id, root=root, at=now, walked="cancel_walked_at")
            )
            ops: list[GraphOp] = [reach]
            if parent:
                ops.append(AddCounts(root, counts=(("cancel_open", 1),)))
            task, newest = self._settled(task)
            ends = task.cancelled is None and (
                derive_status(task, newest, graph, False) not in TERMINAL_TASK
            )
            change = (
                self._task_cancel(task, newest, {**marker, "at": now, "root": root}, now)
                if ends
                else Change()
            )
            try:
                self.kernel.commit(replace(change, graph=ops))
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                continue
            if ends:
                self.kernel.counters["tasks_cancelled"] += 1
            return ends, graph.children_total
        raise Unavailable(f"task {task_id} kept changing while its cancel walked down")

    def _settled(self, task: Task) -> tuple[Task, Lease | None]:
        """The task and its newest lease, read until an ended lease is read twice: a run's
        end and its successor commit together, but the task's job and the lease are two
        reads, so an expiry landing between them shows the lost lease without the successor
        that replaced it (a task that looks failed while its next run waits in the queue)."""
        newest = self.kernel.newest_lease(task)
        for _ in range(CANCEL_TRIES):
            if newest is None or newest.state.active:
                break
            again = self.kernel.task(task.id)
            latest = self.kernel.newest_lease(again)
            if latest is not None and (latest.id, latest.version) == (newest.id, newest.version):
                break
            task, newest = again, latest
        return task, newest

    def _root_marker(self, root: str) -> dict[str, Any]:
        """The top's actor and reason, which every task its walk reaches records."""
        top = self.tasks.get_task(root)
        mark = (top.cancelled if top is not None else None) or {}
        return {k: mark.get(k) for k in ("by", "actor_kind", "reason")} | {"subtree": True}

    def _finish(self, root: str) -> None:
        """The top walked with no reached task left to walk: every descendant was reached,
        and the top leaves the scheduler row's `cancelled` set (once; a repeat is harmless)."""
        top = self.graph_rows.get_graph(root)
        if top.cancel_walked_at is None or top.cancel_open > 0:
            return
        if root in self.sweeper.get_scheduler().cancelled:
            self.kernel.commit(Change(holds=[HoldOp("cancelled", root, False)]))
            self.kernel.counters["cancel_walks_finished"] += 1
