"""Queue timeouts: a pending lease its filer gave `expires_in_seconds` ends cancelled with
`queue_timeout` once that passes unclaimed.

The sweeper finds such leases through the due index, in a partition of their own per pool
(store.keys.queue_expiry_pk), by their expiry instant, so a pass reads only what is due; each
ending is one conditional write on the lease's state, fence and version, so a claim landing at
the same moment wins or loses whole. A lease still marked task-pending whose task is not there
is the remnant of a filing that died between its two writes (app/leases/orphans.py): its
ending says so, and tells no task ending. The same pass drops the pool-row marks that no
pending lease needs any more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.kernel import over
from tenure.app.ports import Change
from tenure.app.rows import LeaseRows, PoolRows, QueueRows, TaskRows
from tenure.domain.errors import Conflict
from tenure.domain.model import PRIORITY_MARK_GRACE_MS, QUEUE_EXPIRY_MARK, Pool
from tenure.domain.outbound import ORPHAN
from tenure.domain.states import LeaseState
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.orphans import Orphans

# How many timed-out pending leases of one pool one pass ends at most; the rest wait a pass.
QUEUE_TIMEOUTS_PER_PASS = 200


class QueueTimeouts:
    """Ending the pending leases past their queue timeout, and dropping the pool-row marks
    no pending lease needs any more."""

    def __init__(
        self,
        kernel: Kernel,
        orphans: Orphans,
        *,
        leases: LeaseRows,
        pools: PoolRows,
        queues: QueueRows,
        tasks: TaskRows,
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.pools = pools
        self.queues = queues
        self.tasks = tasks
        self.orphans = orphans

    def expire_queued(self, pools: list[Pool]) -> tuple[list[str], int]:
        """End the pending leases past their queue timeout: (ended lease ids, lost races)."""
        ended: list[str] = []
        raced = 0
        now = self.kernel.clock.now_ms()
        for pool in pools:
            if QUEUE_EXPIRY_MARK not in (pool.queue_marks or {}):
                continue  # no lease with a queue timeout was filed here: nothing to read
            for lease_id in self.queues.queue_expiring(pool.name, now, QUEUE_TIMEOUTS_PER_PASS):
                lease = self.leases.get_lease(lease_id)  # consistent: is it still queued
                if (
                    lease is None
                    or lease.state is not LeaseState.PENDING
                    or lease.queue_expires_at is None
                    or lease.queue_expires_at > now
                ):
                    continue  # claimed or ended since the index was read
                data: dict[str, Any] = {"by": "sweeper", "queue_expires_at": lease.queue_expires_at}
                if lease.tp and self.tasks.get_task(lease.task_id or "") is None:
                    # Its filing wrote the lease but not (yet) the task: ended as an orphan
                    # (no task ending told) once its filing is taken for dead; until then it
                    # waits a pass, its task perhaps still on its way.
                    if not self.orphans.filing_died(lease, now):
                        continue
                    data[ORPHAN] = True
                to = must_move(lease.id, lease.state, lease.revoke, Action.QUEUE_TIMEOUT)
                new = self.kernel.apply(lease, to, data, now)
                try:
                    self.kernel.commit(Change(leases=[over(lease, new)]))
                except Conflict:
                    raced += 1  # a claim (or a cancel) landed first: that one stands
                    continue
                ended.append(lease.id)
        return ended, raced

    def drop_stale_marks(self, pools: list[Pool]) -> list[str]:
        """Drop the pool-row marks (`queue_marks`) whose kind of lease is no longer pending
        and none was filed for PRIORITY_MARK_GRACE_MS, so claims and passes stop reading
        for them; conditioned on the mark still being that old, so a filing landing
        meanwhile keeps it (the grace covers the index's lag behind a filing)."""
        dropped: list[str] = []
        now = self.kernel.clock.now_ms()
        cutoff = now - PRIORITY_MARK_GRACE_MS
        for pool in pools:
            for mark, at in sorted((pool.queue_marks or {}).items()):
                if at >= cutoff:
                    continue
                if mark == QUEUE_EXPIRY_MARK:
                    left = self.queues.queue_expiring(pool.name, _END_OF_TIME, 1)
                elif mark.isdigit():
                    left = self.queues.queue_candidates(pool.name, 1, priority=int(mark))
                else:
                    left = []  # a mark this code does not know: nothing reads for it
                if not left and self.pools.unmark_queue(pool.name, mark, cutoff):
                    dropped.append(f"{pool.name}:{mark}")
        return dropped


_END_OF_TIME = 10**13 - 1  # the largest 13-digit epoch ms: every expiry is before it
