"""A worker's request reads each lease row once: a row the request has already read
consistently (to resolve whose lease it is) is the one its report is judged and written
against, and a stale copy of it still loses its conditional write and is judged again on a
fresh read, never acted on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure.app.leases.handover import NextClaim
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import WORKER, Rig, as_lease

SUCCESS = {"outcome": "success"}
Send = Callable[..., tuple[int, Any]]


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


# ------------------------------------------- the worker function's own check of a lease token


@pytest.fixture
def on_url(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Send:
    """The worker function on its function URL: the bearer is checked in the same process
    as the route, with no verdict kept from an earlier request."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts(clock=lambda: rig.clock.now_ms() / 1e3))

    def send(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        head = {"host": "unit", "authorization": f"Bearer {token}"}
        raw = json.dumps(body).encode() if body is not None else b""
        out = lambda_host.invoke_worker(to_event(method, f"/api/v1{path}", head, raw))
        return out["statusCode"], json.loads(out["body"]) if out.get("body") else None

    return send


def test_a_lease_token_s_report_on_the_function_url_reads_its_lease_once(
    rig: Rig, reads: LeaseReads, on_url: Send
) -> None:
    rig.task()
    won = rig.claim()
    reads.ids.clear()
    status, answer = on_url("POST", f"/leases/{won.lease.id}/complete", won.token, SUCCESS)
    assert status == 200, answer
    assert answer["lease"]["state"] == "completed"
    assert reads.of(won.lease.id) == 1  # the token check's read is the report's


def test_a_lease_token_s_payload_on_the_function_url_reads_its_lease_once(
    rig: Rig, reads: LeaseReads, on_url: Send
) -> None:
    rig.task()
    won = rig.claim()
    reads.ids.clear()
    status, answer = on_url("GET", f"/leases/{won.lease.id}/payload", won.token)
    assert status == 200, answer
    assert answer["lease"]["id"] == won.lease.id
    assert reads.of(won.lease.id) == 1


def test_a_row_the_token_check_read_serves_one_use_and_a_kept_verdict_reads_afresh(
    rig: Rig, reads: LeaseReads, on_url: Send
) -> None:
    """The next request, let in on the verdict kept from this one, reads the row itself: a
    row is never carried from one request to another."""
    rig.task()
    won = rig.claim()
    assert on_url("POST", f"/leases/{won.lease.id}/start", won.token)[0] == 200
    reads.ids.clear()
    status, answer = on_url("POST", f"/leases/{won.lease.id}/complete", won.token, SUCCESS)
    assert status == 200, answer
    assert reads.of(won.lease.id) == 1  # no token check this time: the report's own read


def test_a_foreign_lease_token_on_the_function_url_is_refused_whatever_the_check_read(
    rig: Rig, on_url: Send
) -> None:
    rig.task()
    rig.task()
    mine, theirs = rig.claim(), rig.claim(worker_id="w2")
    status, answer = on_url("POST", f"/leases/{theirs.lease.id}/complete", mine.token, SUCCESS)
    assert status in (401, 403, 404), answer
    assert rig.lease(theirs.lease.id).state is LeaseState.DISPATCHED


def test_a_lease_token_s_heartbeat_on_the_function_url_reads_its_lease_once(
    rig: Rig, reads: LeaseReads, on_url: Send
) -> None:
    """Judged on the check's consistent read, which is all a heartbeat's cheap read is for."""
    rig.task()
    won = rig.claim()
    reads.ids.clear()
    status, answer = on_url("POST", f"/leases/{won.lease.id}/heartbeat", won.token)
    assert status == 200, answer
    assert answer["state"] == "running"  # the first heartbeat starts the lease
    assert reads.of(won.lease.id) == 1
