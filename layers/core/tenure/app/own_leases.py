"""The lease a lease token acts on: read once per request, and refused for what its end has
taken away."""

from __future__ import annotations

from collections.abc import Callable

from tenure.app.catalog import note, taken
from tenure.app.ports import Clock
from tenure.domain import authz
from tenure.domain.model import Lease, Principal


class OwnLeases:
    def __init__(self, read: Callable[[str], Lease], clock: Clock) -> None:
        self.read = read  # a consistent read of the lease (LeaseNotFound when there is none)
        self.clock = clock

    def own_lease(
        self, actor: Principal, lease_id: str, use: str = authz.ACT, read: Lease | None = None
    ) -> Lease:
        """The lease of this lease token, read once, and refused for a `use` its end has
        taken away (authz.require_lease_power): the one check on the row itself, so a
        principal cached from before the end is caught here. `read`: the row this request
        already read consistently (a worker's bound report resolves the lease first), taken
        instead of a second read; so is the row the request's own token check read
        (`token_checked`). A write judged on it is still conditional on its state and fence,
        and one that loses is judged again on a fresh read."""
        authz.require_lease(actor, lease_id)
        checked = self.token_checked_row(lease_id)
        if read is None or read.id != lease_id:
            read = checked
        lease = read if read is not None and read.id == lease_id else self.read(lease_id)
        authz.require_lease_power(authz.lease_ended_at(lease), self.clock.now_ms(), use)
        return lease

    def token_checked(self, lease: Lease) -> None:
        """The lease row a lease token was just checked against, read consistently in this
        request: kept for the request's first own_lease of it. Outside a request (the
        authorizer's own function) nothing is kept."""
        note("lease", lease.id, lease)

    def token_checked_row(self, lease_id: str) -> Lease | None:
        """The row `token_checked` kept for this lease in this request, handed out once."""
        return taken("lease", lease_id, Lease)

    def acting_lease(self, actor: Principal) -> Lease:
        """The lease a lease token acts from (its space, its task), while it is active."""
        return self.own_lease(actor, actor.lease_id or "")
