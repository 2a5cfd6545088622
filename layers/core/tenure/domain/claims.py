"""Pure rules of one claim: whether a pending lease may be taken now, and the terms it is
taken on (its deadline, its run timeout, the index entry the sweeper reads)."""

from __future__ import annotations

from enum import Enum

from tenure.domain import fencing
from tenure.domain.model import Lease, Pool
from tenure.records import record


class Refusal(Enum):
    """Why a pending lease the queue index offered is not taken now, whatever its gates."""

    DEFERRED = "deferred"  # not before its instant, whatever the index says
    EXPIRED = "expired"  # past its queue timeout: the sweeper ends it, nobody runs it


@record
class ClaimTerms:
    """What a claim writes of its own into the lease it takes."""

    lease_seconds: int
    deadline: int
    due_at: int  # the sweeper's index entry: whichever comes first, deadline or run timeout
    run_limit_seconds: int | None
    run_deadline: int | None


def claim_terms(
    lease: Lease, pool: Pool, asked_seconds: int | None, now: int
) -> ClaimTerms | Refusal:
    """The terms of a claim of `lease` at `now`, or why it cannot be taken now."""
    if lease.not_before is not None and lease.not_before > now:
        return Refusal.DEFERRED
    if lease.queue_expires_at is not None and lease.queue_expires_at <= now:
        return Refusal.EXPIRED
    seconds = asked_seconds or pool.toleration_seconds
    deadline = fencing.fresh_deadline(now, 1000 * seconds)
    # The run timeout: the smaller of the run's own and the pool's, from this claim. The
    # sweeper's index entry comes due at whichever is first, it or the deadline.
    limits = [x for x in (lease.max_run_seconds, pool.max_run_seconds) if x is not None]
    run_limit = min(limits) if limits else None
    run_deadline = now + 1000 * run_limit if run_limit is not None else None
    due_at = min(deadline, run_deadline) if run_deadline is not None else deadline
    return ClaimTerms(seconds, deadline, due_at, run_limit, run_deadline)
