"""Runs bound to the caller: a worker token works its leases by id, never holding their tokens.

An agent reached over MCP claims, heartbeats and reports with its worker token alone. The
lease a call names is resolved here, in one place, from the caller: it must have been claimed
with this worker token, by the same `worker_id`. The call then runs as the lease's holder
(the same Reports, Payloads and Blocks paths a lease token takes, so fencing, replay and
timing are exactly those of HTTP). A check that should hold for every bound call (for one,
what a worker may still do on a run that ended) belongs in `resolve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.domain import authz, fencing
from tenure.domain.errors import InvalidTransition, LeaseNotFound, StaleLease, ValidationFailed
from tenure.domain.model import Lease, Principal
from tenure.domain.states import REPORTABLE
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.claims import Claimed, Claims

# A bound claim's long poll (MCP's `task_run_claim_next {wait: true}`) waits in the API
# function, whose concurrency is the operators': so it waits a few seconds, not the 20 an HTTP
# claim may on the claim function, and holds one of its token's wait slots like any claim and
# one of the slots every token's MCP claims share (SHARED_WAITING_CLAIMS).
BOUND_WAIT_SECONDS = 5


@record
class BoundRun:
    """A lease the caller holds, and the principal its reports run under."""

    lease: Lease
    holder: Principal


class Bound:
    def __init__(self, kernel: Kernel, claims: Claims) -> None:
        self.kernel = kernel
        self.claims = claims

    def pool_of(self, actor: Principal, pool: str | None) -> str:
        """The pool a claim is for: the one named, or the token's only pool."""
        authz.require_worker(actor, pool)
        if pool is not None:
            return pool
        if actor.pools is not None and len(actor.pools) == 1:
            return actor.pools[0]
        raise ValidationFailed("pool: name the pool (the token is not limited to one pool)")

    def claim_next(
        self,
        actor: Principal,
        pool: str | None,
        worker_id: str,
        wait: bool,
        lease_seconds: int | None,
        claim_id: str | None,
    ) -> Claimed | None:
        """Claim-next as over HTTP; with `claim_id` a retried call gets the same lease back.
        The fresh token the claim mints is dropped here: the run is worked by id."""
        name = self.pool_of(actor, pool)
        wait_seconds = float(BOUND_WAIT_SECONDS) if wait else 0.0
        return self.claims.claim(
            actor,
            name,
            worker_id,
            None,
            wait_seconds,
            lease_seconds,
            claim_id=claim_id,
            shared_wait=True,
        )

    def claim_exact(
        self, actor: Principal, run_id: str, worker_id: str, lease_seconds: int | None
    ) -> Claimed | None:
        """That run or nothing, as an exact claim over HTTP (409 when it is held or ended);
        a lease outside the token's pools reads as unknown."""
        authz.require_worker(actor, None)
        lease = self.kernel.lease(run_id)
        if actor.pools is not None and lease.pool not in actor.pools:
            raise LeaseNotFound(f"lease {run_id} does not exist")
        return self.claims.claim(
            actor, lease.pool, worker_id, None, 0.0, lease_seconds, lease_id=run_id
        )

    def resolve(
        self, actor: Principal, run_id: str, worker_id: str, copy_first: bool = False
    ) -> BoundRun:
        """The run `run_id`, held by this worker token and `worker_id`, and its holder.

        A lease outside the token's pools reads as unknown (nothing is told of it); one held
        by another token or worker is `stale_lease`; one nobody has claimed yet
        `invalid_transition`. An ended or superseded run still resolves, so its reports get
        the answers HTTP gives them (the first answer again, or the refusal recorded).
        `copy_first` (a final report, whose write is conditional on the row it is judged
        on): an eventually consistent copy that shows the run held by this caller is taken
        as it is; any other copy is read again consistently before it is judged."""
        authz.require_worker(actor, None)
        fencing.refuse_token_fields({"worker_id": worker_id})
        lease = self._held_copy(actor, run_id, worker_id) if copy_first else None
        if lease is None:
            lease = self.kernel.lease(run_id)
        if actor.pools is not None and lease.pool not in actor.pools:
            raise LeaseNotFound(f"lease {run_id} does not exist")
        if lease.claimed_by is None:
            raise InvalidTransition(f"lease {lease.id} is {lease.state}; nobody holds it")
        if lease.claimed_by != actor.token_id or lease.worker_id != worker_id:
            raise StaleLease(f"lease {lease.id} is not held by worker {worker_id}")
        holder = Principal(kind="lease", token_id=actor.token_id, lease_id=lease.id)
        return BoundRun(lease=lease, holder=holder)

    def _held_copy(self, actor: Principal, run_id: str, worker_id: str) -> Lease | None:
        """An eventually consistent copy of the run (half a read unit) when it shows the run
        held by this worker token and `worker_id` in one of its pools, else None."""
        try:
            copy = self.kernel.lease(run_id, consistent=False)
        except LeaseNotFound:
            return None  # not visible yet, or no such run: the consistent read decides
        held = (
            copy.state in REPORTABLE
            and copy.claimed_by == actor.token_id
            and copy.worker_id == worker_id
            and (actor.pools is None or copy.pool in actor.pools)
        )
        return copy if held else None
