"""Who may call each route, decided before the request is validated, route by
route from the table in api/routes.py, through `handle()` with a stub principal."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api.routes import ROUTES
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, MEMBER, READER, WORKER, as_lease

GARBAGE_BODY = '{"not json'
GARBAGE_QUERY = "?space=&limit=banana&state=sleeping&pool=%00"
PRIVATE = sorted(key for key, who in ROUTES.items() if who != "public")


def _path(rule: str, lease_id: str = "lease_other") -> str:
    return re.sub(r"<(\w+)>", lambda p: lease_id if p[1] == "lease_id" else f"{p[1]}_1", rule)


def _call(
    method: str, path: str, actor: Principal | None, body: str = "", query: str = ""
) -> dict[str, Any]:
    """One request through `handle()`; the service is never reached by these refusals."""
    event = to_event(method, path + query, {"host": "unit"}, body.encode())
    principal = json.dumps(dataclasses.asdict(actor)) if actor else ""
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out: dict[str, Any] = api.handle(event, None)
    return out


def _code(out: dict[str, Any]) -> tuple[int, str | None]:
    body = json.loads(out.get("body") or "null")
    return out["statusCode"], body["error"]["code"] if isinstance(body, dict) else None


@pytest.fixture(autouse=True)
def _no_service(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable() -> None:
        raise AssertionError("a refused request reached the service")

    monkeypatch.setattr(wiring, "service", unreachable)


def test_the_table_names_exactly_the_routes_the_app_serves() -> None:
    served = {
        (method.upper(), path.replace("{", "<").replace("}", ">"))
        for path, ops in api.contract()["paths"].items()
        for method in ops
    }
    assert served == set(ROUTES)


def test_every_audience_is_one_the_check_knows() -> None:
    known = {"public", "worker", "lease", "operator:read", "operator:member", "operator:admin"}
    known.add("agent_force")  # worker and lease tokens while allow_agent_force is on
    assert {part for who in ROUTES.values() for part in who.split("|")} <= known


@pytest.mark.parametrize(("method", "rule"), PRIVATE, ids=lambda x: str(x))
def test_a_lease_token_with_a_garbage_request_is_a_lease_token_mismatch(
    method: str, rule: str
) -> None:
    who = ROUTES[(method, rule)]
    if "lease" in who.split("|") and "<lease_id>" not in rule:
        pytest.skip("a lease token may use this route (it acts in its own lease's space)")
    if "agent_force" in who.split("|"):
        pytest.skip("decided by the instance's allow_agent_force: see the force tests below")
    out = _call(method, _path(rule), as_lease("lease_mine"), GARBAGE_BODY, GARBAGE_QUERY)
    assert _code(out) == (403, "lease_token_mismatch")


def test_a_lease_token_may_create_tasks_so_its_garbage_is_judged() -> None:
    out = _call("POST", "/api/v1/tasks", as_lease("lease_mine"), GARBAGE_BODY)
    assert _code(out) == (400, "invalid_request")


@pytest.mark.parametrize(
    ("method", "rule"), [k for k in PRIVATE if ROUTES[k] == "lease"], ids=lambda x: str(x)
)
def test_an_operator_or_worker_token_on_a_lease_route_is_forbidden(method: str, rule: str) -> None:
    for actor in (ADMIN, WORKER):
        out = _call(method, _path(rule), actor, GARBAGE_BODY)
        assert _code(out) == (403, "forbidden")


@pytest.mark.parametrize(
    ("method", "rule"),
    [k for k in PRIVATE if ROUTES[k].startswith("operator:")],
    ids=lambda x: str(x),
)
def test_a_worker_token_on_an_operator_route_is_forbidden(method: str, rule: str) -> None:
    if "agent_force" in ROUTES[(method, rule)].split("|"):
        pytest.skip("decided by the instance's allow_agent_force: see the force tests below")
    if "worker" in ROUTES[(method, rule)].split("|"):
        pytest.skip("a worker token's own route too (MCP: its run tools)")
    out = _call(method, _path(rule), WORKER, GARBAGE_BODY, GARBAGE_QUERY)
    assert _code(out) == (403, "forbidden")


@pytest.mark.parametrize(
    ("method", "rule"), [k for k in PRIVATE if ROUTES[k] == "worker"], ids=lambda x: str(x)
)
def test_an_operator_token_on_a_worker_route_is_forbidden(method: str, rule: str) -> None:
    out = _call(method, _path(rule), ADMIN, GARBAGE_BODY)
    assert _code(out) == (403, "forbidden")


@pytest.mark.parametrize(
    ("method", "rule"),
    [k for k in PRIVATE if ROUTES[k].split("|")[0] in ("operator:member", "operator:admin")],
    ids=lambda x: str(x),
)
def test_an_operator_below_the_role_is_forbidden_whatever_the_body(method: str, rule: str) -> None:
    below = READER if ROUTES[(method, rule)].startswith("operator:member") else MEMBER
    out = _call(method, _path(rule), below, GARBAGE_BODY, GARBAGE_QUERY)
    assert _code(out) == (403, "forbidden")
    assert "role" in json.loads(out["body"])["error"]["message"]


def test_listing_leases_with_a_lease_token_and_no_space_is_a_mismatch_not_missing_scope() -> None:
    out = _call("GET", "/api/v1/leases", as_lease("lease_mine"))
    assert _code(out) == (403, "lease_token_mismatch")


def test_an_unknown_route_stays_not_found_whoever_asks() -> None:
    for actor in (as_lease("lease_mine"), WORKER, ADMIN):
        assert _code(_call("GET", "/api/v1/nowhere", actor)) == (404, "not_found")
        assert _code(_call("DELETE", "/api/v1/leases/lease_1", actor)) == (404, "not_found")


def test_no_token_is_unauthenticated_on_known_and_unknown_routes() -> None:
    assert _code(_call("POST", "/api/v1/spaces", None, GARBAGE_BODY)) == (401, "unauthenticated")
    assert _code(_call("GET", "/api/v1/nowhere", None)) == (401, "unauthenticated")


def test_public_routes_need_no_token() -> None:
    assert _call("GET", "/api/v1/health", None)["statusCode"] == 200
    assert _call("GET", "/api/v1/openapi.json", None)["statusCode"] == 200


# ------------------------------------------------------------------------ force

FORCE_ROUTES = [k for k in PRIVATE if "agent_force" in ROUTES[k].split("|")]


class _Instance:
    """Just enough of the service for the route check: the instance's allow_agent_force."""

    def __init__(self, allow: bool) -> None:
        from types import SimpleNamespace

        from tenure.domain.model import Instance

        store = SimpleNamespace(get_instance=lambda: Instance(allow_agent_force=allow))
        self.rows = SimpleNamespace(pools=store)  # where the route check reads the instance
        self.counters: dict[str, int] = {}
        self.core = self  # the worker's use cases within it: the route check's rows


