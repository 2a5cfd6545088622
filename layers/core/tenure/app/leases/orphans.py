"""A task's first lease met before its task: filing writes the lease (marked task-pending) and
then the task, each on its own, so a claim may meet the lease first, or meet one whose filing
died between its two writes.

A claim of a marked lease reads the task (consistently) before its write, and hands the lease
out only when the task is there: a task once written stays, so the claim's write, conditional
on the lease's state and fence as always, never gives out a lease without its task. The read
is the one the claim's answer makes anyway for its payload, made earlier and passed on.

When the task is not there and the lease is older than `ORPHAN_AFTER_MS` (a rule's mint:
`MINT_ORPHAN_AFTER_MS`, since its task comes with the occasion's redelivery), its filing is
taken to have died. The claim first voids the task's id — a conditional write that succeeds only
while no task holds it — so that the filing's task, should its write come after all, loses and
the filing answers an error instead of a task whose run was ended; then it ends the lease
(`lease.cancelled`), conditional on its state and fence, so two claims meeting the same lease
end it once. That write's event data names it an orphan's end: the lease's own event is told,
but no task ending (`task.cancelled`) and no task-level reaction, the task never having been
filed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.kernel import over
from tenure.app.ports import Change
from tenure.app.rows import TaskRows
from tenure.domain.errors import Conflict
from tenure.domain.model import Lease, Task, first_job_id
from tenure.domain.outbound import ORPHAN
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# How long after a marked lease was written its task may still be on its way. Filing writes
# the task right after the lease (two single writes, each under the store's bounded retry):
# a lease older than this without its task is the remnant of a filing that died in between.
ORPHAN_AFTER_MS = 10_000
# The same for a lease a rule minted (its job has a row of its own, not the task's implied
# first job): its task comes from the occasion's next delivery, which AWS makes only later —
# the inbound queue shows a mail again after its 300 s visibility timeout, five times in all,
# and Scheduler retries a rule's schedule for up to an hour. Voided before then, the task would
# lose to the void and the mail's or the schedule's work would be lost. A mint that no
# delivery finishes within the hour is ended then as a dead filing's is; a delivery after
# that (a mail redriven from the dead-letter queue later) mints the occasion again under a
# new job (app/rules/firings.py).
MINT_ORPHAN_AFTER_MS = 65 * 60_000
# A voided task id is kept this long (then the table's TTL deletes the row): far beyond any
# request's lifetime, so no filing still running can write the task afterwards.
VOID_KEEP_SECONDS = 86_400


class Orphans:
    def __init__(self, kernel: Kernel, *, tasks: TaskRows) -> None:
        self.kernel = kernel
        self.tasks = tasks

    def task_of(self, lease: Lease) -> Task | None:
        """The task of a lease marked task-pending, read consistently; None when it is not
        there, in which case the lease is not to be claimed now — and when it is old enough,
        it has been ended here (or by a rival claim) as the remnant of a dead filing."""
        if lease.task_id is None:
            return None
        task = self.tasks.get_task(lease.task_id)
        if task is not None:
            return task
        now = self.kernel.clock.now_ms()
        if not self.filing_died(lease, now):
            return None  # its task may still come, or came after all: the next look claims
        move = must_move(lease.id, lease.state, lease.revoke, Action.CANCEL)
        # Tagged in its own write: no task ending is told, nor any task reacted to, for it.
        data = {"by": "claim", "reason": "its filing ended before writing its task", ORPHAN: True}
        ended = self.kernel.apply(lease, move, data, now)  # its mark stays: it had no task
        try:
            self.kernel.commit(Change(leases=[over(lease, ended)]))
        except Conflict:
            return None  # a rival claim ended it first (or it moved on): that one stands
        self.kernel.counters["orphans_ended"] += 1
        return None

    def filing_died(self, lease: Lease, now: int) -> bool:
        """Whether the filing of this marked lease, whose task a consistent read just did not
        find, is taken for dead: the lease is old enough, and the task's id is now voided, so
        no task can ever come for it. False while its filing may still be writing the task,
        or when the task came after all."""
        if lease.task_id is None:
            return False
        minted = lease.job_id != first_job_id(lease.task_id)
        if now - lease.created_at < (MINT_ORPHAN_AFTER_MS if minted else ORPHAN_AFTER_MS):
            return False
        return self.tasks.void_task(lease.task_id, now // 1000 + VOID_KEEP_SECONDS)
