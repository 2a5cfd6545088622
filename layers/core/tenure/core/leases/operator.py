"""What operators do to leases: list and read them, cancel, kill, pause and resume."""

from __future__ import annotations

from tenure.core import authz
from tenure.core.base import ServiceBase
from tenure.core.model import Lease, Principal
from tenure.core.ports import LeasePage
from tenure.core.states import LeaseState
from tenure.core.transitions import Action, move


class OperatorOps(ServiceBase):
    def list_leases(
        self,
        actor: Principal,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
    ) -> LeasePage:
        authz.require_operator(actor, "read", space)
        return self.store.list_leases(space, limit, cursor, state, pool)

    def get_lease(self, actor: Principal, lease_id: str) -> Lease:
        authz.require_role(actor, "read")
        lease = self._lease(lease_id)
        authz.require_operator(actor, "read", lease.space)
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
        lease = self._lease(lease_id)
        authz.require_operator(actor, "member", lease.space)

        def step(current: Lease) -> Lease:
            to = move(current.id, current.state, current.revoke, action)
            if to is None:  # terminal, or already where the action leads: a no-op
                return current
            now = self.clock.now_ms()
            new = self._apply(current, to, {"by": actor.token_id}, now)
            self._write(current, new)
            return new

        return self._settle(lease, step)
