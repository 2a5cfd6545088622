"""The claim_id record's state machine (app/leases/claims/intent.py): how one read of the
record's lease is sorted, and how a call's transitions move it."""

from __future__ import annotations

import itertools

import pytest
from tenure.app.leases.claims.intent import At, ClaimIntent, judge
from tenure.app.ports import ClaimRecord


def _intent() -> ClaimIntent:
    return ClaimIntent(ClaimRecord("pool", "tok", "w1", "c1", "", 0), "ref")


@pytest.mark.parametrize(
    ("own", "held", "pending", "shunned", "at"),
    [
        (True, True, False, False, At.OWN),  # its own and held: answered again
        (True, False, False, False, At.SPENT),  # its own and ended: a new claim, no record
        (False, False, True, False, At.PENDING),  # pending: the only lease it may take
        (False, False, True, True, At.NAMES),  # pending but shunned: never this claim's
        (False, True, False, False, At.NAMES),  # held under another claim
        (False, False, False, False, At.NAMES),  # ended under another claim
    ],
)
def test_a_read_of_the_records_lease_is_sorted(
    own: bool, held: bool, pending: bool, shunned: bool, at: At
) -> None:
    assert judge(own, held, pending, shunned) is at


def test_only_a_pending_lease_nobody_shunned_for_this_claim_is_takeable() -> None:
    for own, held, pending, shunned in itertools.product((False, True), repeat=4):
        takeable = judge(own, held, pending, shunned) is At.PENDING
        assert takeable == (not own and pending and not shunned)


def test_a_call_moves_from_no_record_to_pending_to_its_own() -> None:
    intent = _intent()
    assert (intent.at, intent.names, intent.pending, intent.spent) == (At.NONE, None, None, False)
    intent.pointed("L1")
    assert (intent.at, intent.names, intent.pending) == (At.PENDING, "L1", "L1")
    intent.won("L1")
    assert (intent.at, intent.names, intent.pending) == (At.OWN, "L1", None)


def test_a_lease_it_cannot_take_is_named_but_not_pending() -> None:
    intent = _intent()
    intent.found("L1", At.NAMES)
    assert (intent.names, intent.pending) == ("L1", None)
    intent.found("L2", At.PENDING)
    assert (intent.names, intent.pending) == ("L2", "L2")
    intent.found_none()
    assert (intent.at, intent.names, intent.pending) == (At.NONE, None, None)


def test_a_spent_claim_id_stays_spent_whatever_it_reads_next() -> None:
    intent = _intent()
    intent.found("L1", At.SPENT)
    assert intent.spent and intent.names == "L1"
    intent.found("L2", At.PENDING)
    assert intent.spent and intent.pending is None
    intent.found_none()
    assert intent.spent and intent.names is None
    intent = _intent()
    intent.found("L1", At.OWN)
    intent.spend()  # its reissue found the lease no longer held
    assert intent.spent
