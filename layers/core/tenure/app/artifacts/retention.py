"""Retention reclaim: an ended lease's logs and attachments go after its pool's retention;
the lease itself, and its subject's timeline, stay."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tenure.app.artifacts.attachments import upload_key
from tenure.app.rows import AttachmentRows, LeaseRows, PoolRows, RetentionRows
from tenure.domain.errors import Conflict
from tenure.domain.events import LEASE_RECLAIMED
from tenure.domain.model import Lease, Pool
from tenure.domain.transitions import moved

if TYPE_CHECKING:
    from tenure.app.artifacts.artifacts import Artifacts
    from tenure.app.kernel import Kernel

# Leases one sweeper pass reclaims at most (each is a few deletes: its objects, its streams).
RECLAIM_PER_PASS = 50
# A lease marked reclaimed whose clean-up did not finish (the pass died midway) is finished
# by a later pass once the mark is this old, so no live pass is raced for its deletes.
RECLAIM_STALL_MS = 10 * 60_000
# How far apart the clocks that stamp a pool's creation and its leases' ends may be (Lambda's
# are kept by NTP to within milliseconds): a pool younger than its retention less this has no
# lease that ended before the pass's cutoff. A clock stepped back further than this (a laptop's
# clock set by hand) delays such a lease's reclaim by the step; none is skipped for good.
CLOCK_SKEW_MS = 60_000


@dataclass
class Reclaimed:
    leases: list[str] = field(default_factory=list)
    finished: int = 0  # stalled reclaims of earlier passes, finished by this one
    left: int = 0  # due leases seen but left for a later pass (a lower bound)


class Retention:
    def __init__(
        self,
        kernel: Kernel,
        artifacts: Artifacts,
        *,
        attachments: AttachmentRows,
        leases: LeaseRows,
        pools: PoolRows,
        retention: RetentionRows,
    ) -> None:
        self.artifacts = artifacts
        self.kernel = kernel
        self.attachments = attachments
        self.leases = leases
        self.pools = pools
        self.retention = retention

    def reclaim_due(
        self, budget: int = RECLAIM_PER_PASS, pools: list[Pool] | None = None
    ) -> Reclaimed:
        """Reclaim up to `budget` leases whose pool's retention has passed since they ended,
        earliest first, from the ended index (never a Scan). `pools`: the pass's own list. A
        pool younger than its retention is not read: a lease ends after its pool is made."""
        now = self.kernel.clock.now_ms()
        out = Reclaimed()
        for pool in self.pools.list_pools() if pools is None else pools:
            cutoff = now - pool.retention_seconds * 1000
            if pool.created_at - CLOCK_SKEW_MS > cutoff:
                continue  # every lease of it ended after the cutoff: no read
            room = budget - len(out.leases)
            due = self.retention.ended_leases(pool.name, cutoff, max(room, 0) + 1)
            out.left += max(0, len(due) - max(room, 0))
            for lease_id in due[: max(room, 0)]:
                done = self._reclaim(lease_id, now)
                if done == "reclaimed":
                    out.leases.append(lease_id)
                elif done == "finished":
                    out.finished += 1
        return out

    def reclaim(self, lease_id: str) -> bool:
        """Reclaim one ended lease now; True when this call did it."""
        return self._reclaim(lease_id, self.kernel.clock.now_ms()) == "reclaimed"

    def _reclaim(self, lease_id: str, now: int) -> str:
        """A conditional write marks the lease first, so of two passes (retried, or
        concurrent) only one deletes anything and the timeline gets one `lease.reclaimed`."""
        lease = self.leases.get_lease(lease_id)
        if lease is None or not lease.state.terminal:
            return "skipped"
        if lease.reclaimed_at is not None:
            if now - lease.reclaimed_at < RECLAIM_STALL_MS:
                return "skipped"  # another pass is on it, or has just finished
            self._purge(lease)
            return "finished"
        mark = moved(lease, replace(lease, reclaimed_at=now), LEASE_RECLAIMED, {}, now)
        try:
            self.retention.mark_reclaimed(mark)
        except Conflict:
            return "skipped"  # another pass has it
        self._purge(lease)
        return "reclaimed"

    def _purge(self, lease: Lease) -> None:
        attachments = self.attachments.list_attachments(lease.id)
        if attachments and self.artifacts.blobs is not None:
            # The served bytes, and a presigned upload's that no listing checked yet.
            keys = [key for a in attachments for key in (a.key, upload_key(a.key))]
            self.artifacts.blobs.delete(keys)
        self.attachments.delete_attachments(lease.id, [a.id for a in attachments])
        if self.artifacts.log_sink is not None:
            self.artifacts.log_sink.delete(lease.id)
        self.retention.unindex_ended(lease.id)
