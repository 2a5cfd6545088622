"""What operators do to leases: list and read them, cancel, kill, pause and resume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.ports import LeasePage
from tenure.app.rows import LeaseRows
from tenure.domain import authz
from tenure.domain.model import Lease, Principal
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.transitions import Action, move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Operator:
    def __init__(self, kernel: Kernel, *, leases: LeaseRows) -> None:
        self.kernel = kernel
        self.leases = leases

    def list_leases(
        self,
        actor: Principal,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        authz.require_operator(actor, "read", space)
        return self.leases.list_leases(space, limit, cursor, state, pool, subjects)

    def get_lease(self, actor: Principal, lease_id: str) -> Lease:
        authz.require_role(actor, "read")
        lease = self.kernel.lease(lease_id)
        authz.require_operator(actor, "read", lease.space)
        return lease

    def list_visible_leases(
        self,
        actor: Principal,
        space: str,
        limit: int,
        state: LeaseState | None,
        cursor: str | None = None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        """One page for whoever may see the space: an operator as list_leases decides, or a
        lease token in its own lease's space (the MCP tool leases_list)."""
        if actor.kind != "lease":
            return self.list_leases(actor, space, limit, cursor, state, None, subjects)
        authz.require_own_space(actor, space, self.kernel.owned.acting_lease(actor).space)
        return self.leases.list_leases(space, limit, cursor, state, None, subjects)

    def get_visible_lease(self, actor: Principal, lease_id: str) -> Lease:
        """A lease, for an operator as get_lease decides, or for a lease token when it is in
        its own lease's space (the MCP tool leases_get)."""
        if actor.kind != "lease":
            return self.get_lease(actor, lease_id)
        own = self.kernel.owned.acting_lease(actor)
        authz.require_id_of_own_space(lease_id, own.space)
        lease = own if lease_id == own.id else self.kernel.lease(lease_id)
        authz.require_own_space(actor, lease.space, own.space)
        return lease

    def cancel(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_move(actor, lease_id, Action.CANCEL)

    def kill(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_move(actor, lease_id, Action.KILL)

    def pause(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_move(actor, lease_id, Action.PAUSE)

    def resume(self, actor: Principal, lease_id: str) -> Lease:
        return self._operator_move(actor, lease_id, Action.RESUME)

    def _operator_move(self, actor: Principal, lease_id: str, action: Action) -> Lease:
        authz.require_role(actor, "member")
        lease = self.kernel.lease(lease_id)
        authz.require_operator(actor, "member", lease.space)

        def step(current: Lease) -> Lease:
            to = move(current.id, current.state, current.revoke, action)
            if to is None:  # terminal, or already where the action leads: a no-op
                return current
            now = self.kernel.clock.now_ms()
            new = self.kernel.apply(current, to, {"by": actor.token_id}, now)
            self.kernel.write(current, new)
            return new

        return self.kernel.settle(lease, step)
