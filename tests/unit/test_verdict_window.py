"""How long a token's verdict is trusted. API Gateway keeps the authorizer's answer 60 s per
Authorization header, and the worker function keeps its own as long: within that window a
token revoked meanwhile still passes. An expired token never does: its principal carries its
`expires_at`, which the worker function and the API function check against the clock, with no
read. And the one route that mints a credential outliving the caller's own token, POST
/tokens, reads the caller's token row again rather than trust a cached verdict."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import tokens, worker
from tenure.api.authorizer import authorize
from tenure.app.setup.tokens import INSTANCE_TIMELINE
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, POOL, Rig

Answer = tuple[int, Any]


class _Context:
    function_name = "tenure-api-unit"
    aws_request_id = "unit"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def _event(method: str, path: str, token: str, body: Any = None) -> dict[str, Any]:
    headers = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    return to_event(method, f"/api/v1{path}", headers, raw)


def _answer(out: dict[str, Any]) -> Answer:
    text = out.get("body") or ""
    return out["statusCode"], json.loads(text) if text else None


def _refusal(answer: Answer) -> tuple[int, str, str]:
    status, body = answer
    return status, body["error"]["code"], body["error"]["message"]


class CachedAuthorizer:
    """The HTTP API as API Gateway runs it: the authorizer's context for an Authorization
    header, kept from the first request (its 60 s cache), handed to the API function."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Any]] = {}

    def __call__(self, method: str, path: str, token: str, body: Any = None) -> Answer:
        event = _event(method, path, token, body)
        if token not in self.kept:
            self.kept[token] = authorize(copy.deepcopy(event))["context"]
        event["requestContext"]["authorizer"] = {"lambda": dict(self.kept[token])}
        return _answer(api.handle(event, _Context()))


@pytest.fixture
def service(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Rig:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    return rig


def _reads(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The token rows read from now on (by hash or by id)."""
    seen: list[str] = []
    for name in ("get_token", "get_token_by_id"):
        real: Callable[[str], Any] = getattr(rig.store, name)

        def counted(key: str, real: Callable[[str], Any] = real) -> Any:
            seen.append(key)
            return real(key)

        monkeypatch.setattr(rig.store, name, counted)
    return seen


def _url(method: str, path: str, token: str, body: Any = None) -> Answer:
    return _answer(lambda_host.invoke_worker(_event(method, path, token, body)))


CLAIM = ("POST", f"/pools/{POOL}/claim")


def test_an_expired_token_is_refused_on_the_worker_url_though_its_verdict_is_kept(
    service: Rig,
) -> None:
    rig = service
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None, 30)
    rig.task()
    assert _url(*CLAIM, raw, {"worker_id": "w1"})[0] == 200
    rig.task()
    rig.clock.advance(50)  # 20 s past its expiry, well within the 60 s a verdict is kept
    assert _refusal(_url(*CLAIM, raw, {"worker_id": "w1"})) == (
        401,
        "unauthenticated",
        "the token has expired",
    )
    assert _refusal(_answer(lambda_host.invoke(_event(*CLAIM, raw, {"worker_id": "w1"})))) == (
        401,
        "unauthenticated",
        "the token has expired",
    )


def test_the_api_function_refuses_a_cached_principal_past_its_expiry_without_a_read(
    service: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = service
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None, 30)
    http_api = CachedAuthorizer()
    rig.task()
    assert http_api(*CLAIM, raw, {"worker_id": "w1"})[0] == 200
    reads = _reads(rig, monkeypatch)
    rig.task()
    rig.clock.advance(29)
    assert http_api(*CLAIM, raw, {"worker_id": "w1"})[0] == 200  # the cached verdict, alive
    rig.clock.advance(1)
    assert _refusal(http_api(*CLAIM, raw, {"worker_id": "w1"}))[:2] == (401, "unauthenticated")
    assert reads == []  # judged on the principal the authorizer cached


def test_a_revoked_admin_token_mints_no_token_with_the_verdict_cached_before(
    service: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = service
    token, raw = rig.svc.tokens.create_token(ADMIN, "ops", "operator", "admin", None, None)
    http_api = CachedAuthorizer()
    assert http_api("GET", "/tokens", raw)[0] == 200
    rig.svc.tokens.revoke_token(ADMIN, token.id)
    reads = _reads(rig, monkeypatch)
    minted = http_api("POST", "/tokens", raw, {"name": "backdoor", "kind": "operator"})
    assert _refusal(minted)[:2] == (401, "unauthenticated")
    assert len(reads) == 1  # the caller's own token row, read again
    made = rig.store.timeline(*INSTANCE_TIMELINE, 100)
    assert [e.data["name"] for e in made if e.type == "token.created"] == ["ops"]
    # What stays open within the window (docs/security.md): a read of the cached verdict.
    assert http_api("GET", "/tokens", raw)[0] == 200


def test_a_live_admin_token_mints_a_token_with_one_more_read(
    service: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = service
    _, raw = rig.svc.tokens.create_token(ADMIN, "ops", "operator", "admin", None, None)
    http_api = CachedAuthorizer()
    assert http_api("GET", "/tokens", raw)[0] == 200
    reads = _reads(rig, monkeypatch)
    status, made = http_api("POST", "/tokens", raw, {"name": "ci", "kind": "worker"})
    assert status == 201 and made["token"].startswith("tnr_w_")
    assert len(reads) == 1
