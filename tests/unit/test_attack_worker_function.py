"""Attacks on the worker function and the claim function on their function URLs, where no
authorizer stands in front: every route of the table that is not the function's own is 404
whoever asks, and on the function's own routes a token answers there what it answers through
the HTTP API (a read or member operator, a worker token limited to other pools, a lease
token on a worker's route, a worker token on another worker's lease)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure.api.routes import BASE, ROUTES, WORKER_ROUTES
from tenure.domain.states import LeaseState
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, POOL, Rig

Call = Any
CLAIM = ("POST", f"{BASE}/pools/<pool>/claim")


def _event(method: str, path: str, token: str | None, body: Any) -> dict[str, Any]:
    headers = {"host": "unit"} | ({"authorization": f"Bearer {token}"} if token else {})
    raw = json.dumps(body).encode() if body is not None else b""
    return to_event(method, path if path.startswith(BASE) else f"{BASE}{path}", headers, raw)


def _answer(out: dict[str, Any]) -> tuple[int, Any]:
    text = out.get("body") or ""
    return out["statusCode"], json.loads(text) if text else None


def _code(answer: tuple[int, Any]) -> tuple[int, str]:
    status, body = answer
    return status, body["error"]["code"]


@pytest.fixture
def calls(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> dict[str, Call]:
    """One request as each endpoint receives it: the worker function's URL, the claim
    function's URL, and the HTTP API (its authorizer, then the API function)."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    hosts = {
        "url": lambda_host.invoke_worker,
        "claim_url": lambda_host.invoke_claim,
        "http_api": lambda_host.invoke,
    }

    def of(host: Any) -> Call:
        def call(method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
            return _answer(host(_event(method, path, token, body)))

        return call

    return {name: of(host) for name, host in hosts.items()}


def _token(rig: Rig, kind: str, role: str | None = None, **scope: Any) -> str:
    spaces, pools = scope.get("spaces"), scope.get("pools")
    name = f"{kind}-{role}-{uuid.uuid4().hex[:8]}"
    _, raw = rig.svc.tokens.create_token(ADMIN, name, kind, role, spaces, pools)
    return raw


def _concrete(rule: str) -> str:
    return re.sub(r"<(\w+)>", lambda m: f"{m[1]}_000001", rule)


NOT_THE_WORKERS = sorted(key for key in ROUTES if key not in WORKER_ROUTES)
NOT_THE_CLAIMS = sorted(key for key in ROUTES if key != CLAIM)


def test_every_route_but_the_worker_s_is_404_on_the_worker_url_whoever_asks(
    rig: Rig, calls: dict[str, Call]
) -> None:
    won = rig.claimed()
    bearers = [
        None,
        _token(rig, "operator", "admin"),
        _token(rig, "operator", "read"),
        _token(rig, "worker"),
        won.token,
    ]
    assert len(NOT_THE_WORKERS) > 50, "the table's operator, MCP and board routes"
    for method, rule in NOT_THE_WORKERS:
        for bearer in bearers:
            got = calls["url"](method, _concrete(rule), bearer, {})
            assert _code(got) == (404, "not_found"), (method, rule, got)
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED


def test_every_route_but_the_claim_is_404_on_the_claim_url_whoever_asks(
    rig: Rig, calls: dict[str, Call]
) -> None:
    won = rig.claimed()
    bearers = [None, _token(rig, "operator", "admin"), _token(rig, "worker"), won.token]
    for method, rule in NOT_THE_CLAIMS:
        for bearer in bearers:
            got = calls["claim_url"](method, _concrete(rule), bearer, {})
            assert _code(got) == (404, "not_found"), (method, rule, got)
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED


def _worker_calls(lease_id: str) -> list[tuple[str, str, Any]]:
    return [
        ("POST", f"/pools/{POOL}/claim", {"worker_id": "w9"}),
        ("POST", "/workers/w1/heartbeat", {"leases": [{"id": lease_id, "fence": 1}]}),
        ("POST", f"/leases/{lease_id}/start", {}),
        ("POST", f"/leases/{lease_id}/heartbeat", {}),
        ("POST", f"/leases/{lease_id}/complete", {}),
        ("POST", f"/leases/{lease_id}/fail", {"error": "no"}),
        ("POST", f"/leases/{lease_id}/release", {}),
        ("GET", f"/leases/{lease_id}/payload", None),
        ("POST", f"/leases/{lease_id}/logs", {"events": [{"message": "x", "stream": "stdout"}]}),
    ]


@pytest.mark.parametrize("role", ["read", "member", "admin"])
def test_an_operator_token_on_every_worker_route_is_refused_as_the_http_api_refuses_it(
    rig: Rig, calls: dict[str, Call], role: str
) -> None:
    operator = _token(rig, "operator", role)
    won = rig.claimed()
    rig.task()  # something to claim, were the claim let through
    for method, path, body in _worker_calls(won.lease.id):
        got = calls["url"](method, path, operator, body)
        assert got[0] == 403, (path, got)
        assert _code(got) == _code(calls["http_api"](method, path, operator, body)), path
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED, "nothing reported"
    assert len(rig.store.queue_candidates(POOL, 10)) == 1, "nothing claimed"


def test_a_lease_token_on_the_worker_s_own_routes_is_refused_and_claims_nothing(
    rig: Rig, calls: dict[str, Call]
) -> None:
    won = rig.claimed()
    rig.task()
    for name in ("url", "claim_url"):
        got = calls[name]("POST", f"/pools/{POOL}/claim", won.token, {"worker_id": "w1"})
        assert got[0] == 403, (name, got)
    beat = {"leases": [{"id": won.lease.id, "fence": 1}]}
    got = calls["url"]("POST", "/workers/w1/heartbeat", won.token, beat)
    assert got[0] == 403, got
    assert len(rig.store.queue_candidates(POOL, 10)) == 1, "nothing claimed"


def test_a_worker_token_limited_to_other_pools_claims_and_reports_nothing_here(
    rig: Rig, calls: dict[str, Call]
) -> None:
    rig.make_pool("elsewhere")
    outsider = _token(rig, "worker", pools=("elsewhere",))
    won = rig.claimed()
    rig.task()
    for name in ("url", "claim_url"):
        got = calls[name]("POST", f"/pools/{POOL}/claim", outsider, {"worker_id": "w1"})
        assert got[0] in (403, 404), (name, got)
    for method, path, body in _worker_calls(won.lease.id)[1:]:
        got = calls["url"](method, path, outsider, body)
        if path.startswith("/workers/"):  # answered lease by lease: each one refused,
            [item] = got[1]["leases"]  # as a lease that does not exist would be
            assert item["error"]["code"] == "lease_not_found", got
        else:
            assert got[0] in (403, 404, 409), (path, got)
        assert got == calls["http_api"](method, path, outsider, body), path
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED, "nothing reported"
    assert len(rig.store.queue_candidates(POOL, 10)) == 1, "nothing claimed"


def test_a_worker_token_completes_nothing_it_did_not_claim(
    rig: Rig, calls: dict[str, Call]
) -> None:
    # The final reports take a worker token too (to carry `next`): only that token's and
    # worker's own lease. Another worker token, or this token under another worker_id,
    # changes nothing and claims nothing.
    mine = _token(rig, "worker")
    other = _token(rig, "worker")
    rig.task()
    rig.task()
    status, won = calls["url"]("POST", f"/pools/{POOL}/claim", mine, {"worker_id": "w1"})
    assert status == 200
    lease_id = won["lease"]["id"]
    for bearer, worker_id in ((other, "w1"), (mine, "w2")):
        body = {"outcome": "success", "next": {"worker_id": worker_id, "claim_id": "n-1"}}
        got = calls["url"]("POST", f"/leases/{lease_id}/complete", bearer, body)
        assert got[0] in (403, 409), got
    assert rig.lease(lease_id).state is LeaseState.DISPATCHED
    assert len(rig.store.queue_candidates(POOL, 10)) == 1, "nothing claimed"


def test_an_operator_token_of_another_space_reaches_nothing_on_the_worker_url(
    rig: Rig, calls: dict[str, Call]
) -> None:
    rig.svc.spaces.create_space(ADMIN, "SEC", "Security", None)
    scoped = _token(rig, "operator", "admin", spaces=("SEC",))
    won = rig.claimed()
    for method, path, body in _worker_calls(won.lease.id):
        got = calls["url"](method, path, scoped, body)
        assert got[0] in (403, 404), (path, got)
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED
