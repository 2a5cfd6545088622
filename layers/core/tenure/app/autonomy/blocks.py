"""Typed blocks and the breaker's escalation (the block that brings its kind's count on a task
to the instance's `block_recurrence_limit` sends the task to needs_attention); recover and
expiry: breaker.py.

A task's blocks live on its own row (`Task.blocks`: id → record, bounded), so placing,
clearing and escalating are each one conditional write of that row (on its version), and
blocking with the running lease's token adds that lease's release to the same transaction.
The scheduler row's `blocked` set names the tasks that hold an open block; it is a hint for
the claim gate, not the truth: a claim that meets a candidate of such a task re-reads the
task's row (one item) and skips it only while an open block still counts — so a transient
block stops counting the instant it expires, and a stale entry costs one read, never a
wrongly parked run. The sweeper finalizes expired blocks later (bounded per pass).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenure.app.leases.reports import normalized
from tenure.app.ports import Change, Clock, HoldOp, SchedulerState, TaskWrite
from tenure.app.rows import Committer, GraphRows, LeaseRows, SweeperRows, TaskRows
from tenure.app.runs import RunStart
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    Conflict,
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    NotFound,
    Unavailable,
    ValidationFailed,
)
from tenure.domain.events import TASK_BLOCK_CLEARED, TASK_BLOCKED, TASK_ESCALATED, TASK_RUN_RELEASED
from tenure.domain.model import Lease, Principal, Task
from tenure.domain.states import HELD, ReportKind
from tenure.domain.tasks import next_version
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.reports import Reports
    from tenure.app.runs import Runs
    from tenure.app.tasks.graph import Graph

BLOCK_KINDS = ("transient", "dependency_external", "needs_input", "error")
MAX_OPEN_BLOCKS = 20
# Closed blocks kept on the row for `?all=true` (oldest dropped first); open ones never are.
MAX_KEPT_BLOCKS = 50
MAX_REASON_CHARS = 2000
MAX_EXPIRES_IN_SECONDS = 30 * 86_400
# A block write loses its condition only to another write of the same task row that landed; ten
# tries outlast a burst of that many writers on one task (the race test clears eight at once),
# and past them the caller gets 503 `unavailable` with Retry-After, never an endless loop.
BLOCK_TRIES = 10
# How many blocked tasks one sweeper pass looks at for expired transient blocks.
EXPIRY_PER_PASS = 100


@record
class EventWait:
    """What an `event` block waits for, and its id (chosen before the block is written: its
    wait row is written first, app/flow/events.py)."""

    name: str
    key: str
    block_id: str


def counting(block: dict[str, Any], now: int) -> bool:
    """An open block counts until it is cleared or, for a transient one, until it expires."""
    if block.get("state") != "open":
        return False
    expires = block.get("expires_at")
    return expires is None or int(expires) > now


def open_blocks(task: Task, now: int) -> list[dict[str, Any]]:
    blocks = [b for b in (task.blocks or {}).values() if counting(b, now)]
    return sorted(blocks, key=lambda b: (int(b["created_at"]), str(b["id"])))


def _kept(blocks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    closed = sorted(
        (b for b in blocks.values() if b.get("state") != "open"),
        key=lambda b: int(b.get("closed_at") or b["created_at"]),
    )
    drop = {b["id"] for b in closed[: max(0, len(blocks) - MAX_KEPT_BLOCKS)]}
    return {k: v for k, v in blocks.items() if k not in drop}


def placed_by(block: dict[str, Any]) -> dict[str, str]:
    """Who placed the block: `{kind: "lease", id: <lease id>}` or `{kind: "operator", id:
    <token id>}` (a block written before placed_by was recorded says so by its lease_id)."""
    recorded = block.get("placed_by")
    if isinstance(recorded, dict):
        return {"kind": str(recorded["kind"]), "id": str(recorded["id"])}
    if block.get("lease_id"):
        return {"kind": "lease", "id": str(block["lease_id"])}
    return {"kind": "operator", "id": str(block.get("created_by") or "")}


def block_out(block: dict[str, Any], now: int) -> dict[str, Any]:
    """A block as the API shows it (its times ISO 8601, as every API time); an expired open
    transient block reads as `expired`."""
    shown = dict(block)
    shown["placed_by"] = placed_by(block)
    if shown.get("state") == "open" and not counting(shown, now):
        shown["state"] = "expired"
        shown["closed_at"] = shown.get("expires_at")
        shown["closed_by"] = "expiry"
    for key in ("created_at", "expires_at", "closed_at"):
        if shown.get(key) is not None:
            shown[key] = fencing.iso_ms(int(shown[key]))
    return shown


def block_reasons(task: Task, now: int) -> list[dict[str, Any]]:
    """A read's `blocked_reasons` entries for the task's counting blocks."""
    return [
        {"source": "block", "block_id": b["id"], "kind": b["kind"], "reason": b["reason"]}
        for b in open_blocks(task, now)
    ]


def has_open_block(task: Task, now: int) -> bool:
    """Auto-enqueue waits while a block counts: its clear (or expiry) resumes the task."""
    return bool(open_blocks(task, now))


def held_by_block(
    tasks: TaskRows, clock: Clock
) -> Callable[[tuple[str, ...], SchedulerState], bool]:
    """The claim gate's block hold. The chain starts with the lease's own task (only task
    leases have one); blocks hold that task alone, not its descendants. The scheduler row's
    `blocked` set is the hint; the task row (one read) is the truth."""

    def held(chain: tuple[str, ...], gate: SchedulerState) -> bool:
        if not chain or chain[0] not in gate.blocked:
            return False
        task = tasks.get_task(chain[0])
        return task is not None and bool(open_blocks(task, clock.now_ms()))

    return held


class Blocks:
    """Placing, listing, clearing and closing a task's typed blocks; the breaker's
    escalation; auto-resume when the last cause clears."""

    def __init__(
        self,
        kernel: Kernel,
        runs: Runs,
        graph: Graph,
        reports: Reports,
        *,
        committer: Committer,
        graph_rows: GraphRows,
        leases: LeaseRows,
        sweeper: SweeperRows,
        tasks: TaskRows,
    ) -> None:
        self.graph = graph
        self.kernel = kernel
        self.committer = committer
        self.graph_rows = graph_rows
        self.leases = leases
        self.sweeper = sweeper
        self.tasks = tasks
        self.reports = reports
        self.runs = runs

    # ------------------------------------------------------------------ reading

    def list_blocks(
        self, actor: Principal, task_id: str, all: bool = False
    ) -> list[dict[str, Any]]:
        task = self._blockable(actor, task_id, "read")
        now = self.kernel.clock.now_ms()
        kept = sorted((task.blocks or {}).values(), key=lambda b: (int(b["created_at"]), b["id"]))
        shown = [block_out(b, now) for b in kept]
        return shown if all else [b for b in shown if b["state"] == "open"]

    def task_for_block(self, actor: Principal, task_id: str) -> Task:
        """The task, when the caller may place a block on it (as block_task checks)."""
        return self._blockable(actor, task_id, "member")

    def _blockable(self, actor: Principal, task_id: str, role: str) -> Task:
        """Members (read for listing) of the task's space, or the token of a lease on it —
        or of the lease that filed it (a worker minding the work it delegated)."""
        if actor.kind == "lease":
            lease = self.kernel.owned.acting_lease(actor)
            task = self.kernel.task(task_id)
            if task.id != lease.task_id and task.created_by_lease != lease.id:
                raise LeaseTokenMismatch(f"this lease token is not for a lease on {task_id}")
            return task
        authz.require_role(actor, role)
        task = self.kernel.task(task_id)
        authz.require_operator(actor, role, task.space)
        return task

    # ---------------------------------------------------------------- blocking

    def block_task(
        self,
        actor: Principal,
        task_id: str,
        kind: str,
        reason: str,
        expires_in_seconds: int | None = None,
        wait: EventWait | None = None,
    ) -> dict[str, Any]:
        """Place a block; with the token of the task's held lease, release that lease in the
        same transaction (no attempt used). The block that brings its kind's count to the
        instance's `block_recurrence_limit` escalates the task to needs_attention. An `event`
        block (app/flow/events.py places it, `wait` naming the event and the block's id) is
        not counted: waiting for an event is no sign of a loop."""
        task = self._blockable(actor, task_id, "member")
        fencing.refuse_token_fields({"reason": reason})
        if kind not in BLOCK_KINDS and not (kind == "event" and wait is not None):
            raise ValidationFailed(f"kind: one of {', '.join((*BLOCK_KINDS, 'event'))}")
        if not reason.strip() or len(reason) > MAX_REASON_CHARS:
            raise ValidationFailed(f"reason: 1 to {MAX_REASON_CHARS} characters")
        if expires_in_seconds is not None:
            if kind != "transient":
                raise ValidationFailed("expires_in_seconds: only a transient block expires")
            if not 1 <= expires_in_seconds <= MAX_EXPIRES_IN_SECONDS:
                raise ValidationFailed(
                    f"expires_in_seconds: between 1 and {MAX_EXPIRES_IN_SECONDS}"
                )
        # Read fresh (one small row): a PATCH /instance answered by another warm instance
        # holds for this very block, not after this instance's cache runs out.
        limit = self.kernel.catalog.fresh_instance().block_recurrence_limit
        for _ in range(BLOCK_TRIES):
            now = self.kernel.clock.now_ms()
            if len(open_blocks(task, now)) >= MAX_OPEN_BLOCKS:
                raise ValidationFailed(f"kind: a task holds at most {MAX_OPEN_BLOCKS} open blocks")
            held = self._held_lease(actor, task)
            block: dict[str, Any] = {
                "id": wait.block_id if wait else self.kernel.ids.new_id("blk"),
                "task_id": task.id,
                "kind": kind,
                "reason": reason,
                "state": "open",
                "created_at": now,
                "created_by": actor.token_id,
                "actor_kind": actor.kind,
            }
            if actor.kind == "lease":
                block["lease_id"] = actor.lease_id
            block["placed_by"] = (
                {"kind": "lease", "id": str(actor.lease_id)}
                if actor.kind == "lease"
                else {"kind": "operator", "id": str(actor.token_id)}
            )
            if expires_in_seconds is not None:
                block["expires_at"] = now + expires_in_seconds * 1000
            counts = dict(task.block_counts or {})
            if wait is not None:
                block.update(event=wait.name, key=wait.key)
            else:
                counts[kind] = int(counts.get(kind, 0)) + 1
            escalate = wait is None and limit > 0 and counts[kind] >= limit and not task.attention
            data: dict[str, Any] = {
                "block_id": block["id"],
                "kind": kind,
                "reason": reason,
                "by": actor.token_id,
                "count": counts.get(kind, 0),
            }
            if wait is not None:
                data.update(event=wait.name, key=wait.key)
            if actor.kind == "lease":
                data["by_lease"] = actor.lease_id  # wake-creator skips its creator's own block
            event = TASK_BLOCKED
            change = Change()
            if held is not None:
                change = self._release_for_block(held, block["id"])
                data["released_lease_id"] = held.id
                event = TASK_RUN_RELEASED
            if escalate:
                data["block_recurrence_limit"] = limit
                event = TASK_ESCALATED
            new = next_version(
                task,
                event,
                data,
                now,
                blocks=_kept({**(task.blocks or {}), block["id"]: block}),
                block_counts=counts,
                attention=task.attention or escalate,
            )
            # One op on the scheduler row per transaction: an escalated task is held by the
            # attention set (recover closes its blocks), any other by the blocked set.
            hold = (
                HoldOp("attention", task.id, True) if escalate else HoldOp("blocked", task.id, True)
            )
            change = replace(
                change,
                tasks=[
                    *change.tasks,
                    TaskWrite(new, expect_job_id=task.job_id, expect_version=task.version),
                ],
                holds=[hold],
            )
            try:
                self.kernel.commit(change)
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                task = self.kernel.task(task_id)
                continue
            self.kernel.counters["blocks_placed"] += 1
            return block_out(block, now)
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)

    def _held_lease(self, actor: Principal, task: Task) -> Lease | None:
        """The lease to release: the caller's own, when it is the task's held run."""
        if actor.kind != "lease":
            return None
        lease = self.kernel.lease(actor.lease_id or "")
        if lease.state.terminal:
            raise InvalidTransition(f"lease {lease.id} already ended {lease.state}")
        # A cancelling lease is on its way out: the block stands alone (nothing to release).
        if lease.task_id != task.id or lease.state not in HELD:
            return None
        job = self.kernel.job_of(lease, task)
        if job is None or job.lease_id != lease.id or task.job_id != job.id:
            raise InvalidTransition(f"lease {lease.id} is not the task's current run")
        return lease

    def _release_for_block(self, lease: Lease, block_id: str) -> Change:
        report = normalized(ReportKind.RELEASE, {"reason": f"blocked: {block_id}"})
        fp = f"block:{block_id}"
        return self.reports.final_ending(lease, ReportKind.RELEASE, report, fp, None).change()

    # ---------------------------------------------------------------- clearing

    def clear_block(
        self, actor: Principal, task_id: str, block_id: str, note: str | None = None
    ) -> dict[str, Any]:
        task = self._blockable(actor, task_id, "member")
        fencing.refuse_token_fields({"note": note})
        if note is not None and len(note) > MAX_REASON_CHARS:
            raise ValidationFailed(f"note: at most {MAX_REASON_CHARS} characters")
        for _ in range(BLOCK_TRIES):
            now = self.kernel.clock.now_ms()
            block = (task.blocks or {}).get(block_id)
            if block is None:
                raise NotFound(f"block {block_id} does not exist on task {task_id}")
            if actor.kind == "lease":
                self._may_clear(actor, block, task)
            if block.get("state") != "open":
                return block_out(block, now)  # already closed: as it is (no-op)
            closed = {
                **block,
                "state": "cleared",
                "closed_at": now,
                "closed_by": "clear",
                "cleared_by": actor.token_id,
            }
            if note:
                closed["note"] = note
            try:
                task = self.close(task, [closed], TASK_BLOCK_CLEARED, actor.token_id, note)
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                task = self.kernel.task(task_id)
                continue
            self.resume_if_ready(task)
            return block_out(closed, now)
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)

    def _may_clear(self, actor: Principal, block: dict[str, Any], task: Task) -> None:
        """A lease token clears only what a lease placed: one of this task (an earlier run's
        block, say), or the clearing lease itself (a creator minding the task it filed). An
        operator's block waits for a person, or a worker could lift the very hold put on it
        and send its task back to the queue."""
        placer = placed_by(block)
        if placer["kind"] == "lease":
            if placer["id"] == actor.lease_id:
                return
            lease = self.leases.get_lease(placer["id"])
            if lease is not None and lease.task_id == task.id:
                return
        raise Forbidden(
            "a lease token clears only blocks a lease of this task placed; this one takes a member"
        )

    def close(
        self,
        task: Task,
        closed: list[dict[str, Any]],
        event: str,
        by: str,
        note: str | None,
        extra: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Task:
        now = self.kernel.clock.now_ms()
        blocks = {**(task.blocks or {}), **{b["id"]: b for b in closed}}
        new = next_version(
            task,
            event,
            {
                "block_ids": [b["id"] for b in closed],
                "by": by,
                **({"note": note} if note else {}),
                **(extra or {}),
            },
            now,
            blocks=_kept(blocks),
            **fields,
        )
        still = bool(open_blocks(new, now))
        holds = [] if still else [HoldOp("blocked", task.id, False)]
        if fields.get("attention") is False and task.attention:
            holds = [HoldOp("attention", task.id, False)]
        self.kernel.commit(
            Change(
                tasks=[TaskWrite(new, expect_job_id=task.job_id, expect_version=task.version)],
                holds=holds,
            )
        )
        if fields.get("attention") is False and not still:
            # A transaction names the scheduler row once; a stale `blocked` entry costs one
            # read per claim look until removed, never a wrongly held run.
            self.committer.commit(Change(holds=[HoldOp("blocked", task.id, False)]))
        return new

    def resume_if_ready(self, task: Task) -> Lease | None:
        """Auto-resume: no blocking cause left → an opted-in task with no open run gets one
        pending lease, through the at-most-one-open-run path (the task row must still name
        the run read, so concurrent clears converge on one run). A parked pending lease needs
        nothing: the claim gate stops skipping it."""
        now = self.kernel.clock.now_ms()
        if task.attention or open_blocks(task, now):
            return None
        if not task.auto_enqueue_on_ready or task.pool is None:
            return None
        if self.graph_rows.get_graph(task.id).blockers_outstanding:
            return None
        held = self.sweeper.get_scheduler()
        if self.graph.paused_by(task, held.paused_tasks) is not None:
            return None
        current = self.kernel.newest_lease(task)
        if current is not None and current.state.active:
            return None
        if current is not None and current.outcome == "success":
            return None  # done: nothing to resume
        fresh = self.tasks.get_task(task.id)
        if fresh is None or fresh.job_id != task.job_id:
            return None
        checks = [(fresh.job_id, current.id)] if fresh.job_id and current else []
        try:
            _, lease = self.runs.open_run(
                fresh,
                self.kernel.catalog.pool(task.pool),
                create_task=False,
                expect_job_id=fresh.job_id,
                job_checks=checks,
                run=RunStart(),
            )
        except Conflict:
            return None  # another clear (or an operator) opened the run first
        self.kernel.counters["auto_enqueued"] += 1
        return lease
