"""A claim_id's record is written before the claim and moved on after a lost race, with no
transaction between them: these prove on DynamoDB Local that however retries of one claim_id
interleave with each other and with rival workers, and wherever a call dies between its
writes, the claim_id takes one lease at most and its retry always finds it.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from tenure.app.kernel import over
from tenure.app.leases.claims import Claimed
from tenure.app.leases.handover import NextClaim
from tenure.app.ports import Change, ClaimRecord
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.fencing import claim_ref, hash_token
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind
from tenure.store.dynamo import OneTable
from tenure.wiring import RandomIds, SystemClock

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import run_threads, seed, stored
from tests.conftest import ADMIN, WORKER, Rig

REF = claim_ref(ALPHA, WORKER.token_id, "w1", "lost-answer")


class Crash(Exception):
    """The process died here: nothing after this write ran."""


class CrashingStore:
    """The real store, which dies right after the `n`th write of the kind named (the write
    itself lands), as a Lambda killed between two of a claim's writes would."""

    def __init__(self, inner: OneTable, kind: str, n: int = 1) -> None:
        self.inner = inner
        self.kind = kind
        self.left = n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _after(self, kind: str, write: Callable[[], None]) -> None:
        write()
        if kind == self.kind:
            self.left -= 1
            if self.left == 0:
                raise Crash(kind)

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        self._after("record", lambda: self.inner.point_claim(record, previous))

    def commit(self, change: Any) -> None:
        shun = any(w.new.state is LeaseState.PENDING for w in change.leases)
        kind = "shun" if shun else "claim"
        self._after(kind, lambda: self.inner.commit(change))


def service(store: Any) -> Tenure:
    return compose(Rows.of(store, store), SystemClock(), RandomIds())


def claim(svc: Tenure, worker: str = "w1", claim_id: str | None = "lost-answer") -> Claimed | None:
    return svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None, claim_id=claim_id)


def retries_and_rivals(rig: Rig) -> list[Claimed | None]:
    """Sixteen claims started together: eight retries of one claim_id (even places) and
    eight rival workers without one (odd places), answers in that order."""
    svc = service(rig.store)
    start = threading.Barrier(16)

    def go(n: int) -> Claimed | None:
        start.wait()
        if n % 2:
            return claim(svc, worker=f"rival-{n}", claim_id=None)
        return claim(svc)

    return run_threads(16, go)


def held_by(rig: Rig, ref: str) -> list[Lease]:
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.DISPATCHED, None)
    return [lease for lease in page.leases if lease.claim_ref == ref]


@pytest.mark.parametrize("kind", ["record", "claim"])
def test_a_claim_that_dies_between_its_writes_is_found_by_its_retry(rig: Rig, kind: str) -> None:
    # Dead after the record (nothing claimed yet) or after the claim (the answer never sent):
    # the retry follows the record to the one lease, claiming it or re-minting its token.
    make_world(rig.svc)
    seed(rig, 3)
    with pytest.raises(Crash):
        claim(service(CrashingStore(rig.store, kind)))
    again = claim(service(rig.store))
    assert again is not None
    assert [x.id for x in held_by(rig, REF)] == [again.lease.id]
    assert stored(rig, again.lease.id).token_hash == hash_token(again.token)
    record = rig.store.find_claim(ALPHA, WORKER.token_id, "w1", "lost-answer")
    assert record is not None and record.lease_id == again.lease.id


class BumpedFirst(CrashingStore):
    """As CrashingStore, and the first claim write it sees loses to a write that bumps the
    lease's version (an operator's change to a queued lease), so that lease stays pending."""

    bumped = False

    def commit(self, change: Any) -> None:
        row = change.leases[0].new
        if not self.bumped and row.state is LeaseState.DISPATCHED:
            self.bumped = True
            seen = self.inner.get_lease(row.id)
            bumped = replace(seen, version=seen.version + 1, event_type=None)
            self.inner.commit(Change(leases=[over(seen, bumped)]))
        super().commit(change)


