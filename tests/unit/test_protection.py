"""Each way in that the API used to leave open, as a request that must now be refused: a token
that could not be taken back, an ended lease's token still acting, a garbage bearer costing
a table read, a named stage's path skipping the checks, the OpenAPI document rebuilt on
every request. Requests go through the authorizer and then the API handler, as API Gateway
chains them, on the fake store and a manual clock."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import surface
from tenure.api.authorizer import authorize
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink
from tests.unit.support import ADMIN, POOL, READER, SPACE, Rig, as_lease

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    made = Rig()
    made.svc.artifacts.blobs = FakeBlobs()
    made.svc.artifacts.log_sink = FakeLogSink()
    monkeypatch.setattr(wiring, "service", lambda: made.svc)
    return made


def send(
    method: str,
    path: str,
    token: str | None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    head = {"host": "unit", **(headers or {})}
    if token is not None:
        head["authorization"] = f"Bearer {token}"
    raw = json.dumps(body).encode() if body is not None else b""
    event = to_event(method, f"/api/v1{path}", head, raw)
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    out = api.handle(event, None)
    text = out.get("body") or ""
    if out.get("isBase64Encoded"):
        text = base64.b64decode(text).decode()
    return out["statusCode"], json.loads(text) if text else None


def code(answer: tuple[int, Any]) -> tuple[int, str | None]:
    status, body = answer
    return status, (body or {}).get("error", {}).get("code") if isinstance(body, dict) else None


def admin_token(rig: Rig, name: str = "root", **kw: Any) -> tuple[str, str]:
    token, raw = rig.svc.tokens.create_token(ADMIN, name, "operator", "admin", None, None, **kw)
    return token.id, raw


# ------------------------------------------------------------------------------ tokens


def test_a_revoked_token_answers_401_everywhere_and_its_revocation_is_recorded(rig: Rig) -> None:
    root_id, root = admin_token(rig)
    made = send("POST", "/tokens", root, {"name": "ci", "kind": "operator", "role": "member"})
    assert made[0] == 201
    ci = made[1]["token"]
    assert send("GET", f"/leases?space={SPACE}", ci)[0] == 200
    assert send("DELETE", f"/tokens/{made[1]['id']}", root)[0] == 204
    assert code(send("GET", f"/leases?space={SPACE}", ci)) == (401, "unauthenticated")
    assert code(send("POST", "/tasks", ci, {"space": SPACE, "title": "x"})) == (
        401,
        "unauthenticated",
    )
    listed = {t["name"]: t for t in send("GET", "/tokens", root)[1]["tokens"]}
    assert listed["ci"]["revoked_at"] is not None
    events = send("GET", "/instance/activity", root)[1]["events"]
    assert [(ev["type"], ev["data"]["by"]) for ev in events][-2:] == [
        ("token.created", root_id),
        ("token.revoked", root_id),
    ]
    assert ci not in json.dumps(events)


def test_revoking_an_unknown_token_is_not_found(rig: Rig) -> None:
    """Before tokens could be revoked, the route itself was missing (404 "no such route"):
    the answer must be about the token, and a known token must be revocable."""
    _, root = admin_token(rig)
    status, body = send("DELETE", "/tokens/tok_nope", root)
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert "tok_nope" in body["error"]["message"]
    made = send("POST", "/tokens", root, {"name": "ci", "kind": "operator"})[1]
    assert send("DELETE", f"/tokens/{made['id']}", root)[0] == 204


def test_a_token_past_its_expiry_answers_401(rig: Rig) -> None:
    _, root = admin_token(rig)
    made = send(
        "POST", "/tokens", root, {"name": "short", "kind": "worker", "expires_in_seconds": 60}
    )
    assert made[0] == 201 and made[1]["expires_at"] is not None
    worker = made[1]["token"]
    assert send("POST", f"/pools/{POOL}/claim", worker, {"worker_id": "w"})[0] == 204
    rig.clock.advance(60)
    assert code(send("POST", f"/pools/{POOL}/claim", worker, {"worker_id": "w"})) == (
        401,
        "unauthenticated",
    )


def test_a_token_lasts_at_most_ten_years(rig: Rig) -> None:
    """Ten years is taken and eleven refused naming the field (a release that took no
    `expires_in_seconds` at all refused both, as an unknown field)."""
    _, root = admin_token(rig)
    body = {"name": "forever", "kind": "worker", "expires_in_seconds": 11 * 366 * 24 * 3600}
    status, answer = send("POST", "/tokens", root, body)
    assert (status, answer["error"]["code"]) == (422, "validation_failed")
    assert "expires_in_seconds" in answer["error"]["message"]
    ten = {"name": "decade", "kind": "worker", "expires_in_seconds": 10 * 366 * 24 * 3600}
    made = send("POST", "/tokens", root, ten)
    assert made[0] == 201 and made[1]["expires_at"] is not None


def test_the_token_list_shows_no_secret_and_a_scoped_admin_sees_only_its_spaces(
    rig: Rig,
) -> None:
    _, root = admin_token(rig)
    rig.svc.spaces.create_space(ADMIN, "ELSE", "Elsewhere", None)
    scoped = send(
        "POST",
        "/tokens",
        root,
        {"name": "ops", "kind": "operator", "role": "admin", "spaces": [SPACE]},
    )[1]
    send("POST", "/tokens", root, {"name": "ops-read", "kind": "operator", "spaces": [SPACE]})
    send("POST", "/tokens", root, {"name": "else", "kind": "operator", "spaces": ["ELSE"]})
    everything = send("GET", "/tokens", root)[1]["tokens"]
    assert {t["name"] for t in everything} == {"root", "ops", "ops-read", "else"}
    text = json.dumps(everything)
    for token in rig.store.tokens.values():
        assert token.token_hash not in text
    assert "tnr_" not in text
    seen = send("GET", "/tokens", scoped["token"])[1]["tokens"]
    assert {t["name"] for t in seen} == {"ops", "ops-read"}
    assert [t["name"] for t in send("GET", "/tokens?kind=worker", root)[1]["tokens"]] == []
    other = next(t for t in everything if t["name"] == "else")
    assert code(send("DELETE", f"/tokens/{other['id']}", scoped["token"])) == (404, "not_found")


def test_last_use_is_written_at_most_once_a_minute(rig: Rig) -> None:
    _, root = admin_token(rig)
    for _ in range(5):
        send("GET", "/whoami", root)
    assert rig.store.writes.count("touch_token") == 1
    rig.clock.advance(61)
    send("GET", "/whoami", root)
    assert rig.store.writes.count("touch_token") == 2
    listed = send("GET", "/tokens", root)[1]["tokens"]
    assert listed[0]["last_used_at"] is not None


def test_bootstrap_refuses_a_second_token_of_the_same_name(rig: Rig) -> None:
    token, raw = rig.svc.tokens.bootstrap_operator("admin")
    assert raw.startswith("tnr_o_") and token.role == "admin"
    with pytest.raises(Exception, match="already exists"):
        rig.svc.tokens.bootstrap_operator("admin")


# ------------------------------------------------------------------ ended leases


def ended(rig: Rig, report: str = "complete") -> tuple[str, str, str]:
    """A lease completed by its own token: (its id, its token, its task's id)."""
    won = rig.claimed()
    token = won.token
    assert send("POST", f"/leases/{won.lease.id}/start", token)[0] == 200
    body = {"error": "boom"} if report == "fail" else {}
    assert send("POST", f"/leases/{won.lease.id}/{report}", token, body)[0] == 200
    return won.lease.id, token, won.lease.task_id or ""


def test_an_ended_leases_token_cannot_list_or_read_its_spaces_leases(rig: Rig) -> None:
    _, token, _ = ended(rig)
    other = rig.claimed("w2").lease.id
    assert code(send("GET", f"/leases?space={SPACE}", token)) == (401, "unauthenticated")
    assert code(send("GET", f"/leases/{other}", token)) == (401, "unauthenticated")
    for name, args in (("leases_list", {"space_key": SPACE}), ("leases_get", {"lease_id": other})):
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        rpc["params"] = {"name": name, "arguments": args}
        status, body = send("POST", "/mcp", token, rpc, MCP_HEADERS)
        assert status == 200 and body["result"]["isError"], body
        assert body["result"]["structuredContent"]["error"]["code"] == "unauthenticated"


def test_an_ended_leases_token_cannot_file_tasks_place_blocks_or_force(rig: Rig) -> None:
    _, token, task_id = ended(rig)
    other = rig.claimed("w2").lease.id
    _, root = admin_token(rig)
    assert send("PATCH", "/instance", root, {"allow_agent_force": True})[0] == 200
    refused = (401, "unauthenticated")
    assert code(send("POST", "/tasks", token, {"title": "more"})) == refused
    assert (
        code(send("POST", f"/tasks/{task_id}/blocks", token, {"kind": "error", "reason": "x"}))
        == refused
    )
    assert code(send("GET", f"/tasks/{task_id}/blocks", token)) == refused
    force = {"lease_ids": [other], "reason": "stuck"}
    assert code(send("POST", "/leases/bulk/release", token, force)) == refused
    assert code(send("POST", "/leases/bulk/fail", token, force)) == refused
    assert rig.lease(other).state.value == "dispatched"


def test_an_ended_leases_reports_keep_their_answers(rig: Rig) -> None:
    lease_id, token, _ = ended(rig)
    first = send("POST", f"/leases/{lease_id}/complete", token, {})
    rig.clock.advance(3600)
    assert send("POST", f"/leases/{lease_id}/complete", token, {}) == first
    assert code(send("POST", f"/leases/{lease_id}/fail", token, {"error": "x"})) == (
        409,
        "invalid_transition",
    )
    assert code(send("POST", f"/leases/{lease_id}/heartbeat", token, {}))[0] == 409
    assert code(send("POST", f"/leases/{lease_id}/release", token, {}))[0] == 409


def test_an_ended_leases_token_ships_its_last_logs_for_ten_minutes_then_nothing(rig: Rig) -> None:
    lease_id, token, _ = ended(rig)
    lines = {"events": [{"stream": "stdout", "message": "done"}]}
    attachment = {"filename": "a.txt", "content_type": "text/plain", "byte_size": 1}
    rig.clock.advance(9 * 60)
    assert send("POST", f"/leases/{lease_id}/logs", token, lines)[0] == 202
    assert send("POST", f"/leases/{lease_id}/attachments", token, attachment)[0] == 201
    assert send("GET", f"/leases/{lease_id}/payload", token)[0] == 200
    assert send("GET", f"/leases/{lease_id}/logs", token)[0] == 200
    assert send("GET", f"/leases/{lease_id}/attachments", token)[0] == 200
    rig.clock.advance(61)
    refused = (401, "unauthenticated")
    assert code(send("POST", f"/leases/{lease_id}/logs", token, lines)) == refused
    assert code(send("POST", f"/leases/{lease_id}/attachments", token, attachment)) == refused
    assert code(send("GET", f"/leases/{lease_id}/payload", token)) == refused
    assert code(send("GET", f"/leases/{lease_id}/logs", token)) == refused


def test_a_principal_cached_from_before_the_end_is_caught_on_the_lease_row(rig: Rig) -> None:
    """API Gateway caches the authorizer's verdict for up to 60 s: a principal minted while
    the lease ran still says so after it ended, and the use case's own read refuses it."""
    lease_id, _, task_id = ended(rig)
    stale = as_lease(lease_id)
    assert stale.lease_ended_at is None
    event = to_event("POST", f"/api/v1/tasks/{task_id}/blocks", {"host": "unit"}, b"{}")
    event["body"] = json.dumps({"kind": "error", "reason": "x"})
    principal = json.dumps(dataclasses.asdict(stale))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out = api.handle(event, None)
    assert (out["statusCode"], json.loads(out["body"])["error"]["code"]) == (
        401,
        "unauthenticated",
    )
    rig.clock.advance(11 * 60)
    with pytest.raises(Exception, match="over 10 minutes"):
        rig.svc.logs.post_logs(stale, lease_id, [{"stream": "stdout", "message": "late"}])


def test_a_running_leases_token_still_acts_on_its_lease_and_task(rig: Rig) -> None:
    won = rig.claimed()
    token = won.token
    assert send("POST", f"/leases/{won.lease.id}/heartbeat", token, {})[0] == 200
    assert send("POST", "/tasks", token, {"title": "child"})[0] == 201
    assert send("GET", f"/tasks/{won.lease.task_id}/blocks", token)[0] == 200


# --------------------------------------------------------------- before dispatch


@pytest.mark.parametrize(
    "bearer",
    ["garbage", "tnr_x_0123456789abcdef", "tnr_o_" + "a" * 600, "tnr_o_has spaces and;semis"],
)
def test_a_bearer_that_cannot_be_a_token_costs_no_read(
    rig: Rig, bearer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every port of the service is the rig's one fake store: count every call made on it.
    assert rig.svc.tokens.tokens is rig.store and rig.svc.tokens.leases is rig.store
    calls: list[str] = []
    for name in [n for n in dir(rig.store) if not n.startswith("_")]:
        method = getattr(rig.store, name)
        if callable(method):
            monkeypatch.setattr(rig.store, name, _counted(calls, name, method))
    rig.store.get_space("NOPE")  # the counting sees a call when one is made
    assert calls == ["get_space"]
    calls.clear()
    event = to_event("GET", "/api/v1/whoami", {"authorization": f"Bearer {bearer}"}, b"")
    verdict = authorize(event)
    assert verdict["context"]["principal"] == ""
    assert calls == []


def _counted(calls: list[str], name: str, method: Any) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return method(*args, **kwargs)

    return counted


def test_a_named_stage_does_not_skip_the_checks(rig: Rig) -> None:
    """On a stage other than $default, the path carries the stage's name; the resolver strips
    it. Matched unstripped, the request met no route, skipped the role and scope checks, and
    the resolver still ran the route."""
    won = rig.claimed()
    event = to_event("GET", f"/prod/api/v1/leases?space={SPACE}", {"host": "unit"}, b"")
    event["requestContext"]["stage"] = "prod"
    principal = json.dumps(dataclasses.asdict(as_lease(won.lease.id)))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out = api.handle(event, None)
    assert out["statusCode"] == 403
    assert json.loads(out["body"])["error"]["code"] == "lease_token_mismatch"
    # The use case refuses a lease token by itself; the role check before validation is the
    # dispatch's alone: a read token sending a bad body to an admin route learns nothing of
    # the route's schema (with the checks skipped it was answered 422 listing the fields).
    event = to_event("POST", "/prod/api/v1/spaces", {"host": "unit"}, b'{"bogus": 1}')
    event["requestContext"]["stage"] = "prod"
    principal = json.dumps(dataclasses.asdict(READER))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out = api.handle(event, None)
    assert (out["statusCode"], json.loads(out["body"])["error"]["code"]) == (403, "forbidden")


def test_a_path_no_route_names_is_refused_before_the_resolver(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root = admin_token(rig)

    def unreachable(*_: Any) -> None:
        raise AssertionError("the resolver ran a path the route table does not name")

    monkeypatch.setattr(api.app, "resolve", unreachable)
    assert code(send("GET", "/nothing/here", root)) == (404, "not_found")
    assert code(send("PUT", "/leases", root)) == (404, "not_found")
    assert code(send("GET", "/nothing/here", None)) == (401, "unauthenticated")


def test_the_openapi_document_is_built_once_per_instance(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    real = surface.contract

    def counted() -> dict[str, Any]:
        built.append(1)
        return real()

    surface.contract_json.cache_clear()
    monkeypatch.setattr(surface, "contract", counted)
    first = send("GET", "/openapi.json", None)
    second = send("GET", "/openapi.json", None)
    assert first[0] == second[0] == 200 and first[1] == second[1]
    assert len(built) == 1
    surface.contract_json.cache_clear()


def test_a_principal_says_when_its_lease_ended(rig: Rig) -> None:
    lease_id, token, _ = ended(rig)
    found: Principal = rig.svc.tokens.authenticate(token)
    assert found.lease_ended_at == rig.lease(lease_id).ended_at
