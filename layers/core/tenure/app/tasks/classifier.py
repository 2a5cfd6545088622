"""The classifier's completion stage: a classifier run's reported details, rendered by its
pinned version's output document, become the task's checks and properties."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.ports import Change, TaskWrite
from tenure.app.rows import TaskRows
from tenure.app.setup.versions import Versions, render
from tenure.domain.events import CLASSIFIER_OUTPUT_FAILED, TASK_CLASSIFIED
from tenure.domain.states import EndReason, PoolKind
from tenure.domain.tasks import next_version

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.reports import Ending


class Classifier:
    def __init__(self, kernel: Kernel, versions: Versions, *, tasks: TaskRows) -> None:
        self.kernel = kernel
        self.tasks = tasks
        self.versions = versions

    def with_classifier_output(self, ending: Ending) -> Ending:
        """Add to a successful completion's change the task's checks and properties, rendered
        from the reported details by the pinned version's output. Evaluating cannot fail (see
        `render`), and the task write only asks that the task still be on this run, which it
        is while the run's lease is held: the completion commits with it or not at all, and
        a lost race is judged again like any other (bounded, Kernel.settle)."""
        lease, ended, report = ending.before, ending.ended, ending.report
        if ended.end_reason is not EndReason.COMPLETED or ended.outcome != "success":
            return ending
        if lease.task_id is None or self.kernel.pool(lease.pool).kind is not PoolKind.CLASSIFIER:
            return ending
        output = (self.versions.pinned(lease).classifier or {}).get("output")
        if not output:
            return ending
        task = self.tasks.get_task(lease.task_id)
        if task is None or task.job_id != lease.job_id:
            return ending
        done = render(output, report.get("details") or {})
        now = self.kernel.clock.now_ms()
        data: dict[str, Any] = {
            "lease_id": lease.id,
            "pool_version": lease.pool_version,
            "checks": sorted(done.checks),
            "properties": sorted(done.properties),
        }
        if done.failed:
            data["failed"] = done.failed
        new = next_version(
            task,
            CLASSIFIER_OUTPUT_FAILED if done.failed else TASK_CLASSIFIED,
            data,
            now,
            checks={**task.checks, **done.checks},
            properties={**task.properties, **done.properties},
        )
        return ending.with_rows(Change(tasks=[TaskWrite(new, expect_job_id=task.job_id)]))