@pytest.mark.parametrize(("method", "rule"), FORCE_ROUTES, ids=lambda x: str(x))
def test_agents_may_not_force_while_the_instance_does_not_allow_it(
    monkeypatch: pytest.MonkeyPatch, method: str, rule: str
) -> None:
    monkeypatch.setattr(wiring, "service", lambda: _Instance(False))
    out = _call(method, _path(rule), WORKER, GARBAGE_BODY)
    assert _code(out) == (403, "forbidden")
    out = _call(method, _path(rule), as_lease("lease_mine"), GARBAGE_BODY)
    assert _code(out) == (403, "lease_token_mismatch")


@pytest.mark.parametrize(("method", "rule"), FORCE_ROUTES, ids=lambda x: str(x))
def test_agents_allowed_to_force_have_their_garbage_judged(
    monkeypatch: pytest.MonkeyPatch, method: str, rule: str
) -> None:
    monkeypatch.setattr(wiring, "service", lambda: _Instance(True))
    for actor in (WORKER, as_lease("lease_mine")):
        assert _code(_call(method, _path(rule), actor, GARBAGE_BODY)) == (400, "invalid_request")


# -------------------------------------------------------------------------- MCP


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_mcp_answers_a_method_it_does_not_offer_with_405_and_allow_post(method: str) -> None:
    """The streamable-HTTP client GETs for a server stream and DELETEs its session: this
    server has neither, and 405 (not 404) is how the transport expects to hear it."""
    for actor in (READER, as_lease("lease_mine")):
        out = _call(method, "/api/v1/mcp", actor)
        assert _code(out) == (405, "method_not_allowed")
        assert out["headers"]["Allow"] == "POST"
        assert set(json.loads(out["body"])["error"]) == {"code", "message"}
    assert _code(_call(method, "/api/v1/mcp", None)) == (401, "unauthenticated")
