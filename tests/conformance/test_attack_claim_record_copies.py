"""Attacks on a claim that looks for its claim_id record in an eventually consistent copy
first, on DynamoDB Local (whose copies are never behind: a store here answers every copy of
a record as none, the worst a replica can do). Whatever the copy misses, one claim_id takes
one lease at most, its retry gets that lease again, and a claim_id is its own worker's and
pool's alone.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tenure.app.leases.claims import Claimed
from tenure.app.ports import ClaimRecord
from tenure.domain.fencing import claim_ref, hash_token
from tenure.domain.model import Principal
from tenure.domain.states import LeaseState
from tenure.store.dynamo import OneTable

from tests.conformance.contract import ALPHA, BETA, GAMMA, OTHER_SPACE, SPACE, make_world
from tests.conformance.test_claim_record_races import held_by, service
from tests.conformance.test_races import run_threads, seed, stored
from tests.conftest import ADMIN, WORKER, Rig

REF = claim_ref(ALPHA, WORKER.token_id, "w1", "lost-answer")


class BlindCopies:
    """The real store, whose eventually consistent copy of any claim record shows none."""

    def __init__(self, inner: OneTable) -> None:
        self.inner = inner
        self.blind = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str, consistent: bool = True
    ) -> ClaimRecord | None:
        if not consistent:
            self.blind += 1
            return None
        return self.inner.find_claim(pool, claimant, worker_id, claim_id, consistent)


def claim(store: Any, actor: Principal = WORKER, worker: str = "w1", pool: str = ALPHA) -> Any:
    return service(store).claims.claim(actor, pool, worker, "1.0", 0, None, claim_id="lost-answer")


def _all_held(rig: Rig) -> list[str]:
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.DISPATCHED, None)
    return sorted(lease.id for lease in page.leases)


def test_under_a_ceiling_a_retry_whose_copy_misses_its_record_gets_its_lease_again(
    rig: Rig,
) -> None:
    # The first answer was lost; the retry's copy shows no record, so it starts as a new
    # claim. Under a ceiling its record's first write rides in the claim's own transaction,
    # which must lose to the record that exists, and the retry follow it to its lease.
    make_world(rig.svc)
    seed(rig, 3)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 2})
    first = claim(rig.store)
    assert first is not None
    blind = BlindCopies(rig.store)
    again = claim(blind)
    assert blind.blind >= 1, "the copy was read"
    assert again is not None and again.lease.id == first.lease.id
    assert again.token != first.token
    assert stored(rig, first.lease.id).token_hash == hash_token(again.token)
    assert _all_held(rig) == [first.lease.id], "no second lease for the claim_id"


@pytest.mark.parametrize("ceiling", [False, True])
def test_eight_calls_of_one_claim_id_whose_copies_all_miss_take_one_lease(
    rig: Rig, ceiling: bool
) -> None:
    make_world(rig.svc)
    seed(rig, 4)
    if ceiling:
        rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 3})
    blind = BlindCopies(rig.store)
    start = threading.Barrier(8)

    def go(_: int) -> Claimed | None:
        start.wait()
        return claim(blind)

    won = run_threads(8, go)
    got = {x.lease.id for x in won if x is not None}
    assert len(got) == 1, won
    assert [x.id for x in held_by(rig, REF)] == sorted(got)
    assert _all_held(rig) == sorted(got)
    [lease_id] = got
    tokens = [x.token for x in won if x is not None]
    assert stored(rig, lease_id).token_hash in {hash_token(t) for t in tokens}


def test_one_claim_id_under_another_worker_another_pool_or_token_is_a_claim_of_its_own(
    rig: Rig,
) -> None:
    # A claim_id names one claim of one worker token, worker_id and pool: the same words
    # sent by another worker, into another pool, into another space's pool, or with another
    # token never answer the first claim's lease (nor re-mint its token); each takes a lease
    # of its own.
    make_world(rig.svc)
    seed(rig, 3)
    rig.svc.filing.create_task(ADMIN, SPACE, "beta work", None, None, {}, BETA, None)
    rig.svc.filing.create_task(ADMIN, OTHER_SPACE, "gamma work", None, None, {}, GAMMA, None)
    other_token = Principal(kind="worker", token_id="other-worker")
    first = claim(rig.store)
    assert first is not None
    blind = BlindCopies(rig.store)
    others = [
        claim(blind, worker="w2"),
        claim(blind, pool=BETA),
        claim(blind, pool=GAMMA),
        claim(blind, actor=other_token),
    ]
    ids = [first.lease.id] + [x.lease.id for x in others if x is not None]
    assert len(ids) == 5 and len(set(ids)) == 5, others
    assert stored(rig, first.lease.id).token_hash == hash_token(first.token), "not re-minted"
