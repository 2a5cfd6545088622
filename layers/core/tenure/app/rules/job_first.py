"""A rule's firing written one row at a time, the job first, instead of in one transaction
(which bills each of its items twice, the job with the trigger's data among them).

The job's id is the occasion's (rule and scheduled time, SES message id or event id), and
its write lands only where no row is: it is the occasion's lock. It names the lease and the
task to come (their ids, the task's key) and holds what they are made from, so whoever finds
the job can finish the mint under those very ids: a delivery that lost the job's write to a
concurrent one, or a redelivery after a writer that stopped between its writes. The lease
and the task are each written only where no row is, and every writer builds the same rows
from the job, so whichever lands first stands and the others change nothing: one lease per
occasion, however often and however concurrently it arrives.

A task subject's lease is written before its task and marked task-pending, as filing writes
a task's first lease (app/leases/orphans.py): a claim hands it out only once it has read the
task. When no delivery has written the task by the time a claim takes the mint for dead (an
hour on, past AWS's own redeliveries of the occasion: app/leases/orphans.py), that claim voids
the task's id and ends the lease; a later delivery finds it ended so and mints the occasion
again under the next job of its chain (app/rules/firings.py `_current`).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.ports import Change, JobWrite, LeaseWrite, TaskWrite
from tenure.domain.errors import Conflict
from tenure.domain.model import Job, Lease, Task

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class JobFirst:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def lock(self, job: Job) -> bool:
        """Write the occasion's job, only if it has none: False when another delivery's job
        is there (then its lease is the occasion's, finished from that job)."""
        try:
            self.kernel.commit(Change(jobs=[JobWrite(job)]))
        except Conflict:
            return False
        return True

    def write(self, lease: Lease, task: Task | None) -> Lease:
        """The rest of a mint whose job this delivery wrote: the lease (marked task-pending
        when it has a task), then the task. A finisher that read the job may land either
        first, with the same rows: then this delivery finishes as it would."""
        lease = marked(lease, task)
        try:
            self.kernel.commit(Change(leases=[LeaseWrite(lease)]))
        except Conflict:
            return self.finish(self.kernel.lease(lease.id), lease, task)
        if task is not None:
            self._task(task)
        return lease

    def finish(self, found: Lease | None, lease: Lease, task: Task | None) -> Lease:
        """The occasion's lease, once its job is there: `found` (the lease row as read, or
        None when there is none yet) finished with `lease` and `task` (the rows the job
        names), each written only if missing. A lease a claim has taken (no mark) has its
        task; the task of a marked one is written (and loses if it is there after all)."""
        if found is None:
            lease = marked(lease, task)
            try:
                self.kernel.commit(Change(leases=[LeaseWrite(lease)]))
                found = lease
            except Conflict:
                found = self.kernel.lease(lease.id)  # a concurrent writer's, the same row
        if task is not None and found.tp:
            self._task(task)
        return found

    def _task(self, task: Task) -> None:
        # Lost only to the same task written by a concurrent delivery, or to a claim that
        # took the mint for dead and voided the id (it ends the lease, and the occasion's
        # next delivery mints it again): either way this delivery is done.
        with contextlib.suppress(Conflict):
            self.kernel.commit(Change(tasks=[TaskWrite(task, create=True)]))


def marked(lease: Lease, task: Task | None) -> Lease:
    """The lease as written ahead of its task: marked task-pending when it has one."""
    if task is None or lease.tp:
        return lease
    return replace(lease, tp=True)
