"""Operator recovery on leases: retry chains and bulk force release / fail.

Every force row is its own conditional write on the state it read (no retry: a row whose
lease moved meanwhile answers invalid_transition and the caller retries only that row).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.kernel import over
from tenure.app.ports import Change, HoldOp
from tenure.app.rows import LeaseRows, PoolRows
from tenure.app.runs import RunStart
from tenure.app.setup.instance import instance_settings
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    Conflict,
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    TenureError,
    ValidationFailed,
)
from tenure.domain.events import TASK_RETRIED
from tenure.domain.model import Lease, Principal
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.task_keys import derived_outside
from tenure.domain.tasks import next_version
from tenure.domain.transitions import Action, move
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.runs import Runs

# Ended leases a retry may follow (a completed one is done: there is nothing to retry).
RETRYABLE = frozenset({LeaseState.FAILED, LeaseState.LOST, LeaseState.KILLED, LeaseState.CANCELLED})
MAX_BULK = 100
LEASE_TOKEN_ELSEWHERE = "a lease token acts only in its own lease's space"
OPERATOR_FORCED = "operator_forced"


@record
class ForceRow:
    lease_id: str
    ok: bool
    code: str | None = None
    message: str | None = None
    lease: Lease | None = None


class Force:
    def __init__(self, kernel: Kernel, runs: Runs, *, leases: LeaseRows, pools: PoolRows) -> None:
        self.kernel = kernel
        self.leases = leases
        self.pools = pools
        self.runs = runs

    # ------------------------------------------------------------------- retry

    def retry(self, actor: Principal, lease_id: str) -> Lease:
        """A new pending lease after an ended one: a new run of the same task, linked by
        `previous_lease_id`, attempt + 1 and retry_depth + 1; at most one open run."""
        authz.require_role(actor, "member")
        lease = self.kernel.lease(lease_id)
        authz.require_operator(actor, "member", lease.space)
        if lease.state not in RETRYABLE:
            raise InvalidTransition(
                f"lease {lease.id} is {lease.state}; only a failed, lost, killed or cancelled "
                "lease can be retried"
            )
        if lease.subject_kind is not SubjectKind.TASK or lease.task_id is None:
            raise InvalidTransition(f"lease {lease.id} answers for no task; there is no run")
        cap = instance_settings(self.pools).retry_chain_cap
        if lease.retry_depth + 1 > cap:
            raise InvalidTransition(
                f"lease {lease.id} is retry {lease.retry_depth} of its chain; the instance's "
                f"retry_chain_cap is {cap}"
            )
        task = self.kernel.task(lease.task_id)
        newest = self.kernel.newest_lease(task)
        if newest is not None and newest.state.active:
            raise InvalidTransition(f"task {task.key} already has an open run ({newest.id})")
        job = self.kernel.job_of(lease, task)
        if job is None or task.job_id != job.id or job.lease_id != lease.id:
            raise InvalidTransition(
                f"task {task.key} has a newer run than lease {lease.id}; retry its newest lease"
            )
        pool = self.kernel.catalog.pool(lease.pool)
        now = self.kernel.clock.now_ms()
        # A retry is an operator's recovery: an escalated task leaves needs_attention with it.
        recovered = next_version(
            task,
            TASK_RETRIED,
            {"by": actor.token_id, "previous_lease_id": lease.id},
            now,
            attention=False,
        )
        run = RunStart(
            attempt=lease.attempt + 1,
            recovery_count=job.recovery_count,
            retry_depth=lease.retry_depth + 1,
            previous_lease_id=lease.id,
            holds=(HoldOp("attention", task.id, False),) if task.attention else (),
            priority=lease.claim_priority,
            # The run's own controls, where it named them (else the task's, as at filing).
            expires_in_seconds=lease.expires_in_seconds,
            max_run_seconds=lease.max_run_seconds,
        )
        try:
            _, new = self.runs.open_run(
                recovered,
                pool,
                create_task=False,
                expect_job_id=job.id,
                job_checks=[(job.id, lease.id)],
                run=run,
            )
        except Conflict as lost:
            raise InvalidTransition(f"task {task.key} already has an open run") from lost
        return new

    # -------------------------------------------------------------- bulk force

    def bulk_release(
        self, actor: Principal, lease_ids: list[str], reason: str | None
    ) -> list[ForceRow]:
        return self._bulk(actor, lease_ids, Action.FORCE_RELEASE, reason)

    def bulk_fail(self, actor: Principal, lease_ids: list[str], reason: str) -> list[ForceRow]:
        if not reason or not reason.strip():
            raise ValidationFailed("reason: a force fail needs a non-empty reason")
        return self._bulk(actor, lease_ids, Action.FORCE_FAIL, reason)

    def _bulk(
        self, actor: Principal, lease_ids: list[str], action: Action, reason: str | None
    ) -> list[ForceRow]:
        if not 1 <= len(lease_ids) <= MAX_BULK:
            raise ValidationFailed(f"lease_ids: between 1 and {MAX_BULK} ids")
        own_space = self._may_force(actor)
        fencing.refuse_token_fields({"reason": reason})
        found = self.leases.get_leases(lease_ids)
        rows = []
        for lease_id in lease_ids:
            try:
                self._may_force_id(actor, lease_id, own_space)
                lease = found.get(lease_id) or self.kernel.lease(lease_id)
                self._may_force_lease(actor, lease, own_space)
                rows.append(
                    ForceRow(lease_id, True, lease=self._force(actor, lease, action, reason))
                )
            except TenureError as refused:
                rows.append(ForceRow(lease_id, False, code=refused.code, message=str(refused)))
        return rows

    def _may_force(self, actor: Principal) -> str | None:
        """Members may force; worker and lease tokens only when the instance allows agents
        to. Returns the space a lease token is confined to (its own lease's)."""
        if actor.kind == "operator":
            authz.require_role(actor, "member")
            return None
        self.require_agent_force(actor)
        if actor.kind == "lease":
            return self.kernel.owned.acting_lease(actor).space
        return None

    def require_agent_force(self, actor: Principal) -> None:
        require_agent_force(actor, self.pools)

    def _may_force_id(self, actor: Principal, lease_id: str, own_space: str | None) -> None:
        """_may_force_lease for an id derived from another space's key, from its form alone:
        the row refuses the same whether or not that lease exists."""
        if actor.kind == "operator":
            authz.require_id_in_spaces(actor, lease_id)
        elif own_space is not None and derived_outside(lease_id, (own_space,)):
            raise Forbidden(LEASE_TOKEN_ELSEWHERE)

    def _may_force_lease(self, actor: Principal, lease: Lease, own_space: str | None) -> None:
        if actor.kind == "operator":
            authz.require_operator(actor, "member", lease.space)
        elif actor.kind == "worker":
            authz.require_pool_of(actor, lease)
            authz.require_worker(actor, lease.pool)
        elif lease.space != own_space:
            raise Forbidden(LEASE_TOKEN_ELSEWHERE)

    def _force(self, actor: Principal, lease: Lease, action: Action, reason: str | None) -> Lease:
        to = move(lease.id, lease.state, lease.revoke, action)
        if to is None:
            raise InvalidTransition(f"lease {lease.id} is {lease.state}; nothing to force")
        now = self.kernel.clock.now_ms()
        data = {"by": actor.token_id, "actor_kind": actor.kind, "reason": reason}
        if actor.lease_id is not None:
            data["by_lease"] = actor.lease_id  # wake-creator skips its creator's own doing
        fields: dict[str, object] = {"report": {"reason": reason} if reason else None}
        if action is Action.FORCE_FAIL:
            fields["failure_kind"] = OPERATOR_FORCED
            data["failure_kind"] = OPERATOR_FORCED
        ended = self.kernel.apply(lease, to, data, now, **fields)
        change = Change(leases=[over(lease, ended)])
        try:
            if to.requeue:
                change = self.kernel.with_successor(change, lease, recovered=False)
            self.kernel.commit(change)
        except Conflict as lost:
            raise InvalidTransition(
                f"lease {lease.id} changed while it was being forced; try this row again"
            ) from lost
        return ended


def require_agent_force(actor: Principal, pools: PoolRows) -> None:
    """A worker or lease token may force only while the instance allows agents to."""
    if actor.kind not in ("worker", "lease"):
        raise Forbidden("this route needs a member token")
    if not instance_settings(pools).allow_agent_force:
        if actor.kind == "lease":
            raise LeaseTokenMismatch("force operations need an operator token here")
        raise Forbidden("force operations by agents are off (instance allow_agent_force)")