def test_a_claim_that_dies_after_shunning_a_pending_lease_moves_on_when_retried(
    rig: Rig,
) -> None:
    # The claim's write on the lease its record names loses while that lease stays pending,
    # so before moving its record on the claim shuns that lease, and dies right there. The
    # retry must not take the shunned lease (a concurrent retry that read the old record
    # would take it too): it moves the record on and claims another.
    make_world(rig.svc)
    seed(rig, 3)
    with pytest.raises(Crash):
        claim(service(BumpedFirst(rig.store, "shun")))
    record = rig.store.find_claim(ALPHA, WORKER.token_id, "w1", "lost-answer")
    assert record is not None
    first = stored(rig, record.lease_id)
    assert (first.state, first.shunned) == (LeaseState.PENDING, (REF,))
    again = claim(service(rig.store))
    assert again is not None and again.lease.id != first.id
    assert stored(rig, first.id).state is LeaseState.PENDING  # still there for anyone else
    assert [x.id for x in held_by(rig, REF)] == [again.lease.id]
    other = service(rig.store).claims.claim(WORKER, ALPHA, "w2", "1.0", 0, None, lease_id=first.id)
    assert other is not None  # shunned by that one claim only: anyone else may take it


def test_retries_of_one_claim_id_racing_rival_workers_take_one_lease(rig: Rig) -> None:
    # Eight retries of one claim_id and eight rivals on three leases: the record moves on
    # from every lease a rival wins, and concurrent retries meet on the record or on the
    # lease, so the claim_id ends up with one lease at most, and every retry that got a lease
    # got that one.
    make_world(rig.svc)
    seed(rig, 3)
    won = retries_and_rivals(rig)
    ours = {x.lease.id for n, x in enumerate(won) if x is not None and n % 2 == 0}
    assert len(ours) <= 1
    assert [x.id for x in held_by(rig, REF)] == sorted(ours)
    rivals = [x.lease.id for n, x in enumerate(won) if x is not None and n % 2]
    assert len(rivals) == len(set(rivals))  # one holder per lease
    assert not ours & set(rivals)


class SiblingFirst:
    """The real store, before whose first queue read a sibling call with the same claim_id
    runs to the end: this call read no record, and then finds the queue empty."""

    def __init__(self, inner: OneTable, sibling: Callable[[], Claimed | None]) -> None:
        self.inner = inner
        self.sibling = sibling
        self.won: list[Claimed | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def queue_candidates(self, *args: Any, **kwargs: Any) -> Any:
        if not self.won:
            self.won.append(self.sibling())
        return self.inner.queue_candidates(*args, **kwargs)


def test_a_call_that_finds_the_queue_empty_answers_its_siblings_lease(rig: Rig) -> None:
    # One pending lease and two calls of one claim_id: the second read no record, then its
    # sibling took the lease, so the queue is empty by the time it looks. It must not answer
    # "nothing to claim" while that lease is held under its claim_id: it reads the record
    # before answering, and follows it to the lease.
    make_world(rig.svc)
    seed(rig, 1)
    store = SiblingFirst(rig.store, lambda: claim(service(rig.store)))
    second = claim(service(store))
    [first] = store.won
    assert first is not None
    assert second is not None and second.lease.id == first.lease.id
    assert stored(rig, first.lease.id).token_hash == hash_token(second.token)


def test_under_a_ceiling_the_record_commits_with_the_claim_and_a_retry_finds_it(
    rig: Rig,
) -> None:
    # A pool with a ceiling claims in a transaction (the counter), and the claim's record is
    # one of its items: a call that dies right after that transaction is found by its retry,
    # and eight retries of one claim_id with eight rivals still take one lease between them,
    # within the ceiling.
    make_world(rig.svc)
    seed(rig, 6)  # first: setting the ceiling moves the rig's clock on past these services'
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 4})
    with pytest.raises(Crash):
        claim(service(CrashingStore(rig.store, "claim")))
    again = claim(service(rig.store))
    assert again is not None and [x.id for x in held_by(rig, REF)] == [again.lease.id]
    won = retries_and_rivals(rig)
    ours = {x.lease.id for n, x in enumerate(won) if x is not None and n % 2 == 0}
    assert ours == {again.lease.id}
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.DISPATCHED, None)
    assert len(page.leases) <= 4  # the ceiling held


# -- complete{next}: the claim's intent rides in the report's own write ----------------------

HANDED = claim_ref(ALPHA, WORKER.token_id, "w1", "handed")
DONE = {"outcome": "success"}


class CrashingHandover(CrashingStore):
    """As CrashingStore, telling the report's end ("end": the held lease ended), the intent's
    re-point on the ended lease ("repoint"), a shun and a claim apart."""

    def commit(self, change: Any) -> None:
        write = change.leases[0]
        if write.new.state.terminal:
            held = write.expect is not None and not write.expect[0].terminal
            kind = "end" if held else "repoint"
        else:
            kind = "shun" if write.new.state is LeaseState.PENDING else "claim"
        self._after(kind, lambda: self.inner.commit(change))


