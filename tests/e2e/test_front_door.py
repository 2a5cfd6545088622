"""The local front door's own answers (405, 413, 500) are the API's error envelopes."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from tenure_cli.local.engines import free_port
from tenure_cli.local.frontdoor import MAX_BODY_BYTES, FrontDoor

from tests.conftest import LocalStack


def crash(event: dict[str, Any]) -> dict[str, Any]:
    """An invocation that fails, as a handler with an uncaught error would (runs in a worker)."""
    raise RuntimeError("the handler blew up")


def _connect(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)


def _envelope(answer: http.client.HTTPResponse, status: int, code: str) -> dict[str, Any]:
    raw = answer.read()
    assert answer.status == status, (answer.status, raw)
    assert answer.getheader("content-type", "").startswith("application/json"), raw
    body: dict[str, Any] = json.loads(raw)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"].strip(), body
    return body


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS", "BREW"])
def test_a_method_the_front_door_does_not_serve_is_405_with_allow(
    local_stack: LocalStack, method: str
) -> None:
    conn = _connect(local_stack.base)
    conn.request(method, "/api/v1/health")
    answer = conn.getresponse()
    body = _envelope(answer, 405, "method_not_allowed")
    assert method in body["error"]["message"]
    allowed = {m.strip() for m in answer.getheader("allow", "").split(",")}
    assert {"GET", "POST", "PUT", "PATCH", "DELETE"} <= allowed, allowed
    assert method not in allowed
    conn.close()

    conn = _connect(local_stack.base)
    conn.request("GET", "/api/v1/health")
    assert conn.getresponse().status == 200, "the front door still serves"
    conn.close()


def test_a_body_over_api_gateways_limit_is_413_payload_too_large(
    local_stack: LocalStack,
) -> None:
    conn = _connect(local_stack.base)
    # Only the headers: the front door must answer from Content-Length, without the body.
    conn.putrequest("POST", "/api/v1/spaces")
    conn.putheader("authorization", f"Bearer {local_stack.admin_token}")
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", str(MAX_BODY_BYTES + 1))
    conn.endheaders()
    answer = conn.getresponse()
    _envelope(answer, 413, "payload_too_large")
    assert answer.getheader("connection", "").lower() == "close", "the unread body ends it"
    conn.close()


@pytest.fixture
def crashing_door() -> Iterator[FrontDoor]:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=1, invoke=crash).start()
    yield door
    door.stop()


def test_an_invocation_that_fails_is_500_internal_error(crashing_door: FrontDoor) -> None:
    conn = _connect(f"http://127.0.0.1:{crashing_door.port}")
    conn.request("GET", "/api/v1/leases?space=X", headers={"authorization": "Bearer x"})
    body = _envelope(conn.getresponse(), 500, "internal_error")
    assert "blew up" not in body["error"]["message"], "no internals in the answer"
    conn.close()


def test_stopping_a_front_door_that_never_served_returns_at_once() -> None:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=1)
    door.stop()  # hung forever when shutdown() waited for a serve_forever that never ran
    door.stop()
    again = FrontDoor("127.0.0.1", door.port, concurrency=1)  # the port was freed
    again.stop()
