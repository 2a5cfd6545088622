"""A 401 from the MCP endpoint, as `tenure local` serves it (the authorizer, then the API
function): it names the bearer scheme in `WWW-Authenticate`, as RFC 7235 requires of every
401 and as MCP clients read it. Every other route's 401 comes from the same place."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import Rig

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
MCP = "/api/v1/mcp"
BARE = 'Bearer realm="tenure"'
INVALID = 'Bearer realm="tenure", error="invalid_token"'


def _served(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, method: str, path: str, authorization: str | None
) -> dict[str, Any]:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    headers = {"host": "unit", "content-type": "application/json", "accept": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    return lambda_host.invoke(to_event(method, path, headers, PING if method == "POST" else b""))


@pytest.mark.parametrize(
    ("authorization", "challenge"),
    [
        (None, BARE),
        ("Basic dXNlcjpwdw==", BARE),  # no bearer token was sent: the scheme alone
        ("Bearer tnr_o_nobody.abcdefghijklmnopqrstuvwxyz012345", INVALID),
        ("Bearer not-a-token", INVALID),
    ],
    ids=["no-header", "other-scheme", "unknown-token", "malformed-token"],
)
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_a_401_from_mcp_carries_the_bearer_challenge(
    rig: Rig,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    authorization: str | None,
    challenge: str,
) -> None:
    out = _served(rig, monkeypatch, method, MCP, authorization)
    assert out["statusCode"] == 401, out
    assert out["headers"]["WWW-Authenticate"] == challenge, out
    assert json.loads(out["body"])["error"]["code"] == "unauthenticated"


def test_any_routes_401_carries_the_same_challenge(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _served(rig, monkeypatch, "GET", "/api/v1/whoami", None)
    assert (out["statusCode"], out["headers"]["WWW-Authenticate"]) == (401, BARE), out
    unknown = _served(rig, monkeypatch, "GET", "/api/v1/nowhere", "Bearer tnr_w_x.y")
    assert unknown["statusCode"] == 401, unknown
    assert unknown["headers"]["WWW-Authenticate"] == INVALID, unknown


def test_a_refusal_that_is_not_a_401_carries_no_challenge(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    event = to_event("POST", "/api/v1/spaces", {"host": "unit"}, b"{}")
    principal = {"kind": "operator", "token_id": "tok-read", "role": "read"}
    event["requestContext"]["authorizer"] = {"lambda": {"principal": json.dumps(principal)}}
    out = api.handle(event, None)
    assert out["statusCode"] == 403, out
    assert "WWW-Authenticate" not in out["headers"], out


def test_the_document_names_the_challenge_on_every_401() -> None:
    for path, ops in api.contract()["paths"].items():
        for method, op in ops.items():
            if "401" in op["responses"]:
                headers = op["responses"]["401"].get("headers", {})
                assert "WWW-Authenticate" in headers, (method, path)
