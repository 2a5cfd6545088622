"""Attacks on a lease token a claim retry replaced, on DynamoDB Local, through both endpoints
(the HTTP API function behind its authorizer, the worker function on its URL). Each endpoint
keeps a token's verdict up to a minute, so a token used once before its claim was retried
still has a verdict that admits it: the route itself must refuse it, since the lease row no
longer carries its digest."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import tokens, worker
from tenure.api.authorizer import authorize
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_attack_reports_on_copies import LaggingCopies
from tests.conftest import ADMIN, Rig

Send = Callable[[str, str, str, dict[str, Any] | None], dict[str, Any]]


@pytest.fixture
def world(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Rig:
    make_world(rig.svc)
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    return rig


def _on_url(method: str, path: str, token: str, body: dict[str, Any] | None) -> dict[str, Any]:
    """One request on the worker function's URL (its own kept verdicts)."""
    head = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    return dict(worker.handle(to_event(method, f"/api/v1{path}", head, raw), None))


class Gateway:
    """The HTTP API function behind its authorizer, each header's verdict kept as API Gateway
    keeps it (the first answer, reused for the rest of the test: well within its minute)."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Any]] = {}

    def __call__(
        self, method: str, path: str, token: str, body: dict[str, Any] | None
    ) -> dict[str, Any]:
        head = {"host": "unit", "authorization": f"Bearer {token}"}
        raw = json.dumps(body).encode() if body is not None else b""
        event = to_event(method, f"/api/v1{path}", head, raw)
        if token not in self.kept:
            self.kept[token] = authorize(event)["context"]
        event["requestContext"]["authorizer"] = {"lambda": self.kept[token]}
        return dict(api.handle(event, None))


ENDPOINTS: dict[str, Callable[[], Send]] = {"url": lambda: _on_url, "gateway": Gateway}


def _body(answer: dict[str, Any]) -> Any:
    return json.loads(answer.get("body") or "null")


def _worker_token(rig: Rig) -> str:
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None)
    return raw


def _claim(send: Send, raw: str, claim_id: str) -> dict[str, Any]:
    body = {"worker_id": "w-1", "claim_id": claim_id}
    answer = send("POST", f"/pools/{ALPHA}/claim", raw, body)
    assert answer["statusCode"] == 200, answer
    found = _body(answer)
    assert isinstance(found, dict)
    return found


REPORTS: dict[str, dict[str, Any]] = {
    "complete": {"outcome": "success"},
    "fail": {"error": "no"},
    "release": {},
}


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("report", sorted(REPORTS))
def test_a_token_a_claim_retry_replaced_reports_nothing_though_its_verdict_is_kept(
    world: Rig, endpoint: str, report: str
) -> None:
    send = ENDPOINTS[endpoint]()
    world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    raw = _worker_token(world)
    first = _claim(send, raw, "c-1")
    lease_id, spent = first["lease"]["id"], first["token"]
    beat = send("POST", f"/leases/{lease_id}/heartbeat", spent, {})
    assert beat["statusCode"] == 200, beat  # its verdict is kept from here on
    again = _claim(send, raw, "c-1")  # the same claim retried: the same lease, a fresh token
    assert again["lease"]["id"] == lease_id and again["token"] != spent
    answer = send("POST", f"/leases/{lease_id}/{report}", spent, REPORTS[report])
    assert answer["statusCode"] == 401, answer
    stored = world.store.get_lease(lease_id)
    assert stored is not None and not stored.state.terminal, "the spent token ended nothing"
    ended = send("POST", f"/leases/{lease_id}/{report}", again["token"], REPORTS[report])
    assert ended["statusCode"] == 200, ended


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_a_token_a_claim_retry_replaced_renews_nothing_though_its_verdict_is_kept(
    world: Rig, endpoint: str
) -> None:
    send = ENDPOINTS[endpoint]()
    world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    raw = _worker_token(world)
    first = _claim(send, raw, "c-1")
    lease_id, spent = first["lease"]["id"], first["token"]
    assert send("POST", f"/leases/{lease_id}/heartbeat", spent, {})["statusCode"] == 200
    _claim(send, raw, "c-1")
    answer = send("POST", f"/leases/{lease_id}/heartbeat", spent, {})
    assert answer["statusCode"] == 401, answer


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_on_a_copy_from_before_the_retry_the_fresh_token_reports_and_the_spent_one_does_not(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    # The copy still carries the replaced digest: the spent token's write on it loses to the
    # retry's and is refused on the fresh read; the fresh token is never refused on the copy.
    make_world(rig.svc)
    lag = LaggingCopies(rig.store)
    svc = compose(Rows.of(lag, lag), rig.clock, wiring.RandomIds())  # type: ignore[arg-type]
    monkeypatch.setattr(wiring, "service", lambda: svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    send = ENDPOINTS[endpoint]()
    svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    raw = _worker_token(rig)
    first = _claim(send, raw, "c-1")
    lease_id, spent = first["lease"]["id"], first["token"]
    assert send("POST", f"/leases/{lease_id}/heartbeat", spent, {})["statusCode"] == 200
    before = rig.store.get_lease(lease_id)
    assert before is not None
    again = _claim(send, raw, "c-1")
    assert send("POST", f"/leases/{lease_id}/heartbeat", again["token"], {})["statusCode"] == 200
    lag.copies[lease_id] = before
    beat = send("POST", f"/leases/{lease_id}/heartbeat", again["token"], {})
    assert beat["statusCode"] == 200, beat
    refused = send("POST", f"/leases/{lease_id}/complete", spent, {"outcome": "success"})
    assert refused["statusCode"] == 401, refused
    done = send("POST", f"/leases/{lease_id}/complete", again["token"], {"outcome": "success"})
    assert done["statusCode"] == 200, done
    assert lag.served >= 1, "judged on the copy first"
    ended = rig.store.get_lease(lease_id)
    assert ended is not None and ended.state.terminal


def test_a_token_a_claim_retry_replaced_files_no_task_on_the_http_api(world: Rig) -> None:
    # What a lease token may do beyond its reports (file a child task) goes through the same
    # check on its lease row.
    send = Gateway()
    world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    raw = _worker_token(world)
    first = _claim(send, raw, "c-1")
    spent = first["token"]
    child = {"space": SPACE, "title": "child"}
    assert send("POST", "/tasks", spent, child)["statusCode"] == 201  # its verdict is kept
    again = _claim(send, raw, "c-1")
    refused = send("POST", "/tasks", spent, child)
    assert refused["statusCode"] == 401, refused
    assert send("POST", "/tasks", again["token"], child)["statusCode"] == 201
