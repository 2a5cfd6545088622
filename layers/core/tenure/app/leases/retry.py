"""Retry on failure: a failing final report on a pool that retries failures opens the task's
next run (attempt + 1, claimable after the pool's backoff) in the report's own commit."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.leases.reports import Ending
from tenure.app.ports import Change
from tenure.app.runs import RunStart
from tenure.domain.events import LEASE_RETRY_SCHEDULED
from tenure.domain.retry import RetryPolicy, retries
from tenure.domain.states import LeaseState, SubjectKind

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.runs import Runs


class Retries:
    def __init__(self, kernel: Kernel, runs: Runs) -> None:
        self.kernel = kernel
        self.runs = runs

    def on_failure(self, ending: Ending) -> Ending:
        """A Completion `contribute` stage. The pool's policy is read from its cached row, so
        a pool that does not retry (the default) adds no read and no write. The new run's rows
        are conditional with the report's: the task must still point at this lease's job and
        the job at this lease, so a report that loses a race (an expiry, a replay) schedules
        nothing."""
        lease, report = ending.before, ending.report
        if ending.ended.state is not LeaseState.FAILED:
            return ending
        if lease.subject_kind is not SubjectKind.TASK or lease.task_id is None:
            return ending
        pool = self.kernel.pool(lease.pool)
        policy = RetryPolicy.of(pool.retry)
        if not policy.on_failure:
            return ending
        task = self.kernel.task(lease.task_id)
        job = self.kernel.job_at(lease, task)
        if not retries(policy, lease.attempt, job.max_attempts, report):
            return ending
        if task.job_id != job.id:
            return ending  # the task has moved on to another run; this one is not its to retry
        now = self.kernel.clock.now_ms()
        not_before = now + policy.backoff_ms(lease.attempt, self.kernel.ids.jitter())
        run = RunStart(
            attempt=lease.attempt + 1,
            recovery_count=job.recovery_count,
            retry_depth=lease.retry_depth,
            previous_lease_id=lease.id,
            follows_as=LEASE_RETRY_SCHEDULED,
            follows_data={"attempt": lease.attempt + 1, "not_before": not_before},
            priority=lease.claim_priority,
            # The run's own controls, where it named them (else the task's, as at filing).
            expires_in_seconds=lease.expires_in_seconds,
            max_run_seconds=lease.max_run_seconds,
        )
        _, new, opened = self.runs.run_change(
            task,
            pool,
            create_task=False,
            expect_job_id=job.id,
            job_checks=[(job.id, lease.id)],
            not_before=not_before,
            run=run,
        )
        marked = replace(
            ending.ended,
            event_data={
                **(ending.ended.event_data or {}),
                "retry_scheduled": True,
                "retry_lease_id": new.id,
            },
        )
        return replace(ending, ended=marked).with_rows(
            Change(
                leases=opened.leases,
                jobs=opened.jobs,
                tasks=opened.tasks,
                job_checks=opened.job_checks,
            )
        )
