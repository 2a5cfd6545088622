"""A final report that claims the worker's next lease in the same call (one request fewer
per lease).

A busy worker otherwise pays two requests per lease at its end: the report, then a claim.
Here `complete` (or `fail`) carries `next`, the claim the worker would have sent, and answers
the next lease beside the ended one.

Who may claim: the worker, with its own token, as that token stands at this moment. The job
a worker runs holds only its lease's token, and a job is trusted less than its worker (an
agent can be talked into anything by the task it reads), so a request made with a lease
token alone never claims: the API acts on its report and not on its `next`. The report that
claims is sent with the worker token that claimed the lease, naming the `worker_id` it
claimed with (`Bound.resolve` holds it to exactly that lease); the claim then runs as that
token, through the public claim, so a token revoked, expired or no longer allowed the pool
claims nothing, as any claim of it would.

A report sent again after it was applied answers its first answer and claims nothing new.
The claim it carried is kept on the ended lease (`next_claim`); only a resend carrying that
same `claim_id` (its answer was lost) answers that claim's lease again, under a fresh token,
and only if that claim won one: it looks the claim up, it never claims anew.

The claim's claim_id intent rides in the report's own write: the lease the claim will take is
picked first and kept on the ended lease (`next_lease`), where a claim with a claim_id would
otherwise write a record of its own. A lost race moves it on conditionally; a resend follows
it to the same lease. When the queue shows nothing at the pick (or while the table's schema
is below the version that allows it), the claim keeps its record as a standalone claim does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.leases.claims import Claimed
from tenure.domain import authz, fencing
from tenure.domain.model import Lease, Principal
from tenure.domain.states import ReportKind
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.bound import Bound
    from tenure.app.leases.claims import Claims
    from tenure.app.leases.reports import Reports


@record
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
    """A final report sent with the worker's token that claims the next lease for the same
    worker: through the public reports (every completion stage applies) and the public claim."""

    def __init__(self, kernel: Kernel, reports: Reports, claims: Claims, bound: Bound) -> None:
        self.kernel = kernel
        self.reports = reports
        self.claims = claims
        self.bound = bound

    def report_then_claim(
        self,
        actor: Principal,
        lease_id: str,
        kind: ReportKind,
        body: dict[str, Any],
        ask: NextClaim,
    ) -> tuple[Lease, Claimed | None]:
        """End the lease with `kind` as its holder, then claim the next lease of its pool for
        the same worker with `actor`, the worker token that claimed it."""
        authz.require_worker(actor, None)
        # Before anything is written; from a copy of the lease when it shows it held by this
        # worker (the report's write is conditional on that row), else read consistently. A
        # resend judged on a copy that lags behind its first application loses its write like
        # a copy racing the first, and its claim follows the intent as such a copy's does: the
        # first's next lease again under a fresh token, or nothing.
        run = self.bound.resolve(actor, lease_id, ask.worker_id, copy_first=True)
        # What the claim would refuse is refused before the report is applied: an answer of
        # 4xx must mean nothing happened, or the resend with a corrected claim finds the
        # report applied and its claim spent.
        authz.require_worker(actor, run.lease.pool)
        fencing.refuse_token_fields(
            {
                "worker_id": ask.worker_id,
                "worker_version": ask.worker_version,
                "claim_id": ask.claim_id,
                "host": ask.host,
            }
        )
        replay = run.lease.state.terminal
        ref = fencing.claim_ref(run.lease.pool, actor.token_id, ask.worker_id, ask.claim_id)
        report = self.reports.complete if kind is ReportKind.COMPLETE else self.reports.fail
        # The row resolve() read is the one the report is judged on: one read.
        picked = None
        if not replay and self.kernel.gates.handover_intents():
            picked = self.claims.pick(run.lease.pool)
        claim = None if replay else ref
        head = picked.lease_id if picked is not None else None
        ended = report(run.holder, lease_id, body, claim, run.lease, head)
        if ended.next_claim != ref:
            return ended, None  # its first application carried another claim, or none
        # The row that ended decides where the intent is, whichever call's write it was.
        on = ended if ended.next_lease is not None else None
        if replay:
            again = self.claims.claimed_again(actor, ended.pool, ask.worker_id, ask.claim_id, on)
            return ended, again
        won = self.claims.claim(
            actor,
            ended.pool,
            ask.worker_id,
            ask.worker_version,
            ask.wait_seconds,
            ask.lease_seconds,
            claim_id=ask.claim_id,
            host=ask.host,
            start=ask.start,
            handover=on,
            # The pick and the claim's first try are one look: one read of the scheduler row.
            looked=picked.gate if picked is not None else None,
        )
        return ended, won
