"""Delegation: tasks filed with a lease token, their bounds, stopping them, and the
completion claim gate.

A worker holding a lease may file tasks: they land in its lease's space and remember that
lease (`created_by_lease`), which is what the claim gate checks when the lease's completion
names `created_task_ids` — an agent must not take credit for tasks it did not create. The
gate reads one task row per id (bounded by the report's schema), before the completion's
conditional write, so a refused completion leaves the lease exactly as it was.

What one agent can set going is bounded twice, by its lease's pool: the tasks one lease token
files (`max_delegated_per_lease`), and the tasks of one tree of delegation — every task
filed with the token of a run of a task in it, down from the task a person filed at its top
(`max_delegated_per_tree`). Each is a counter row moved +1 in the filing's own transaction,
only while below its limit, so racing filings never pass it and a refused filing leaves
nothing. Operators' filings count nothing and write no counter.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app.kernel import over
from tenure.app.ports import (
    DELEGATED_CEILING,
    TREE_CEILING,
    Advance,
    Ceiling,
    Change,
    Edge,
    Unedge,
)
from tenure.app.rows import GraphRows, LeaseRows, TaskRows, TimelineRows
from tenure.app.tasks.keys import TaskKeys
from tenure.domain.errors import (
    Conflict,
    TenureError,
    UnverifiedCreatedTasks,
    ValidationFailed,
)
from tenure.domain.events import (
    TASK_COMPLETION_HALLUCINATION_BLOCKED,
    TASK_COMPLETION_HALLUCINATION_SUSPECTED,
)
from tenure.domain.model import Lease, Principal, Task
from tenure.domain.outbound import ends_orphan
from tenure.domain.states import EndReason, ReportKind
from tenure.domain.task_keys import (
    MAX_SCANNED_CHARS,
    TASK_ID_SHAPE,
    derived_outside,
    is_task_key,
)
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.app.tasks.filing import Placing, TaskLinks
    from tenure.domain.events import GraphMoved, LeaseEnded

# At most this many ids a completion may name (the API model says the same).
MAX_CREATED_TASK_IDS = 100
# How many id-shaped strings in one result the scan looks up at most.
MAX_SCANNED_IDS = 20
# Why a report may not name a task: one answer for a task of another space and for none at
# all, so that a lease token learns nothing of which tasks other spaces have.
NOT_IN_SPACE = "is not a task of this lease's space"
# A stopped creator's children are stopped this many at a time: one page per stream record,
# each child's run tried at most STOP_TRIES times; a full page sets off the next (the lease's
# graph row's `stop_after` moves on, and that row's own stream record reads on from there).
STOP_PAGE = 100
STOP_TRIES = 3
# The longest ttl a delegated task may ask for (a week; the API model says the same).
MAX_TTL_SECONDS = 7 * 86_400
# How many minutes of ttl edges one sweeper pass drains at most, and how many tasks.
TTL_MINUTES_PER_PASS = 60
TTL_PER_PASS = 100
# The creator's endings that stop its children: stopped by an operator or by its own
# creator's stop, lost, or ended by its ttl or its run timeout. So a stop runs down a whole
# tree of delegation, each level from the stream record of the level above.
_CREATOR_STOPS = (
    EndReason.CANCELLED,
    EndReason.KILLED,
    EndReason.EXPIRED,
    EndReason.WORKER_LOST,
    EndReason.PARENT_STOPPED,
    EndReason.TTL_EXPIRED,
    EndReason.TIMED_OUT,
)


def ttl_minute(at_ms: int) -> int:
    """The minute a ttl falls due in (rounded up: a run is never ended before its ttl)."""
    return -(-at_ms // 60_000)


def ttl_bucket(minute: int) -> str:
    return f"ttl.{minute}"


class Delegation:
    """Lease-token filing (a filer and a link for Filing) and the completion claim gate (a
    prepare and an after stage for the final reports)."""

    def __init__(
        self,
        kernel: Kernel,
        keys: TaskKeys,
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
        self.keys = keys

    # ------------------------------------------------------------------ filing

    def lease_files(
        self, actor: Principal, space: str | None, links: TaskLinks
    ) -> tuple[Principal, str | None, TaskLinks]:
        """A lease token files as a member of its lease's space, and only of it: `space` may
        be left out (the task lands in that space); the task remembers the lease as its
        creator. An operator's filing gets no creator (`wake_creator` is meaningless then)."""
        if actor.kind != "lease":
            if links.ttl_seconds is not None:
                raise ValidationFailed("ttl_seconds: only a task filed with a lease token has one")
            return actor, space, replace(links, wake_creator=False, creator_lease=None)
        if links.ttl_seconds is not None and not 1 <= links.ttl_seconds <= MAX_TTL_SECONDS:
            raise ValidationFailed(f"ttl_seconds: between 1 and {MAX_TTL_SECONDS}")
        lease = self.kernel.acting_lease(actor)
        space = lease.space if space is None else space
        if space != lease.space:
            raise ValidationFailed(
                f"space: a lease's tasks land in its own space {lease.space!r}, not {space!r}"
            )
        filer = Principal(kind="operator", token_id=actor.token_id, role="member", spaces=(space,))
        wake = True if links.wake_creator is None else links.wake_creator
        return (
            filer,
            space,
            replace(
                links,
                wake_creator=wake,
                creator_lease=lease.id,
                creator_pool=lease.pool,
                delegation_root=self._root_of(lease),
            ),
        )

    def _root_of(self, lease: Lease) -> str:
        """The top of the tree a task filed with `lease`'s token joins: the root its task
        was counted under, or that task itself when a person filed it (a lease with no task,
        a rule's run of a workflow or space, is the top of its own tree). One eventually
        consistent read: a task's root is written once, by its filing."""
        if lease.task_id is None:
            return lease.id
        task = self.kernel.task_as_filed(lease.task_id)
        return (task.delegation_root if task else None) or lease.task_id

    def bounds(self, task: Task, links: TaskLinks) -> list[tuple[Ceiling, TenureError]]:
        """The two counters a lease token's filing moves: its lease's, and its tree's, each
        judged against the limit of the filing lease's pool."""
        lease, root = links.creator_lease, links.delegation_root
        if lease is None or root is None or links.creator_pool is None:
            return []
        pool = self.kernel.pool(links.creator_pool)
        per_lease, per_tree = pool.max_delegated_per_lease, pool.max_delegated_per_tree
        return [
            (
                Ceiling(DELEGATED_CEILING, lease, +1, per_lease),
                ValidationFailed(
                    f"max_delegated_per_lease: lease {lease} has filed {per_lease} tasks, the "
                    f"most a lease of pool {pool.name} may file; nothing was filed (an admin "
                    "may raise the pool's max_delegated_per_lease)"
                ),
            ),
            (
                Ceiling(TREE_CEILING, root, +1, per_tree),
                ValidationFailed(
                    f"max_delegated_per_tree: the tree of delegation under {root} holds "
                    f"{per_tree} tasks, the most a lease of pool {pool.name} may add to; "
                    "nothing was filed (an admin may raise the pool's max_delegated_per_tree)"
                ),
            ),
        ]

    def mark_creator(self, placing: Placing) -> Placing:
        task, links, ops = placing.task, placing.links, placing.ops
        creator = links.creator_lease
        marked = replace(
            task,
            created_by_lease=creator,
            wake_creator=bool(creator and links.wake_creator),
            delegation_root=links.delegation_root if creator else None,
        )
        if creator is not None:  # found again when the creator is stopped (stop_children)
            ops = (*ops, Edge(creator, kind="delegated", other=task.id))
        if creator is not None and links.ttl_seconds is not None:
            due = ttl_minute(task.created_at + links.ttl_seconds * 1000)
            ops = (*ops, Edge(ttl_bucket(due), kind="ttl", other=task.id))
        return replace(placing, task=marked, ops=ops)

    # ------------------------------------------------------------ ttl (the sweeper)

    def expire_ttls(self, cursor: int | None) -> tuple[int, list[str]]:
        """The sweeper's share: each minute whose ttls have passed, from the one after
        `cursor` (the last minute drained), at most TTL_MINUTES_PER_PASS minutes and
        TTL_PER_PASS tasks a pass: each task's open run is ended `ttl_expired` and its ttl
        edge deleted, in one conditional write. Returns the new cursor (a minute that may
        still hold tasks is left undrained) and the tasks whose run it ended."""
        due = self.kernel.clock.now_ms() // 60_000  # minutes up to this one have passed
        at = due - TTL_MINUTES_PER_PASS if cursor is None else cursor
        ended: list[str] = []
        budget = TTL_PER_PASS
        for minute in range(at + 1, min(due, at + TTL_MINUTES_PER_PASS) + 1):
            bucket = ttl_bucket(minute)
            ids = self.graph.graph_edges(bucket, "ttl", budget)
            ended.extend(t for t in ids if self._expire_ttl(bucket, t, minute))
            budget -= len(ids)
            if budget <= 0:
                break  # this minute may hold more: the next pass reads it again
            at = minute
        return at, ended

    def _expire_ttl(self, bucket: str, task_id: str, minute: int) -> bool:
        unedge = Unedge(bucket, kind="ttl", other=task_id)
        for _ in range(STOP_TRIES):
            task = self.tasks.get_task(task_id)
            run = self.kernel.newest_lease(task) if task is not None else None
            if run is None or run.state.terminal:
                with contextlib.suppress(Conflict):  # gone already: a pass that raced
                    self.kernel.commit(Change(graph=[unedge]))
                return False
            to = must_move(run.id, run.state, run.revoke, Action.TTL_EXPIRE)
            now = self.kernel.clock.now_ms()
            ended = self.kernel.apply(run, to, {"ttl_due_at": minute * 60_000}, now)
            try:
                self.kernel.commit(Change(leases=[over(run, ended)], graph=[unedge]))
            except Conflict:
                continue
            return True
        return False

    # ------------------------------------------------- the creator stopped

    def stop_children(self, event: LeaseEnded, context: Context) -> None:
        """A stream reaction: a lease that ends stopped or lost (_CREATOR_STOPS) stops the
        open runs of the tasks it delegated (`parent_stopped`), whose own leases, so ended,
        stop theirs in turn. Its children are read from its delegation edges a page at a time
        (_stop_page); a replay finds them ended."""
        new = event.lease
        if event.reason not in _CREATOR_STOPS:
            return
        if ends_orphan(new):
            return  # its filing died before its task: it never ran, so delegated nothing
        self._stop_page(new, None)

    def continue_stop(self, event: GraphMoved, context: Context) -> None:
        """A stream reaction to a stopped lease's graph row: its `stop_after` moved on, so
        the next page of its children is stopped (the row is keyed by the lease id)."""
        old, new = event.before, event.row
        after = new.stop_after
        if after is None or (old is not None and old.stop_after == after):
            return
        creator = self.leases.get_lease(new.task_id)
        if creator is None or creator.end_reason not in _CREATOR_STOPS:
            return
        self._stop_page(creator, after)

    def _stop_page(self, creator: Lease, after: str | None) -> None:
        """The children after `after` (one Query of at most STOP_PAGE edges): each stop a
        conditional write on the run as read, tried at most STOP_TRIES times. A full page may
        have more behind it: the lease's graph row's `stop_after` moves on to its last child
        (only forward: a replayed page, or a rival's, leaves it be), and the stream hands that
        change to continue_stop. So each record does a bounded page, whatever the count."""
        page = self.graph.graph_edges(creator.id, "delegated", STOP_PAGE, after)
        for child_id in page:
            self._stop_child(child_id, creator)
        if len(page) < STOP_PAGE:
            return
        advance = Advance(creator.id, name="stop_after", to=page[-1])
        with contextlib.suppress(Conflict):  # already past it: this page ran before
            self.kernel.commit(Change(graph=[advance]))

    def _stop_child(self, child_id: str, creator: Lease) -> None:
        for _ in range(STOP_TRIES):
            task = self.tasks.get_task(child_id)
            run = self.kernel.newest_lease(task) if task is not None else None
            if run is None or run.state.terminal:
                return
            to = must_move(run.id, run.state, run.revoke, Action.PARENT_STOP)
            now = self.kernel.clock.now_ms()
            data = {"creator_lease_id": creator.id, "creator_end_reason": str(creator.end_reason)}
            ended = self.kernel.apply(run, to, data, now)
            try:
                self.kernel.commit(Change(leases=[over(run, ended)]))
            except Conflict:
                continue  # the run moved meanwhile: judged again on what it is now
            self.kernel.counters["children_stopped"] += 1
            return

    # ------------------------------------------------------------ the claim gate

    def gate_created(self, lease: Lease, kind: ReportKind, body: dict[str, Any]) -> dict[str, Any]:
        """Before a completion's write: every task `created_task_ids` names, by its id or
        its key, must be a task of the lease's space filed with this lease's token; the
        report carries their ids. An ended lease answers its replay: a key there is read as
        its id (when it names a task of the lease's space) so that the replay is the same
        report as the first, and is refused as any other report is when it is not."""
        claimed = (body.get("created_task_ids") or []) if kind is ReportKind.COMPLETE else []
        if not claimed:
            return body
        refs = [str(x) for x in claimed]
        if lease.state.terminal:
            ids = [self._replayed(lease.space, ref) for ref in refs]
        else:
            ids = self._gate_created(lease, refs)
        return {**body, "created_task_ids": ids}

    def _replayed(self, space: str, ref: str) -> str:
        found = self.keys.task_in(space, ref) if is_task_key(ref) else None
        return ref if found is None else found.id

    def scan_after(
        self, before: Lease, done: Lease, kind: ReportKind, body: dict[str, Any]
    ) -> None:
        if kind is ReportKind.COMPLETE and not before.state.terminal and done.state.terminal:
            self._scan_result(done, body.get("result"))

    def _gate_created(self, lease: Lease, claimed: list[str]) -> list[str]:
        """The ids of the claimed tasks, in the order claimed; one read each (a key of a
        space other than the lease's reads nothing and answers as an unknown id does)."""
        if len(claimed) > MAX_CREATED_TASK_IDS:
            raise ValidationFailed(f"created_task_ids: at most {MAX_CREATED_TASK_IDS}")
        bad: dict[str, str] = {}
        ids: dict[str, str] = {}
        for task_id in dict.fromkeys(claimed):
            if derived_outside(task_id, (lease.space,)):
                found = None  # another space's, from the id alone: not read
            elif is_task_key(task_id):
                found = self.keys.task_in(lease.space, task_id)
            else:
                found = self.tasks.get_task(task_id) if len(task_id) <= 128 else None
            if found is None or found.space != lease.space:
                bad[task_id] = NOT_IN_SPACE
            elif found.created_by_lease != lease.id:
                bad[task_id] = "was not created with this lease's token"
            else:
                ids[task_id] = found.id
        if not bad:
            return [ids[ref] for ref in claimed]
        # The report may have started from a copy of its lease that shows it held: nothing is
        # refused or recorded on a copy. On the table's row, an ended lease's report is its
        # replay (or stale), which the report's own step answers.
        if self.kernel.lease(lease.id).state.terminal:
            return [self._replayed(lease.space, ref) for ref in claimed]
        self.timeline.put_event(
            self.kernel.event(
                lease,
                TASK_COMPLETION_HALLUCINATION_BLOCKED,
                {"task_ids": list(bad), "why": bad},
            )
        )
        self.kernel.counters["hallucination_blocked"] += 1
        named = ", ".join(f"{k} ({v})" for k, v in bad.items())
        raise UnverifiedCreatedTasks(
            f"created_task_ids: {named}; the lease is unchanged, send a corrected report"
        )

    def _scan_result(self, lease: Lease, result: Any) -> None:
        """Advisory: task-id-shaped strings in the result that name no task of the lease's
        space are recorded (another space's are, whether or not they exist, unread)."""
        if result is None:
            return
        text = result if isinstance(result, str) else repr(result)
        found = list(dict.fromkeys(TASK_ID_SHAPE.findall(text[:MAX_SCANNED_CHARS])))
        missing = [x for x in found[:MAX_SCANNED_IDS] if not self._in_space(x, lease.space)]
        if missing:
            self.timeline.put_event(
                self.kernel.event(
                    lease, TASK_COMPLETION_HALLUCINATION_SUSPECTED, {"task_ids": missing}
                )
            )

    def _in_space(self, task_id: str, space: str) -> bool:
        if derived_outside(task_id, (space,)):
            return False
        task = self.tasks.get_task(task_id)
        return task is not None and task.space == space
