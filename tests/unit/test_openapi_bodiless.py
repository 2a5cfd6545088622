"""No answer without a body is declared with one. A client reads the document's media type
and parses what it was promised: a 204 declared as JSON makes it parse nothing as JSON
(schemathesis: "JSON deserialization error", "missing Content-Type")."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api.app import contract
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.rules_support import FakeSchedules
from tests.unit.support import ADMIN, POOL, SPACE, WORKER, Rig
from tests.unit.test_rules_routes import rule_body

DOC = contract()


def _responses() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, status, response object) for every response of every operation."""
    return [
        (method.upper(), path, code, answer)
        for path, ops in DOC["paths"].items()
        for method, op in ops.items()
        for code, answer in op["responses"].items()
    ]


def _never_a_body(code: str) -> bool:
    """HTTP gives these no content: every 1xx, 204 (No Content) and 304 (Not Modified)."""
    return code.startswith("1") or code in ("204", "304")


def test_no_status_that_has_no_body_is_declared_with_one() -> None:
    seen = [(m, p, c, a) for m, p, c, a in _responses() if _never_a_body(c)]
    # The three deletions and the empty claim: a walk that found none would prove nothing.
    assert len(seen) >= 4, seen
    declared = [f"{m} {p} {c}: {sorted(a['content'])}" for m, p, c, a in seen if a.get("content")]
    assert not declared, declared


def test_every_declared_json_body_has_a_schema_that_says_what_it_is() -> None:
    """Where a route names no model for a status, the resolver makes up a JSON body of any
    shape (a schema with a title and nothing else): a body the route never sends. Bytes of
    any type (an attachment's) are declared as such, not as JSON."""
    json_bodies = [
        (f"{m} {p} {c}", media)
        for m, p, c, a in _responses()
        for media_type, media in (a.get("content") or {}).items()
        if media_type == "application/json"
    ]
    assert json_bodies
    vague = [
        f"{name}: {media}"
        for name, media in json_bodies
        if not set(media.get("schema", {})) - {"title", "description"}
    ]
    assert not vague, vague


@dataclasses.dataclass
class Answer:
    status: int
    body: str
    headers: dict[str, str]


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    rig.svc.rules.schedules = FakeSchedules()
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(method: str, path: str, body: Any = None, actor: Principal = ADMIN) -> Answer:
        raw = json.dumps(body) if body is not None else ""
        event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw.encode())
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        return Answer(out["statusCode"], out.get("body") or "", headers)

    return call


def test_what_answers_without_a_body_is_declared_without_one(http: Any, rig: Rig) -> None:
    """Each route that can answer with no body, called: its answer is empty, with no content
    type, and the document declares no content for that status of that operation."""
    token, _ = rig.svc.tokens.create_token(ADMIN, "gone", "worker", None, None, (POOL,))
    rig.svc.addresses.add_address(ADMIN, SPACE, "support@example.com")  # the rule's inbox
    made = http("POST", "/rules", rule_body())
    assert made.status == 201, made.body
    rule = json.loads(made.body)["rule"]
    rig.svc.addresses.add_address(ADMIN, SPACE, "help@in.example.com")
    calls = [
        ("DELETE", "/api/v1/tokens/{token_id}", f"/tokens/{token.id}", None, ADMIN),
        ("DELETE", "/api/v1/rules/{rule_id}", f"/rules/{rule['id']}", None, ADMIN),
        (
            "DELETE",
            "/api/v1/spaces/{key}/addresses/{address}",
            f"/spaces/{SPACE}/addresses/help%40in.example.com",
            None,
            ADMIN,
        ),
        ("POST", "/api/v1/pools/{pool}/claim", f"/pools/{POOL}/claim", {"worker_id": "w1"}, WORKER),
    ]
    for method, template, path, body, actor in calls:
        got = http(method, path, body, actor)
        assert (got.status, got.body, got.headers.get("content-type")) == (204, "", None), path
        declared = DOC["paths"][template][method.lower()]["responses"][str(got.status)]
        assert not declared.get("content"), (method, template, declared)
