"""A worker's request reads each lease row once: a row the request has already read
consistently (to resolve whose lease it is) is the one its report is judged and written
against, and a stale copy of it still loses its conditional write and is judged again on a
fresh read, never acted on."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from tenure.app.leases.handover import NextClaim
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind

from tests.unit.support import WORKER, Rig, as_lease

SUCCESS = {"outcome": "success"}


class LeaseReads:
    """Counts every read of a lease row the request asks the store for, by lease id. The
    stream's reactor, which the fake store plays inside each commit, runs in a function of
    its own on AWS: its reads are not the request's."""

    def __init__(self, rig: Rig) -> None:
        self.ids: list[str] = []
        self.reacting = False
        one, many, react = rig.store.get_lease, rig.store.get_leases, rig.store.reactor

        def get_lease(lease_id: str, consistent: bool = True) -> Lease | None:
            if not self.reacting:
                self.ids.append(lease_id)
            return one(lease_id, consistent)

        def get_leases(lease_ids: Iterable[str], consistent: bool = True) -> dict[str, Lease]:
            ids = list(lease_ids)
            if not self.reacting:
                self.ids.extend(ids)
            return many(ids, consistent)

        def reactor(rows: Any) -> None:
            self.reacting = True
            try:
                react(rows)
            finally:
                self.reacting = False

        rig.store.reactor = reactor

        rig.store.get_lease = get_lease  # type: ignore[method-assign]
        rig.store.get_leases = get_leases  # type: ignore[method-assign]

    def of(self, lease_id: str) -> int:
        return self.ids.count(lease_id)


@pytest.fixture
def reads(rig: Rig) -> LeaseReads:
    return LeaseReads(rig)


def _claimed_with_next_waiting(rig: Rig) -> Lease:
    """A lease the worker holds, and one more task queued for its next claim."""
    won = rig.claimed()
    rig.task()
    return won.lease


@pytest.mark.parametrize("kind", [ReportKind.COMPLETE, ReportKind.FAIL])
def test_a_report_that_claims_the_next_lease_reads_the_ending_lease_once(
    rig: Rig, reads: LeaseReads, kind: ReportKind
) -> None:
    held = _claimed_with_next_waiting(rig)
    reads.ids.clear()
    body = SUCCESS if kind is ReportKind.COMPLETE else {"error": {"message": "no"}}
    ended, won = rig.svc.handover.report_then_claim(
        WORKER, held.id, kind, dict(body), NextClaim(worker_id="w1", claim_id="next-1")
    )
    assert ended.state.terminal and won is not None
    assert reads.of(held.id) == 1


def test_a_report_judged_on_a_row_that_moved_meanwhile_is_judged_again_on_a_fresh_read(
    rig: Rig, reads: LeaseReads
) -> None:
    """The row the request read is only where the judging starts: the write is conditional on
    its state and fence, so a row that changed in between loses the write and is read again."""
    held = _claimed_with_next_waiting(rig)
    behind = replace(held, state=LeaseState.DISPATCHED)  # a row the table has moved past
    rig.svc.reports.start(as_lease(held.id), held.id)  # the table: running now
    reads.ids.clear()
    lost = rig.svc.kernel.counters["lost_writes"]
    ended = rig.svc.reports.complete(as_lease(held.id), held.id, dict(SUCCESS), read=behind)
    assert ended.state is LeaseState.COMPLETED
    assert rig.lease(held.id).state is LeaseState.COMPLETED
    assert rig.svc.kernel.counters["lost_writes"] == lost + 1  # the write on `behind` lost
    assert reads.of(held.id) >= 1  # and the report was judged again on a fresh read


def test_a_row_read_for_another_lease_is_never_taken_for_the_one_reported(
    rig: Rig, reads: LeaseReads
) -> None:
    held = _claimed_with_next_waiting(rig)
    other = rig.claim(worker_id="w2").lease
    reads.ids.clear()
    ended = rig.svc.reports.complete(as_lease(held.id), held.id, dict(SUCCESS), read=other)
    assert ended.id == held.id and ended.state is LeaseState.COMPLETED
    assert rig.lease(other.id).state is LeaseState.DISPATCHED
    assert reads.of(held.id) == 1
