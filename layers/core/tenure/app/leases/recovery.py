"""Recovery: the sweeper's verdict on a silent lease — lost, requeued under fence + 1, or
exhausted once its claims have used up the job's max_attempts (the task then needs attention;
docs/fencing-and-timing.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.kernel import over
from tenure.app.ports import Change, HoldOp, JobWrite, TaskWrite
from tenure.domain.errors import Conflict
from tenure.domain.events import TASK_RUN_LEASE_RECOVERY_EXHAUSTED
from tenure.domain.model import Job, Lease, Pool
from tenure.domain.states import EndReason, OnExpiry
from tenure.domain.tasks import next_version
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

_OPERATOR_ENDS = (EndReason.CANCELLED, EndReason.KILLED)


class Recovery:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def expire(self, lease: Lease, pool: Pool) -> Lease | None:
        """End a held lease whose holder went silent.

        Returns None when the lease moved on first (a report won the race): nothing expired.
        """
        try:
            change = self._expiry_change(lease, pool, self.kernel.clock.now_ms())
            self.kernel.commit(change)
        except Conflict:
            return None
        return change.leases[0].new

    def _expiry_change(self, lease: Lease, pool: Pool, now: int) -> Change:
        action = Action.EXPIRE_FAIL if pool.on_expiry is OnExpiry.FAIL else Action.EXPIRE
        to = must_move(lease.id, lease.state, lease.revoke, action)
        if not to.requeue:
            # Ended the way an operator's cancel or kill asked, or failed as worker_lost.
            data: dict[str, object] = (
                {"by": "sweeper"} if to.end_reason in _OPERATOR_ENDS else {"on_expiry": "fail"}
            )
            return Change(leases=[over(lease, self.kernel.apply(lease, to, data, now))])
        job = self.kernel.job_at(lease)
        recovery = job.recovery_count + 1
        # Counted before this expiry is added: the claims so far are attempt + recovery_count
        # (each expiry minted one more), so max_attempts 3 allows three claims in all.
        exhausted = job.attempt + job.recovery_count >= job.max_attempts
        requeued: dict[str, object] = {
            "on_expiry": "requeue",
            "recovery_count": recovery,
            "exhausted": exhausted,
        }
        change = Change(leases=[over(lease, self.kernel.apply(lease, to, requeued, now))])
        if exhausted:
            return self._exhausted(change, job, recovery, now)
        return self.kernel.with_successor(change, lease, recovered=True, job=job)

    def _exhausted(self, change: Change, job: Job, recovery: int, now: int) -> Change:
        jobs = [JobWrite(replace(job, recovery_count=recovery, exhausted=True), job.fence)]
        tasks: list[TaskWrite] = []
        if job.task_id is not None:
            task = self.kernel.task(job.task_id)
            flagged = next_version(
                task,
                TASK_RUN_LEASE_RECOVERY_EXHAUSTED,
                {
                    "job_id": job.id,
                    "attempt": job.attempt,
                    "recovery_count": recovery,
                    "max_attempts": job.max_attempts,
                },
                now,
                attention=True,
            )
            tasks.append(TaskWrite(flagged, expect_job_id=job.id))
        # Parked: claims skip it and the scheduler counts it (ClaimGate, app/dispatch_controls.py).
        holds = [HoldOp("attention", job.task_id, True)] if job.task_id is not None else []
        return Change(leases=change.leases, jobs=jobs, tasks=tasks, holds=holds)
