"""Where a lease's detail lives (its logs and attachments, in stores outside the table) and
who may see it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.ports import BlobStore, LogSink
from tenure.app.rows import RetentionRows
from tenure.domain import authz
from tenure.domain.errors import Conflict, InvalidTransition, UnsupportedRuntime
from tenure.domain.model import Lease, Principal

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Artifacts:
    """The outside stores a lease's detail lives in (None: this deployment keeps none, and
    their routes say so), and who may see a lease's detail."""

    def __init__(
        self,
        kernel: Kernel,
        blobs: BlobStore | None = None,
        log_sink: LogSink | None = None,
        *,
        retention: RetentionRows,
    ) -> None:
        self.kernel = kernel
        self.retention = retention
        self.blobs = blobs
        self.log_sink = log_sink

    def visible_lease(self, actor: Principal, lease_id: str) -> Lease:
        """The lease, for whoever may see it: an operator with its space in scope, or the
        lease's own token (another lease's token: lease_token_mismatch)."""
        if actor.kind == "lease":
            return self.kernel.owned.own_lease(actor, lease_id, authz.SHIP)
        authz.require_role(actor, "read")
        lease = self.kernel.lease(lease_id)
        authz.require_operator(actor, "read", lease.space)
        return lease

    def sink(self) -> LogSink:
        if self.log_sink is None:
            raise UnsupportedRuntime("this deployment keeps no logs (no log group configured)")
        return self.log_sink

    def keep_detail(self, lease: Lease) -> None:
        """Mark the lease as keeping logs or attachments before its first one is made, so
        that once ended it is found by the retention reclaim and they are deleted (a lease
        without the mark is reclaimed by derivation, with nothing deleted). Once a lease: a
        lease read with the mark writes nothing. A lease reclaimed meanwhile takes none."""
        if lease.keeps_detail:
            return
        try:
            self.retention.keep_detail(lease)
        except Conflict as lost:
            raise InvalidTransition(f"lease {lease.id} was reclaimed; it keeps no detail") from lost

    def keeps_logs(self, lease: Lease) -> None:
        if not self.kernel.catalog.pool(lease.pool).keeps_logs:
            raise UnsupportedRuntime(f"pool {lease.pool!r} keeps no logs (keeps_logs is false)")
