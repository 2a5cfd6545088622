"""The pure terms of one claim (domain/claims.py): what a claim writes of its own into the
lease it takes, and the leases it refuses whatever their gates say."""

from __future__ import annotations

from dataclasses import replace

from tenure.domain.claims import ClaimTerms, Refusal, claim_terms
from tenure.domain.fencing import fresh_deadline
from tenure.domain.model import Pool
from tenure.domain.states import PoolKind

from tests.unit.support import make_lease

NOW = 1_000_000_000_000
POOL = Pool("p", "OPS", PoolKind.COMMAND, 0, toleration_seconds=60)


def test_a_lease_not_due_yet_is_refused() -> None:
    lease = make_lease("L1", not_before=NOW + 1)
    assert claim_terms(lease, POOL, None, NOW) is Refusal.DEFERRED
    assert isinstance(claim_terms(replace(lease, not_before=NOW), POOL, None, NOW), ClaimTerms)


def test_a_lease_past_its_queue_timeout_is_refused() -> None:
    lease = make_lease("L1", queue_expires_at=NOW)
    assert claim_terms(lease, POOL, None, NOW) is Refusal.EXPIRED
    assert isinstance(
        claim_terms(replace(lease, queue_expires_at=NOW + 1), POOL, None, NOW), ClaimTerms
    )


def test_the_asked_seconds_else_the_pools_toleration_set_the_deadline() -> None:
    lease = make_lease("L1")
    terms = claim_terms(lease, POOL, None, NOW)
    assert isinstance(terms, ClaimTerms)
    assert (terms.lease_seconds, terms.deadline) == (60, fresh_deadline(NOW, 60_000))
    assert (terms.run_limit_seconds, terms.run_deadline, terms.due_at) == (
        None,
        None,
        terms.deadline,
    )
    asked = claim_terms(lease, POOL, 30, NOW)
    assert isinstance(asked, ClaimTerms)
    assert (asked.lease_seconds, asked.deadline) == (30, fresh_deadline(NOW, 30_000))


def test_the_smaller_run_limit_wins_and_the_index_entry_comes_due_first_of_the_two() -> None:
    lease = make_lease("L1", max_run_seconds=10)
    terms = claim_terms(lease, replace(POOL, max_run_seconds=20), None, NOW)
    assert isinstance(terms, ClaimTerms)
    assert (terms.run_limit_seconds, terms.run_deadline) == (10, NOW + 10_000)
    assert terms.due_at == NOW + 10_000 < terms.deadline
    late = claim_terms(replace(lease, max_run_seconds=3_600), POOL, None, NOW)
    assert isinstance(late, ClaimTerms)
    assert late.due_at == late.deadline < late.run_deadline  # type: ignore[operator]
