"""A final report (complete, fail, release; with `next` too) starts from an eventually
consistent copy of its lease when that copy shows the lease held by the caller, and reads
the row consistently otherwise. The report's write is conditional on the very row it was
judged on (state, fence, version, deadline), so a copy that lags behind the table loses that
write and the report is judged again on a fresh read: no refusal, replay or claim ever rests
on a copy that may be behind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from tenure.app.leases.handover import NextClaim
from tenure.domain.errors import InvalidTransition, StaleLease
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind

from tests.unit.support import ADMIN, MEMBER, WORKER, Rig, as_lease

SUCCESS = {"outcome": "success", "result": "done"}
TOLERATION_S = 300  # the pool's default


class Lagging:
    """Eventually consistent reads of a lease answer from `copies` (what a replica behind the
    table still holds) where one is set; consistent reads answer from the table. Every read
    of a lease is counted by its consistency. The reactor's reads are not the request's."""

    def __init__(self, rig: Rig) -> None:
        self.copies: dict[str, Lease] = {}
        self.consistent: list[str] = []
        self.eventual: list[str] = []
        self.reacting = False
        one, many, react = rig.store.get_lease, rig.store.get_leases, rig.store.reactor

        def get_lease(lease_id: str, consistent: bool = True) -> Lease | None:
            if not self.reacting:
                (self.consistent if consistent else self.eventual).append(lease_id)
            if not consistent and lease_id in self.copies:
                return self.copies[lease_id]
            return one(lease_id, consistent)

        def get_leases(lease_ids: Iterable[str], consistent: bool = True) -> dict[str, Lease]:
            ids = list(lease_ids)
            if not self.reacting:
                (self.consistent if consistent else self.eventual).extend(ids)
            found = many(ids, consistent)
            if not consistent:
                found.update({i: self.copies[i] for i in ids if i in self.copies})
            return found

        def reactor(rows: Any) -> None:
            self.reacting = True
            try:
                react(rows)
            finally:
                self.reacting = False

        rig.store.get_lease = get_lease  # type: ignore[method-assign]
        rig.store.get_leases = get_leases  # type: ignore[method-assign]
        rig.store.reactor = reactor

    def behind(self, lease: Lease) -> None:
        self.copies[lease.id] = lease

    def clear(self) -> None:
        self.consistent.clear()
        self.eventual.clear()


@pytest.fixture
def rig() -> Rig:
    return Rig()


@pytest.fixture
def lag(rig: Rig) -> Lagging:
    return Lagging(rig)


def _next(claim_id: str = "next-1") -> NextClaim:
    return NextClaim(worker_id="w1", claim_id=claim_id)


def _handover(rig: Rig, lease: Lease, claim_id: str = "next-1") -> tuple[Lease, Any]:
    return rig.svc.handover.report_then_claim(
        WORKER, lease.id, ReportKind.COMPLETE, dict(SUCCESS), _next(claim_id)
    )


def _ends(rig: Rig) -> int:
    return sum(1 for row in rig.store.lease_rows.values() if row.lease.state.terminal)


# ------------------------------------------------------------------ the cheap read is used


def test_a_complete_of_a_held_lease_reads_its_copy_once_and_nothing_consistently(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    lag.clear()
    ended = rig.svc.reports.complete(as_lease(lease.id), lease.id, dict(SUCCESS))
    assert ended.state is LeaseState.COMPLETED
    assert (lag.eventual, lag.consistent) == ([lease.id], [])


def test_a_report_that_claims_the_next_lease_reads_its_own_lease_s_copy_only(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    rig.task()
    lag.clear()
    ended, won = _handover(rig, lease)
    assert ended.state is LeaseState.COMPLETED and won is not None
    assert lease.id in lag.eventual and lease.id not in lag.consistent


@pytest.mark.parametrize("kind", [ReportKind.FAIL, ReportKind.RELEASE])
def test_a_fail_and_a_release_start_from_the_copy_too(
    rig: Rig, lag: Lagging, kind: ReportKind
) -> None:
    lease = rig.running()
    lag.clear()
    body: dict[str, Any] = {"error": {"message": "no"}} if kind is ReportKind.FAIL else {}
    report = rig.svc.reports.fail if kind is ReportKind.FAIL else rig.svc.reports.release
    ended = report(as_lease(lease.id), lease.id, body)
    assert ended.state.terminal
    assert lease.id not in lag.consistent


# ----------------------------------------- a copy behind the table decides nothing on its own


def test_a_lease_just_claimed_is_completed_though_its_copy_still_shows_it_queued(
    rig: Rig, lag: Lagging
) -> None:
    rig.task()
    queued = next(iter(rig.store.lease_rows.values())).lease
    lag.behind(queued)  # the replica has not seen the claim yet
    won = rig.claim()
    ended = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, dict(SUCCESS))
    assert ended.state is LeaseState.COMPLETED
    assert won.lease.id in lag.consistent  # judged on the table, not the copy


def test_a_handover_of_a_lease_just_claimed_is_not_refused_on_its_queued_copy(
    rig: Rig, lag: Lagging
) -> None:
    rig.task()
    queued = next(iter(rig.store.lease_rows.values())).lease
    lag.behind(queued)
    won = rig.claim()
    rig.task()
    ended, nxt = _handover(rig, won.lease)
    assert ended.state is LeaseState.COMPLETED and nxt is not None


def test_an_expired_lease_s_report_is_stale_and_recorded_though_its_copy_shows_it_running(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    lag.behind(rig.lease(lease.id))
    rig.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    rig.sweep()
    expired = rig.lease(lease.id)
    assert expired.state is LeaseState.LOST
    for _ in range(2):  # and again, while the copy still lags
        with pytest.raises(StaleLease):
            rig.svc.reports.complete(as_lease(lease.id), lease.id, dict(SUCCESS))
    assert rig.lease(lease.id) == expired, "nothing written"
    assert rig.types(lease.task_id or "").count("lease.stale_report") == 2


def test_an_expired_lease_s_handover_claims_nothing_though_its_copy_shows_it_running(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    lag.behind(rig.lease(lease.id))
    rig.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    rig.sweep()
    rig.task()
    held = {r.lease.id for r in rig.store.lease_rows.values() if r.lease.claimed_by}
    with pytest.raises(StaleLease):
        _handover(rig, lease)
    after = {r.lease.id for r in rig.store.lease_rows.values() if r.lease.claimed_by}
    assert after == held, "no next lease was claimed"


def test_a_resend_judged_on_a_lagging_copy_answers_the_first_answer(rig: Rig, lag: Lagging) -> None:
    lease = rig.running()
    copy = rig.lease(lease.id)
    first = rig.svc.reports.complete(as_lease(lease.id), lease.id, dict(SUCCESS))
    lag.behind(copy)  # the replica still shows the lease running
    rig.advance(0.2)
    again = rig.svc.reports.complete(as_lease(lease.id), lease.id, dict(SUCCESS))
    assert again == first, "the first answer, unchanged"
    with pytest.raises(InvalidTransition):  # a different report on the ended lease
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "failure"})
    assert rig.lease(lease.id) == first


def test_a_handover_resent_on_a_lagging_copy_answers_the_same_next_lease(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    rig.task()
    rig.task()
    copy = rig.lease(lease.id)
    _, first = _handover(rig, lease)
    assert first is not None
    lag.behind(copy)
    rig.advance(0.2)
    _, again = _handover(rig, lease)
    assert again is not None and again.lease.id == first.lease.id
    assert again.token != first.token, "under a fresh token"
    pending = [r.lease for r in rig.store.lease_rows.values() if r.lease.state.value == "pending"]
    assert len(pending) == 1, "no second next lease"


def test_a_handover_resent_on_a_lagging_copy_claims_nothing_new_once_its_next_lease_ended(
    rig: Rig, lag: Lagging
) -> None:
    # The first application's next lease was ended by an operator before the resend (its
    # answer lost): the resend answers its first answer and claims no other lease, though the
    # copy it read still shows its own lease running.
    lease = rig.running()
    rig.task()
    rig.task()
    copy = rig.lease(lease.id)
    _, first = _handover(rig, lease)
    assert first is not None
    [forced] = rig.svc.force.bulk_fail(ADMIN, [first.lease.id], "operator stopped it")
    assert rig.lease(first.lease.id).state.terminal, forced
    lag.behind(copy)
    rig.advance(0.2)
    claimed = {r.lease.id for r in rig.store.lease_rows.values() if r.lease.claimed_by}
    ended, again = _handover(rig, lease)
    assert ended.state is LeaseState.COMPLETED
    assert again is None or again.lease.id == first.lease.id
    after = {r.lease.id for r in rig.store.lease_rows.values() if r.lease.claimed_by}
    assert after == claimed, "no new lease was claimed"


def test_a_cancel_the_copy_has_not_seen_loses_the_write_and_is_judged_on_the_table(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    lag.behind(rig.lease(lease.id))
    rig.svc.operator.cancel(MEMBER, lease.id)
    assert rig.lease(lease.id).state is LeaseState.CANCELLING
    lost = rig.svc.counters["lost_writes"]
    ended = rig.svc.reports.complete(as_lease(lease.id), lease.id, dict(SUCCESS))
    assert rig.svc.counters["lost_writes"] == lost + 1, "the write on the copy lost"
    assert rig.lease(lease.id) == ended
    twin = Rig()
    held = twin.running()
    twin.svc.operator.cancel(MEMBER, held.id)
    fresh = twin.svc.reports.complete(as_lease(held.id), held.id, dict(SUCCESS))
    assert (ended.state, ended.end_reason) == (fresh.state, fresh.end_reason)


def test_another_workers_copy_is_never_taken_for_a_handover(rig: Rig, lag: Lagging) -> None:
    lease = rig.running()
    rig.task()
    with pytest.raises(StaleLease):
        rig.svc.handover.report_then_claim(
            WORKER, lease.id, ReportKind.COMPLETE, dict(SUCCESS), NextClaim("w2", "next-2")
        )
    assert lease.id in lag.consistent, "refused on the table's row"
    assert rig.lease(lease.id).state is LeaseState.RUNNING
