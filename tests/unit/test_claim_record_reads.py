"""A claim with a `claim_id` looks for its record eventually consistent first. A copy that
shows no record decides nothing: the claim's first write of the record lands only if no
record exists, so a record the copy missed (a retry whose answer was lost, sent at once)
makes that write lose, and the claim then reads the record consistently and follows it. A
copy that shows a record is read again consistently before it is followed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tenure.app.ports import ClaimRecord
from tenure.domain.states import LeaseState

from tests.unit.support import POOL, WORKER, Rig


class LaggingRecords:
    """Eventually consistent reads of a claim record see none (a replica that has not caught
    up with its write); consistent reads see the table. Every read is counted."""

    def __init__(self, rig: Rig) -> None:
        self.reads: list[bool] = []  # the `consistent` flag of each read
        self.lagging = False
        table = rig.store.find_claim

        def find_claim(
            pool: str, claimant: str, worker_id: str, claim_id: str, consistent: bool = True
        ) -> ClaimRecord | None:
            self.reads.append(consistent)
            if self.lagging and not consistent:
                return None
            return table(pool, claimant, worker_id, claim_id)

        rig.store.find_claim = find_claim  # type: ignore[method-assign]


@pytest.fixture
def rig() -> Rig:
    return Rig()


@pytest.fixture
def lag(rig: Rig) -> LaggingRecords:
    return LaggingRecords(rig)


def _claim(rig: Rig, claim_id: str, worker_id: str = "w1") -> Any:
    return rig.svc.claims.claim(WORKER, POOL, worker_id, None, 0, None, claim_id=claim_id)


def _held(rig: Rig) -> set[str]:
    return {r.lease.id for r in rig.store.lease_rows.values() if r.lease.claimed_by}


def test_a_new_claim_id_is_looked_up_once_at_half_the_price(rig: Rig, lag: LaggingRecords) -> None:
    rig.task()
    won = _claim(rig, "c-1")
    assert won is not None
    assert lag.reads == [False]
    assert rig.store.find_claim(POOL, WORKER.token_id, "w1", "c-1").lease_id == won.lease.id


def test_a_record_the_copy_shows_is_read_again_consistently_before_it_is_followed(
    rig: Rig, lag: LaggingRecords
) -> None:
    rig.task()
    first = _claim(rig, "c-1")
    lag.reads.clear()
    again = _claim(rig, "c-1")
    assert again is not None and again.lease.id == first.lease.id
    assert lag.reads[:2] == [False, True]


def test_a_retry_the_copy_misses_gets_the_same_lease_under_a_fresh_token(
    rig: Rig, lag: LaggingRecords
) -> None:
    for title in ("a", "b", "c"):
        rig.task(title=title)
    first = _claim(rig, "lost-answer")
    lag.lagging = True  # the retry comes at once: the replica has not seen the record yet
    lag.reads.clear()
    again = _claim(rig, "lost-answer")
    assert lag.reads[0] is False and True in lag.reads, "the copy missed it; the table did not"
    assert again is not None and again.lease.id == first.lease.id
    assert again.token != first.token
    assert rig.lease(first.lease.id).token_hash != first.lease.token_hash, "the lost one is dead"
    assert _held(rig) == {first.lease.id}, "never a second lease"


def test_a_retry_the_copy_misses_takes_the_lease_its_record_names_still_pending(
    rig: Rig, lag: LaggingRecords
) -> None:
    # The first call pointed its record at a lease and stopped before claiming it: its retry
    # takes that lease, not the queue's head, though the copy showed no record.
    for title in ("a", "b"):
        rig.task(title=title)
    pending = sorted(r.lease.id for r in rig.store.lease_rows.values())
    named = pending[1]
    intent = rig.svc.claims.records.intent(POOL, WORKER.token_id, "w1", "crashed")
    rig.store.point_claim(replace(intent.record, lease_id=named, expires_at=2**40), None)
    lag.lagging = True
    won = _claim(rig, "crashed")
    assert lag.reads[0] is False and True in lag.reads
    assert won is not None and won.lease.id == named
    assert rig.lease(pending[0]).state is LeaseState.PENDING


def test_a_retry_the_copy_misses_finds_its_lease_when_the_queue_is_empty(
    rig: Rig, lag: LaggingRecords
) -> None:
    rig.task()
    first = _claim(rig, "last-one")
    lag.lagging = True
    lag.reads.clear()
    again = _claim(rig, "last-one")
    assert lag.reads[0] is False and True in lag.reads
    assert again is not None and again.lease.id == first.lease.id
