"""The unblock-loop breaker's other half and the blocks' lifecycle: recover of an escalated
task, the sweeper's finalizing of expired transient blocks, and the reset of the block counts
on a successful completion (from the stream). Placing blocks and escalating: Blocks, in
app/autonomy/blocks.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.autonomy.blocks import BLOCK_TRIES, EXPIRY_PER_PASS, counting, open_blocks
from tenure.app.ports import Change, HoldOp, TaskWrite
from tenure.app.rows import Committer, SweeperRows, TaskRows
from tenure.app.tasks.filing import TaskView
from tenure.domain import authz, fencing
from tenure.domain.errors import Conflict, InvalidTransition, Unavailable
from tenure.domain.events import TASK_BLOCK_COUNTS_RESET, TASK_BLOCK_EXPIRED, TASK_RECOVERED
from tenure.domain.model import Principal
from tenure.domain.tasks import next_version

if TYPE_CHECKING:
    from tenure.app.autonomy.blocks import Blocks
    from tenure.app.kernel import Kernel
    from tenure.app.reactions import Context
    from tenure.app.tasks.graph import Graph
    from tenure.domain.events import SuccessReported


class Breaker:
    """Recover of an escalated task, the sweeper's finalizing of expired transient blocks,
    and the reset of the block counts on a successful completion (a stream reaction)."""

    def __init__(
        self,
        kernel: Kernel,
        graph: Graph,
        blocks: Blocks,
        *,
        committer: Committer,
        sweeper: SweeperRows,
        tasks: TaskRows,
    ) -> None:
        self.kernel = kernel
        self.committer = committer
        self.sweeper = sweeper
        self.tasks = tasks
        self.graph = graph
        self.blocks = blocks

    # ---------------------------------------------------------------- recover

    def recover_task(self, actor: Principal, task_id: str, note: str | None) -> TaskView:
        authz.require_role(actor, "member")
        task = self.kernel.task(task_id)
        authz.require_operator(actor, "member", task.space)
        fencing.refuse_token_fields({"note": note})
        for _ in range(BLOCK_TRIES):
            if not task.attention:
                raise InvalidTransition(f"task {task.key} is not in needs_attention")
            now = self.kernel.clock.now_ms()
            closed = [
                {
                    **b,
                    "state": "cleared",
                    "closed_at": now,
                    "closed_by": "recover",
                    "cleared_by": actor.token_id,
                    **({"note": note} if note else {}),
                }
                for b in (task.blocks or {}).values()
                if b.get("state") == "open"
            ]
            try:
                task = self.blocks.close(
                    task, closed, TASK_RECOVERED, actor.token_id, note, attention=False
                )
            except Conflict:
                self.kernel.counters["lost_writes"] += 1
                task = self.kernel.task(task_id)
                continue
            self.blocks.resume_if_ready(task)
            return self.graph.get_task(actor, task_id)
        raise Unavailable(f"task {task_id} kept changing; try again", retry_after=1)

    # ---------------------------------------------------------------- expiry (sweeper)

    def finalize_expired_blocks(self, limit: int = EXPIRY_PER_PASS) -> list[str]:
        """Close transient blocks that have expired (they stopped counting already) and
        resume their tasks; at most `limit` blocked tasks per pass."""
        done: list[str] = []
        for task_id in sorted(self.sweeper.get_scheduler().blocked)[:limit]:
            task = self.tasks.get_task(task_id)
            if task is None:
                continue
            now = self.kernel.clock.now_ms()
            expired = [
                {**b, "state": "expired", "closed_at": int(b["expires_at"]), "closed_by": "expiry"}
                for b in (task.blocks or {}).values()
                if b.get("state") == "open" and not counting(b, now)
            ]
            if not expired:
                if not open_blocks(task, now):
                    self.committer.commit(Change(holds=[HoldOp("blocked", task.id, False)]))
                continue
            try:
                task = self.blocks.close(task, expired, TASK_BLOCK_EXPIRED, "sweeper", None)
            except Conflict:
                continue  # changed meanwhile: next pass
            self.blocks.resume_if_ready(task)
            done.append(task_id)
        return done

    # ------------------------------------------------------------- reactions

    def reset_breaker(self, event: SuccessReported, context: Context) -> None:
        """A successful completion resets the task's block counts (the breaker's memory).
        The first try reads the task as the record's context has it (once for all its
        reactions); a try that lost a race reads it again."""
        new = event.lease
        if new.task_id is None:
            return  # derive tells a reported success only of a task's lease
        for attempt in range(BLOCK_TRIES):
            # The first try reads as the record's context has it; a retry reads afresh.
            fresh = attempt > 0
            task = self.tasks.get_task(new.task_id) if fresh else context.task(new.task_id)
            if task is None or not task.block_counts:
                return
            reset = next_version(
                task,
                TASK_BLOCK_COUNTS_RESET,
                {"lease_id": new.id},
                self.kernel.clock.now_ms(),
                block_counts=None,
            )
            try:
                self.kernel.commit(
                    Change(
                        tasks=[
                            TaskWrite(reset, expect_job_id=task.job_id, expect_version=task.version)
                        ]
                    )
                )
            except Conflict:
                continue
            return
