"""The task graph: parents and their rollup, dependencies and auto-enqueue on ready, task
pause inherited by descendants, and the status and blocked reasons every read derives.

Counting is done with counters on each task's graph row (store.keys.task_graph_key), moved by
conditional updates, never by listing children. The reactions run after the commit, from the
table's stream (triggers/stream.py hands each changed row to the reactions table, which calls
`after_lease` and `after_graph` here): a completion never fails because of them, and each
reaction is conditional, so a replayed stream record changes nothing:

  lease completed with success ─► the task's `succeeded_at` (only with no child outstanding)
                            and `succeeded_lease` (the newest lease that succeeded),
                            when the task is linked (a parent, children or dependents); a
                            task nothing is linked to keeps its success on its lease, and
                            a filing that links to it later copies it or waits for it
  `succeeded_at` appears ─► its child edge counts in the parent (once), each dependent edge
                            counts in the dependent (once)
  parent's children_done reaches children_total ─► `rollup_at` once (`task.rollup_completed`)
  dependent's blockers_done reaches blockers_total ─► one pending lease when opted in and not
                            effectively paused (the at-most-one-open-run path, Runs.open_run)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app import usage
from tenure.app.ports import (
    MAX_CHANGE_ITEMS,
    AddCounts,
    Change,
    CopySuccess,
    Edge,
    GraphOp,
    HoldOp,
    Link,
    Mark,
    MarkHasChildren,
    RequireJobLease,
    RequireLeaseOpen,
    RequireNotSucceeded,
    RequireRun,
    RequireSucceeded,
    TaskWrite,
    Unedge,
)
from tenure.app.rows import GraphRows, SweeperRows, TaskRows
from tenure.app.runs import RunStart
from tenure.app.tasks.keys import TaskKeys
from tenure.app.tasks.status import TERMINAL_TASK, cancelled_above, derive_status
from tenure.domain import authz
from tenure.domain.errors import Conflict, InvalidTransition, Unavailable, ValidationFailed
from tenure.domain.events import TASK_PAUSED, TASK_RESUMED, TASK_ROLLUP_SETTLED, TASK_UPDATED
from tenure.domain.model import MAX_DEPENDS_ON, Lease, Principal, Task, TaskGraph
from tenure.domain.states import LeaseState, TaskStatus
from tenure.domain.tasks import next_version

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.app.runs import Runs
    from tenure.app.tasks.filing import Placing, TaskView
    from tenure.domain.events import GraphMoved, TaskSucceeded

# How deep a tree may grow: every task carries its ancestors, and a read or a claim checks
# them against the scheduler row in one pass.
MAX_DEPTH = 16
# How many edges one success reads and counts (children of a parent, dependents of a
# blocker). A success with more dependents than this counts the first ones only. Nothing
# refuses filing more: link bounds a task's own depends_on, not a blocker's dependents.
MAX_FANOUT = 1000
# How many descendants a resume looks at for auto-enqueue (bounded work per request).
RESUME_FANOUT = 200
# A task write that keeps losing its condition is retried this many times at most.
GRAPH_TRIES = 6
# How many task rows a PATCH of depends_on reads at most looking for a cycle.
CYCLE_READS = 500

# A source of `blocked_reasons` entries beyond the graph's own (dependency, paused): given the
# task and the time of the read, its entries.
Reasons = Callable[[Task, int], list[dict[str, Any]]]
# A reason auto-enqueue holds off: given the task and the time, true when it must wait.
Skip = Callable[[Task, int], bool]


def _succeeded(lease: Lease) -> bool:
    return lease.state is LeaseState.COMPLETED and lease.outcome == "success"


def _still_unsucceeded(task: Task, newest: Lease | None) -> list[GraphOp]:
    """The checks that no success of `task` commits before a new edge to it: its newest lease
    still open, or else no later run (its task row and its job as read)."""
    if newest is not None and newest.state.active:
        return [RequireLeaseOpen(task.id, lease_id=newest.id)]
    ops: list[GraphOp] = [RequireRun(task.id, job_id=task.job_id or "")]
    if newest is not None and task.job_id:
        ops.append(RequireJobLease(task.id, job_id=task.job_id, lease_id=newest.id))
    return ops


def _refuse_repeats(refs: tuple[str, ...]) -> None:
    """Before any read: the same reference twice, or more blockers than a task may have."""
    if len(set(refs)) != len(refs):
        raise ValidationFailed("depends_on: names a task more than once")
    if len(refs) > MAX_DEPENDS_ON:
        raise ValidationFailed(f"depends_on: at most {MAX_DEPENDS_ON} tasks")


class Graph:
    """Parents, dependencies and pause: filing's graph writes, the derived task view, the
    reactions that count successes, and auto-enqueue. `reasons` add blocked reasons to every
    read; `skips` hold auto-enqueue back (each in order)."""

    def __init__(
        self,
        kernel: Kernel,
        runs: Runs,
        keys: TaskKeys,
        reasons: tuple[Reasons, ...] = (),
        skips: tuple[Skip, ...] = (),
        *,
        graph: GraphRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
    ) -> None:
        self.kernel = kernel
        self.graph = graph
        self.sweeper = sweeper
        self.tasks = tasks
        self.runs = runs
        self.keys = keys
        self.reasons = reasons
        self.skips = skips

    # ------------------------------------------------------------------- filing

    def link(self, placing: Placing) -> Placing:
        """Filing's graph writes: the parent's child count and edge, each blocker's edge (met
        or not), and whether the task is ready to enqueue at once."""
        task, links, pool = placing.task, placing.links, placing.pool
        ops = list(placing.ops)
        ancestors: tuple[str, ...] = ()
        parent_id = None
        if links.parent_id is not None:
            parent = self._linked_task(links.parent_id, task.space, "parent_id")
            parent_id = parent.id
            if parent.cancelled is not None:
                raise InvalidTransition(f"parent_id: task {parent.key} is cancelled")
            ancestors = (*(parent.ancestors or ()), parent.id)
            if len(ancestors) > MAX_DEPTH:
                raise ValidationFailed(f"parent_id: a tree is at most {MAX_DEPTH} levels deep")
            ops.append(AddCounts(parent.id, counts=(("children_total", 1), ("children_done", 0))))
            ops.append(Edge(parent.id, kind="child", other=task.id))
            ops = self._parent_success(parent, ops)
            if not parent.has_children:
                # Only the first child pays this write. Not a version bump: a whole-row write
                # of the parent that read it a moment before may drop the mark, and the next
                # child's filing sets it again.
                ops.append(MarkHasChildren(parent.id))
        _refuse_repeats(links.depends_on)
        depends: tuple[str, ...] = ()
        blockers: list[Task] = []
        for ref in links.depends_on:
            blocker = self._linked_task(ref, task.space, "depends_on")
            if blocker.id in ancestors:
                # The ancestor completes only when this task has: waiting on it never ends.
                raise ValidationFailed(
                    f"depends_on: {blocker.id} is an ancestor of the task; that is a cycle"
                )
            if blocker.id in depends:  # its key and its id both
                raise ValidationFailed("depends_on: names a task more than once")
            depends = (*depends, blocker.id)
            blockers.append(blocker)
        unmet = 0
        for blocker in blockers:  # every reference valid: now what holds each edge
            met, held = self.blocker_success(blocker)
            unmet += 0 if met else 1
            ops.extend(held)
            now = self.kernel.clock.now_ms()
            ops.append(
                Edge(blocker.id, kind="dependent", other=task.id, counted_at=now if met else None)
            )
        enqueue = placing.enqueue and unmet == 0
        # Ready at once and opted in: this enqueue is the readiness's one auto-enqueue, marked
        # on the new task's graph row (one write of that row: a transaction names it once).
        mark = enqueue and pool is not None and links.auto_enqueue_on_ready
        at = self.kernel.clock.now_ms() if mark else None
        if depends:
            counts = (("blockers_total", len(depends)), ("blockers_done", len(depends) - unmet))
            name = "auto_enqueued_at" if mark else ""
            ops.append(AddCounts(task.id, counts=counts, mark=name, at=at))
        elif mark:
            ops.append(Mark(task.id, name="auto_enqueued_at", at=at))
        task = replace(
            task,
            parent_id=parent_id,
            ancestors=ancestors or None,
            depends_on=depends or None,
            auto_enqueue_on_ready=links.auto_enqueue_on_ready,
            pool=pool.name if pool else None,
        )
        return replace(placing, task=task, ops=tuple(ops), enqueue=enqueue)

    def blocker_success(self, blocker: Task) -> tuple[bool, list[GraphOp]]:
        """Whether `blocker` has succeeded, for a new edge to it, and the writes that keep the
        answer true when the edge commits, so that its success and the edge cannot miss each
        other (one counts the other, exactly once).

        A success on its graph row holds (the row must still have it). A task nothing was
        linked to when its lease succeeded has no success there: its newest lease's success
        is copied to the row now (while still due), and the edge is placed counted. Not
        succeeded: the row must still say so when the edge commits, and the reactor must
        write the task's success to the row from now on. A task not linked yet is linked
        first, in a small transaction of its own (its graph row made, conditional on its
        run as read: the newest lease still open, or else the task's job and that job's
        lease unchanged, since a later run would move one of them), so that the filing's
        own transaction keeps two items per blocker; a success that beat it is read again.
        Linking is invisible: at most it costs the task's success one graph row write."""
        for _ in range(GRAPH_TRIES):
            graph = self.graph.get_graph(blocker.id)
            if graph.succeeded_at is not None:
                return True, [RequireSucceeded(blocker.id)]
            newest = self.kernel.newest_lease(blocker)
            if newest is not None and _succeeded(newest) and not graph.children_outstanding:
                at = newest.ended_at or self.kernel.clock.now_ms()
                return True, [CopySuccess(blocker.id, at=at, lease_id=newest.id)]
            if self.graph.in_graph(blocker.id):
                return False, [RequireNotSucceeded(blocker.id)]
            now = self.kernel.clock.now_ms()
            held = [Link(blocker.id, at=now), *_still_unsucceeded(blocker, newest)]
            try:
                self.kernel.commit(Change(graph=held))
            except Conflict:
                blocker = self.kernel.task(blocker.id)
                continue
            return False, [RequireNotSucceeded(blocker.id)]
        raise Unavailable(f"task {blocker.id} kept changing; try again", retry_after=1)

    def _parent_success(self, parent: Task, ops: list[GraphOp]) -> list[GraphOp]:
        """A parent's own success before its first child, as its graph row must hold it: a
        success only its lease had (nothing was linked to it then) is copied with the child's
        count (it completed before the child was filed, and stays so); a run still open must
        not end before the child is counted, or the reactor, finding no row, would leave its
        success to the lease while the row says otherwise."""
        graph = self.graph.get_graph(parent.id)
        if graph.succeeded_at is not None or graph.children_outstanding:
            return ops
        newest = self.kernel.newest_lease(parent)
        if newest is None:
            return ops
        if _succeeded(newest):
            at = newest.ended_at or self.kernel.clock.now_ms()
            return [
                replace(op, mark="succeeded_at", at=at)
                if isinstance(op, AddCounts) and op.task_id == parent.id
                else op
                for op in ops
            ]
        if newest.state.active:
            return [*ops, RequireLeaseOpen(parent.id, lease_id=newest.id)]
        return ops

    def _linked_task(self, ref: str, space: str, field: str) -> Task:
        """The task a body field names by its id or its key (one read either way), in the
        task's own space: the answer is the id's, whichever was sent."""
        found = self.keys.task_in(space, ref)
        if found is None:
            # One answer for all: a task (or key) of another space is not told apart from none.
            raise ValidationFailed(f"{field}: task {ref} is not a task of space {space!r}")
        return found

    # ------------------------------------------------------------------ reading

    def get_task(self, actor: Principal, task_id: str) -> TaskView:
        authz.require_role(actor, "read")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "read", task.space)
        return self._derived(task)

    def describe_task(self, task: Task, newest: Lease | None) -> TaskView:
        """The task as a read shows it, for a caller that holds its row and newest lease."""
        return self._derived(task, newest, known=True)

    def describe_filed(self, task: Task, newest: Lease | None) -> TaskView:
        """A task as its own filing answers it. One filed with no parent, no blockers and no
        auto-enqueue has no graph row yet (filing writes one only for blockers or the
        auto-enqueue mark) and nothing above it whose pause could hold it, and nobody can
        have paused it before it existed: its answer needs neither row read (two
        consistent reads of the commonest filing)."""
        if task.parent_id or task.depends_on or task.auto_enqueue_on_ready:
            return self.describe_task(task, newest)
        return self.view(task, newest, TaskGraph(task.id), None, [])

    def _derived(self, task: Task, newest: Lease | None = None, known: bool = False) -> TaskView:
        newest = newest if known else self.kernel.newest_lease(task)
        graph = self.graph.get_graph(task.id)
        unmet = self._unmet_blockers(task) if graph.blockers_outstanding else []
        gate = self.sweeper.get_scheduler()
        paused = self.paused_by(task, gate.paused_tasks)
        return self.view(task, newest, graph, paused, unmet, cancelled_above(task, gate))

    def view(
        self,
        task: Task,
        newest: Lease | None,
        graph: TaskGraph,
        paused_by: str | None,
        unmet: list[str],
        cancelled_by: str | None = None,
    ) -> TaskView:
        """The read's projection from rows already in hand (a single read or a list page).
        `cancelled_by`: an ancestor whose subtree cancel has not reached this task yet; the
        task reads cancelled already, unless it had ended before."""
        # Loaded on a task's first read: the worker function's routes read none.
        from tenure.app.tasks.filing import TaskView

        open_lease = newest if newest is not None and newest.state.active else None
        reasons: list[dict[str, Any]] = []
        if graph.blockers_outstanding:
            reasons.append({"source": "dependency", "depends_on_task_ids": unmet})
        if paused_by is not None:
            reasons.append({"source": "paused", "paused_by_task_id": paused_by})
        now = self.kernel.clock.now_ms()
        for source in self.reasons:
            reasons.extend(source(task, now))
        status = derive_status(task, newest, graph, bool(reasons))
        if cancelled_by is not None and status not in TERMINAL_TASK:
            status = TaskStatus.CANCELLED
        return TaskView(
            task=task,
            lease=open_lease,
            status=status,
            blocked_reasons=tuple(reasons),
            effective_paused=paused_by is not None,
            paused_by_task_id=paused_by,
            children_total=graph.children_total,
            children_done=graph.children_done,
            usage=usage.summed(usage.totals_of(graph)),
        )

    def _unmet_blockers(self, task: Task) -> list[str]:
        blockers = list(task.depends_on or ())
        return [b for b in blockers if self.graph.get_graph(b).succeeded_at is None]

    def paused_by(self, task: Task, paused: Iterable[str] | None = None) -> str | None:
        """The nearest task (itself first, then its parent, upwards) whose pause holds it."""
        held = set(self.sweeper.get_scheduler().paused_tasks if paused is None else paused)
        for candidate in (task.id, *reversed(task.ancestors or ())):
            if candidate in held:
                return candidate
        return None

    # ---------------------------------------------------------------- changing

    def update_task(
        self,
        actor: Principal,
        task_id: str,
        auto_enqueue_on_ready: bool | None,
        pool: str | None,
        depends_on: tuple[str, ...] | None = None,
    ) -> TaskView:
        """PATCH: turn auto-enqueue on or off, change its pool, or replace the blockers
        (`depends_on`, `()` for none). The task row and the graph's edges and counters move in
        one transaction, conditional on what was read; a task left ready with no run and
        opted in is enqueued at once (the same once-per-readiness path)."""
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "member", task.space)
        if pool is not None:
            self.kernel.pool_in_space(pool, task.space)
        wanted = None if depends_on is None else self._checked_blockers(task, depends_on)
        for _ in range(GRAPH_TRIES):
            want = replace(
                task,
                auto_enqueue_on_ready=task.auto_enqueue_on_ready
                if auto_enqueue_on_ready is None
                else auto_enqueue_on_ready,
                pool=pool if pool is not None else task.pool,
                depends_on=(wanted or None) if wanted is not None else task.depends_on,
            )
            if want.auto_enqueue_on_ready and want.pool is None:
                raise ValidationFailed("pool: auto_enqueue_on_ready needs a pool to enqueue on")
            before = (task.auto_enqueue_on_ready, task.pool, task.depends_on or ())
            if (want.auto_enqueue_on_ready, want.pool, want.depends_on or ()) == before:
                break
            ops = self._edge_changes(task, want.depends_on or ())
            now = self.kernel.clock.now_ms()
            data: dict[str, Any] = {
                "by": actor.token_id,
                "auto_enqueue_on_ready": want.auto_enqueue_on_ready,
                "pool": want.pool,
            }
            if wanted is not None:
                data["depends_on"] = list(wanted)
            want = next_version(want, TASK_UPDATED, data, now)
            write = TaskWrite(want, expect_job_id=task.job_id, expect_version=task.version)
            change = Change(tasks=[write], graph=ops)
            if change.size() > MAX_CHANGE_ITEMS:
                raise ValidationFailed(
                    "depends_on: this change of blockers needs "
                    f"{change.size()} writes at once, more than one change holds "
                    f"({MAX_CHANGE_ITEMS}); drop or add fewer blockers at a time"
                )
            try:
                self.kernel.commit(change)
            except Conflict:
                task = self.kernel.task(task_id)
                continue
            task = want
            break
        else:
            raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)
        if task.auto_enqueue_on_ready:
            self.auto_enqueue(task.id)
        return self.get_task(actor, task.id)

    def _checked_blockers(self, task: Task, depends_on: tuple[str, ...]) -> tuple[str, ...]:
        """The new blockers, refused (422 naming depends_on) when one is unknown, in another
        space, the task itself, or would close a cycle; nothing has been written then."""
        _refuse_repeats(depends_on)
        blockers: list[Task] = []
        for ref in depends_on:
            if ref in (task.id, task.key):
                raise ValidationFailed(f"depends_on: {task.id} is the task itself")
            blocker = self._linked_task(ref, task.space, "depends_on")
            if any(b.id == blocker.id for b in blockers):  # its key and its id both
                raise ValidationFailed("depends_on: names a task more than once")
            blockers.append(blocker)
        added = [b for b in blockers if b.id not in (task.depends_on or ())]
        if added:
            self._refuse_cycles(task, added)
        return tuple(b.id for b in blockers)

    def _refuse_cycles(self, task: Task, added: list[Task]) -> None:
        """A new blocker closes a cycle when its own success waits for the task: the task is
        among what the blocker needs (its blockers and its descendants, transitively). Walked
        at most MAX_DEPTH levels and CYCLE_READS rows; a graph too large to walk is refused."""
        reads = 0
        frontier = [(b, 0) for b in added]
        seen: set[str] = set()
        while frontier:
            node, depth = frontier.pop()
            if node.id == task.id or node.id in (task.ancestors or ()):
                raise ValidationFailed(
                    f"depends_on: {node.id} waits for {task.id} already; that would close a cycle"
                )
            if node.id in seen:
                continue
            seen.add(node.id)
            if depth >= MAX_DEPTH:
                raise ValidationFailed(
                    f"depends_on: the graph is deeper than {MAX_DEPTH} levels; cannot check it"
                )
            needs = [*(node.depends_on or ()), *self.graph.graph_edges(node.id, "child", 50)]
            for next_id in needs:
                if next_id == task.id:
                    raise ValidationFailed(
                        f"depends_on: {node.id} waits for {task.id} already; "
                        "that would close a cycle"
                    )
                if next_id in seen:
                    continue
                reads += 1
                if reads > CYCLE_READS:
                    raise ValidationFailed(
                        f"depends_on: more than {CYCLE_READS} tasks to check for a cycle"
                    )
                found = self.tasks.get_task(next_id)
                if found is not None:
                    frontier.append((found, depth + 1))

    def _edge_changes(self, task: Task, depends: tuple[str, ...]) -> list[GraphOp]:
        """The graph writes that take the task from its blockers to `depends`: each dropped
        edge deleted as read (and its counts taken back), each new one placed as filing
        places it (met or not), the task's counters moved by one ADD."""
        old = tuple(task.depends_on or ())
        if old == depends:
            return []
        dropped = [b for b in old if b not in depends]
        added = [b for b in depends if b not in old]
        counted = self._dependent_edges(dropped, task.id)
        ops: list[GraphOp] = []
        total = done = 0
        now = self.kernel.clock.now_ms()
        for blocker_id in dropped:
            if blocker_id not in counted:
                continue  # no edge to drop (never placed): nothing counted either
            was = counted[blocker_id]
            ops.append(Unedge(blocker_id, kind="dependent", other=task.id, counted=bool(was)))
            total -= 1
            done -= 1 if was else 0
        for blocker_id in added:
            blocker = self.tasks.get_task(blocker_id)
            if blocker is None:
                raise ValidationFailed(f"depends_on: task {blocker_id} does not exist")
            met, held = self.blocker_success(blocker)
            ops.extend(held)
            ops.append(
                Edge(blocker_id, kind="dependent", other=task.id, counted_at=now if met else None)
            )
            total += 1
            done += 1 if met else 0
        if total or done:
            ops.append(
                AddCounts(task.id, counts=(("blockers_total", total), ("blockers_done", done)))
            )
        return ops

    def _dependent_edges(self, blockers: list[str], task_id: str) -> dict[str, bool]:
        """Whether each blocker's edge to the task counted (edges live on the blocker's side)."""
        found: dict[str, bool] = {}
        for blocker_id in blockers:
            edge = self.graph.edges_counted(blocker_id, "dependent", [task_id])
            if task_id in edge:
                found[blocker_id] = edge[task_id]
        return found

    def pause_task(self, actor: Principal, task_id: str) -> TaskView:
        return self._set_pause(actor, task_id, True)

    def resume_task(self, actor: Principal, task_id: str) -> TaskView:
        view = self._set_pause(actor, task_id, False)
        # Dependents skipped while paused get their run now (each once per readiness).
        for waiting in [view.task.id, *self._descendants(view.task.id, RESUME_FANOUT)]:
            self.auto_enqueue(waiting)
        return self.get_task(actor, task_id)

    def _set_pause(self, actor: Principal, task_id: str, paused: bool) -> TaskView:
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "member", task.space)
        status = self._derived(task).status
        if status in TERMINAL_TASK:
            raise InvalidTransition(f"task {task.key} is {status}; there is nothing to pause")
        for _ in range(GRAPH_TRIES):
            if task.paused == paused:
                return self.get_task(actor, task_id)  # already so: nothing to record
            now = self.kernel.clock.now_ms()
            new = next_version(
                task,
                TASK_PAUSED if paused else TASK_RESUMED,
                {"by": actor.token_id, "actor_kind": actor.kind},
                now,
                paused=paused,
                paused_by=actor.token_id if paused else None,
            )
            # The task row and the scheduler row's set move together: claims read the set.
            change = Change(
                tasks=[TaskWrite(new, expect_job_id=task.job_id, expect_version=task.version)],
                holds=[HoldOp("paused", task.id, paused)],
            )
            try:
                self.kernel.commit(change)
            except Conflict:
                task = self.kernel.task(task_id)
                continue
            return self.get_task(actor, task_id)
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)

    def _descendants(self, task_id: str, limit: int) -> list[str]:
        """Up to `limit` descendants, breadth first (bounded reads: one Query per task)."""
        found: list[str] = []
        frontier = [task_id]
        while frontier and len(found) < limit:
            below = self.graph.graph_edges(frontier.pop(0), "child", limit)
            below = below[: limit - len(found)]
            found.extend(below)
            frontier.extend(below)
        return found

    # ---------------------------------------------------- reactions (the stream)

    def after_lease(self, event: TaskSucceeded, context: Context) -> None:
        """A task's success, written to its graph row when something counts it there: a
        parent (the task has one: its lease carries its lineage), children or dependents
        (its graph row or a dependent edge exists: one consistent read, after the success
        committed, so an edge committed before it is seen, and a filing after it sees the
        lease; the record's context reads it with the task's row). A task nothing is linked
        to keeps its success on its lease: no write."""
        new = event.lease
        if new.task_id is None:
            return  # derive tells a success only of a task's lease
        linked = (
            not self.kernel.successes_derived() or bool(new.lineage) or context.linked(new.task_id)
        )
        if not linked:
            context.told_by_lease = True
            return
        # Only with no child outstanding (a parent stays open until its children succeed).
        # The lease is named in the same write: the task's inputs hand on its result, even
        # after a later run (a second write only for a re-run or a parent still waiting).
        at = new.ended_at or self.kernel.clock.now_ms()
        if self.graph.settle_graph(new.task_id, "succeeded_at", at, new.id):
            return
        if self.graph.get_graph(new.task_id).success_copied:
            # A filing that linked to the task meanwhile copied this success from the lease.
            context.told_by_lease = True

    def after_graph(self, event: GraphMoved, context: Context) -> None:
        new = event.row
        was = event.before or TaskGraph(new.task_id)
        now = self.kernel.clock.now_ms()
        if new.succeeded_at is not None and was.succeeded_at is None:
            self._count_success(new.task_id, now)
        if (
            new.children_total > 0
            and new.children_done == new.children_total
            and was.children_done != new.children_done
        ):
            self.graph.settle_graph(new.task_id, "rollup_at", now)
        if (
            new.blockers_total > 0
            and new.blockers_done == new.blockers_total
            and was.blockers_done != new.blockers_done
        ):
            self.auto_enqueue(new.task_id)
        if new.rollup_at is not None and was.rollup_at is None:
            self._settle_parked(new.task_id)

    def _settle_parked(self, task_id: str) -> None:
        """A parent its children completed is done, even if its own run was parked in
        needs_attention meanwhile: the parking is lifted (once; a replay finds it lifted)."""
        for _ in range(GRAPH_TRIES):
            task = self.tasks.get_task(task_id)
            if task is None or not task.attention:
                return
            now = self.kernel.clock.now_ms()
            settled = next_version(
                task, TASK_ROLLUP_SETTLED, {"was": "needs_attention"}, now, attention=False
            )
            write = TaskWrite(settled, expect_job_id=task.job_id, expect_version=task.version)
            try:
                self.kernel.commit(
                    Change(tasks=[write], holds=[HoldOp("attention", task.id, False)])
                )
            except Conflict:
                continue
            return

    def _count_success(self, task_id: str, now: int) -> None:
        task = self.kernel.task_as_filed(task_id)
        if task is None:
            return
        if task.parent_id is not None:
            self.graph.count_edge(task.parent_id, "child", task.id, "children_done", now)
        for dependent in self.graph.graph_edges(task.id, "dependent", MAX_FANOUT):
            self.graph.count_edge(task.id, "dependent", dependent, "blockers_done", now)

    def auto_enqueue(self, task_id: str, pool: str | None = None) -> Lease | None:
        """One pending lease for an opted-in task whose blockers all succeeded, unless it is
        effectively paused or parked, or has an open run. The open-run path refuses a second
        run and the graph row's once-per-readiness mark refuses a second enqueue, so
        concurrent blocker completions and replays converge on one run. `pool` enqueues a
        task that did not opt in there, on the same path (an approval of a task filed for it)."""
        task = self.tasks.get_task(task_id)
        if task is None or task.attention:
            return None
        target = pool if pool is not None else task.pool if task.auto_enqueue_on_ready else None
        if target is None:
            return None
        if self.graph.get_graph(task.id).blockers_outstanding:
            return None
        held = self.sweeper.get_scheduler()
        if task.id in held.attention or self.paused_by(task, held.paused_tasks) is not None:
            return None  # skipped until resumed (resume looks again)
        now = self.kernel.clock.now_ms()
        if any(skip(task, now) for skip in self.skips):
            return None  # held by another cause; clearing it enqueues (once per readiness)
        current = self.kernel.newest_lease(task)
        if current is not None and current.state.active:
            return None
        on = self.kernel.pool(target)
        checks = [(task.job_id, current.id)] if task.job_id and current else []
        mark = Mark(task.id, name="auto_enqueued_at", at=self.kernel.clock.now_ms())
        try:
            _, lease = self.runs.open_run(
                task,
                on,
                create_task=False,
                expect_job_id=task.job_id,
                job_checks=checks,
                run=RunStart(graph=(mark,)),
            )
        except Conflict:
            return None  # another reaction (or an operator) opened the run first
        self.kernel.counters["auto_enqueued"] += 1
        return lease
