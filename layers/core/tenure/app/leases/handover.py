"""A final report that claims the worker's next lease in the same call (one request fewer
per lease).

A busy worker otherwise pays two requests per lease at its end: the report, then a claim.
Here `complete` (or `fail`) carries `next`, the claim the worker would have sent, and answers
the next lease beside the ended one.

Who may claim: the request carries a lease token, not a worker token. The lease itself is the
proof. It was won by a claim made with a worker token (`claimed_by`) that was allowed to claim
on the lease's pool at that moment, and tokens never change or lose a pool once minted (there
is no route that narrows or deletes one). So the next claim runs as that worker token, narrowed
to exactly that pool and that worker id: a lease token can claim nothing its worker could not,
nowhere else, and for no other worker. A lease won any other way (`claimed_by` unset) claims
nothing. `claim_id` is required, so a report retried because its answer was lost (the same
report answers as the first) carries the same claim, which answers the same next lease under a
fresh token (the lost one is dead), never a second one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tenure.app.leases.claims import Claimed
from tenure.domain import authz
from tenure.domain.errors import Forbidden
from tenure.domain.model import Lease, Principal
from tenure.domain.states import ReportKind

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.claims import Claims
    from tenure.app.leases.reports import Reports


@dataclass(frozen=True)
class NextClaim:
    """The claim a final report carries (the fields of POST /pools/{pool}/claim)."""

    worker_id: str
    claim_id: str
    worker_version: str | None = None
    wait_seconds: float = 0
    lease_seconds: int | None = None
    host: str | None = None
    start: bool = False


class Handover:
    """A final report that claims the next lease for the same worker: through the public
    reports (every completion stage applies) and the public claim."""

    def __init__(self, kernel: Kernel, reports: Reports, claims: Claims) -> None:
        self.kernel = kernel
        self.reports = reports
        self.claims = claims

    def report_then_claim(
        self,
        actor: Principal,
        lease_id: str,
        kind: ReportKind,
        body: dict[str, Any],
        ask: NextClaim,
    ) -> tuple[Lease, Claimed | None]:
        """End the lease with `kind`, then claim the next lease of its pool for its worker."""
        held = self.kernel.own_lease(
            actor, lease_id, authz.REPORT
        )  # authorized before anything is written
        if held.claimed_by is None or held.worker_id is None:
            raise Forbidden(f"lease {lease_id} was not claimed by a worker: it claims nothing")
        if ask.worker_id != held.worker_id:
            raise Forbidden(
                f"lease {lease_id} is held by worker {held.worker_id!r}; "
                "it claims the next lease for that worker only"
            )
        report = self.reports.complete if kind is ReportKind.COMPLETE else self.reports.fail
        ended = report(actor, lease_id, body)
        claimant = Principal(kind="worker", token_id=held.claimed_by, pools=(held.pool,))
        won = self.claims.claim(
            claimant,
            held.pool,
            ask.worker_id,
            ask.worker_version,
            ask.wait_seconds,
            ask.lease_seconds,
            claim_id=ask.claim_id,
            host=ask.host,
            start=ask.start,
        )
        return ended, won
