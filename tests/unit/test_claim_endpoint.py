"""The claim function (tenure.api.worker.handle_claim): the claim route alone, on its own URL
(the bearer checked there) and behind the HTTP API's claim route (the authorizer's context
used); and the worker function naming it on its claim answers (Tenure-Claim-Api)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure.config import settings
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, POOL, Rig

CLAIM_URL = "https://claims.example/api/v1"


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    rig = Rig()
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    monkeypatch.setenv("TENURE_CLAIM_URL", CLAIM_URL)
    settings.cache_clear()
    yield rig
    settings.cache_clear()


def _event(path: str, token: str | None, body: Any = None) -> dict[str, Any]:
    headers = {"host": "unit"} | ({"authorization": f"Bearer {token}"} if token else {})
    return to_event("POST", f"/api/v1{path}", headers, json.dumps(body or {}).encode())


def _worker_token(rig: Rig) -> str:
    return rig.svc.tokens.create_token(ADMIN, "fleet", "worker", None, None, None)[1]


def test_the_worker_function_names_the_claim_url_on_its_claim_answers_only(rig: Rig) -> None:
    token = _worker_token(rig)
    empty = lambda_host.invoke_worker(_event(f"/pools/{POOL}/claim", token, {"worker_id": "w1"}))
    assert empty["statusCode"] == 204
    assert empty["headers"][worker.CLAIM_API_HEADER] == CLAIM_URL
    rig.task()
    won = lambda_host.invoke_worker(_event(f"/pools/{POOL}/claim", token, {"worker_id": "w1"}))
    assert won["statusCode"] == 200 and won["headers"][worker.CLAIM_API_HEADER] == CLAIM_URL
    beat = lambda_host.invoke_worker(_event("/workers/w1/heartbeat", token, {"leases": []}))
    assert beat["statusCode"] == 200
    assert worker.CLAIM_API_HEADER not in (beat.get("headers") or {})


def test_the_claim_function_serves_the_claim_route_alone_and_checks_the_bearer(
    rig: Rig,
) -> None:
    token = _worker_token(rig)
    out = lambda_host.invoke_claim(_event(f"/pools/{POOL}/claim", token, {"worker_id": "w1"}))
    assert out["statusCode"] == 204
    assert worker.CLAIM_API_HEADER not in (out.get("headers") or {})  # it is the claim URL
    beat = lambda_host.invoke_claim(_event("/workers/w1/heartbeat", token, {"leases": []}))
    assert beat["statusCode"] == 404
    unknown = "tnr_w_" + "x" * 32
    out = lambda_host.invoke_claim(_event(f"/pools/{POOL}/claim", unknown, {"worker_id": "w1"}))
    assert out["statusCode"] == 401
    out = lambda_host.invoke_claim(_event(f"/pools/{POOL}/claim", None, {"worker_id": "w1"}))
    assert out["statusCode"] == 401


def test_behind_the_http_api_the_claim_function_acts_on_the_authorizer_s_verdict(
    rig: Rig,
) -> None:
    token = _worker_token(rig)
    rig.task()
    event = _event(f"/pools/{POOL}/claim", token, {"worker_id": "w1"})
    assert event["routeKey"] == "POST /api/v1/pools/{pool}/claim"
    assert event["pathParameters"] == {"pool": POOL}
    out = lambda_host.invoke_claim_route(event)
    assert out["statusCode"] == 200, out
    # An operator's token passes the authorizer and is refused by the route, as on the API.
    operator = rig.svc.tokens.create_token(ADMIN, "ops", "operator", "admin", None, None)[1]
    out = lambda_host.invoke_claim_route(
        _event(f"/pools/{POOL}/claim", operator, {"worker_id": "w1"})
    )
    assert out["statusCode"] == 403