def handed_over(svc: Tenure, lease_id: str) -> tuple[Lease, Claimed | None]:
    """The worker's report of `lease_id` with `next` (claim_id "handed"), as the API runs it."""
    ask = NextClaim(worker_id="w1", claim_id="handed")
    return svc.handover.report_then_claim(WORKER, lease_id, ReportKind.COMPLETE, DONE, ask)


def held_lease(rig: Rig, leases: int) -> str:
    make_world(rig.svc)
    seed(rig, leases)
    first = claim(service(rig.store), claim_id=None)
    assert first is not None
    return first.lease.id


def test_a_report_that_dies_after_its_end_claims_nothing_twice_on_its_resend(rig: Rig) -> None:
    # The end (with the intent naming the picked lease) landed, the claim never ran: the
    # resend finds its report applied, follows the intent to a lease its claim never won, and
    # answers no next lease, as before; nobody holds anything under the claim_id, the picked
    # lease stays pending for any claim, and no claim_id record was written.
    lease_id = held_lease(rig, 3)
    with pytest.raises(Crash):
        handed_over(service(CrashingHandover(rig.store, "end")), lease_id)
    ended = stored(rig, lease_id)
    assert ended.state is LeaseState.COMPLETED and ended.next_claim == HANDED
    assert ended.next_lease is not None
    assert stored(rig, ended.next_lease).state is LeaseState.PENDING
    again, nxt = handed_over(service(rig.store), lease_id)
    assert again.state is LeaseState.COMPLETED and nxt is None
    assert held_by(rig, HANDED) == []
    assert rig.store.find_claim(ALPHA, WORKER.token_id, "w1", "handed") is None


def test_a_report_that_dies_after_its_claim_gets_the_same_lease_on_its_resend(rig: Rig) -> None:
    # The claim landed, the answer was lost: the resend follows the intent on the ended lease
    # to that same lease, under a fresh token, and takes no second one.
    lease_id = held_lease(rig, 3)
    with pytest.raises(Crash):
        handed_over(service(CrashingHandover(rig.store, "claim")), lease_id)
    ended = stored(rig, lease_id)
    [won] = held_by(rig, HANDED)
    assert ended.next_lease == won.id
    _, nxt = handed_over(service(rig.store), lease_id)
    assert nxt is not None and nxt.lease.id == won.id
    assert stored(rig, won.id).token_hash == hash_token(nxt.token)
    assert [x.id for x in held_by(rig, HANDED)] == [won.id]
    assert rig.store.find_claim(ALPHA, WORKER.token_id, "w1", "handed") is None


def test_eight_resends_of_one_report_racing_rivals_take_one_next_lease(rig: Rig) -> None:
    # Eight copies of one report (one claim_id) sent together, with eight rival workers
    # claiming on the same four leases: the report ends its lease once, the intent moves on
    # from every lease a rival wins, and every copy that answers a next lease answers the
    # same one, the only lease held under the claim_id.
    lease_id = held_lease(rig, 5)
    svc = service(rig.store)
    start = threading.Barrier(16)

    def go(n: int) -> Claimed | None:
        start.wait()
        if n % 2:
            return claim(svc, worker=f"rival-{n}", claim_id=None)
        return handed_over(svc, lease_id)[1]

    won = run_threads(16, go)
    ours = {x.lease.id for n, x in enumerate(won) if x is not None and n % 2 == 0}
    assert len(ours) <= 1
    assert [x.id for x in held_by(rig, HANDED)] == sorted(ours)
    rivals = [x.lease.id for n, x in enumerate(won) if x is not None and n % 2]
    assert len(rivals) == len(set(rivals)) and not ours & set(rivals)
    ended = stored(rig, lease_id)
    assert ended.state is LeaseState.COMPLETED
    if ours:
        assert ended.next_lease in ours
    assert rig.store.find_claim(ALPHA, WORKER.token_id, "w1", "handed") is None


def test_eight_resends_of_one_report_alone_take_one_next_lease(rig: Rig) -> None:
    # No rivals: some copy's claim wins a lease, and every copy that answers answers it.
    lease_id = held_lease(rig, 4)
    svc = service(rig.store)
    start = threading.Barrier(8)

    def go(n: int) -> Claimed | None:
        start.wait()
        return handed_over(svc, lease_id)[1]

    won = run_threads(8, go)
    ours = {x.lease.id for x in won if x is not None}
    [held] = held_by(rig, HANDED)
    assert ours == {held.id}
    assert stored(rig, lease_id).next_lease == held.id
