"""The OpenAPI document is part of the contract: every status, required parameter and body."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_spec_validator import validate
from tenure.api import models as m
from tenure.api import views as v
from tenure.api.app import contract
from tenure.api.routes import ROUTES
from tenure.domain.states import TaskStatus

from tests.unit.support import Rig, shaped

DOC = contract()
ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
CREATES = {
    ("POST", "/api/v1/spaces"),
    ("POST", "/api/v1/workflows"),
    ("POST", "/api/v1/pools"),
    ("POST", "/api/v1/tokens"),
    ("POST", "/api/v1/tasks"),
    ("POST", "/api/v1/tasks/{task_id}/enqueue"),
    ("POST", "/api/v1/rules"),
    ("POST", "/api/v1/rules/{rule_id}/fire"),
    ("POST", "/api/v1/leases/{lease_id}/attachments"),
    ("POST", "/api/v1/leases/{lease_id}/retry"),
    ("POST", "/api/v1/tasks/{task_id}/blocks"),
    ("POST", "/api/v1/spaces/{key}/addresses"),
}
# Answered with 202 (accepted: its leases) and 204 (deleted, no body).
OTHER_SUCCESS: dict[tuple[str, str], int | tuple[int, ...]] = {
    # An event for rules is accepted (202); an event blocks wait for answers what it cleared.
    ("POST", "/api/v1/events"): (202, 200),
    ("DELETE", "/api/v1/rules/{rule_id}"): 204,
    ("DELETE", "/api/v1/spaces/{key}/addresses/{address}"): 204,
    ("DELETE", "/api/v1/tokens/{token_id}"): 204,
}
# Logs are accepted (202); an attachment's bytes come as themselves, or a 302.
ACCEPTS = {("POST", "/api/v1/leases/{lease_id}/logs"), ("POST", "/api/v1/tasks/{task_id}/cancel")}
BYTES = {("GET", "/api/v1/leases/{lease_id}/attachments/{attachment_id}")}
BYTES |= {("GET", "/board")}  # the board is a page, text/html
# MCP: JSON-RPC in and out; the SDK's transport answers its own statuses (test below).
PROTOCOL = {("POST", "/api/v1/mcp")}


def _ops() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in DOC["paths"].items()
        for method, op in ops.items()
        if (method.upper(), path) not in PROTOCOL
    ]


def test_the_mcp_operation_lists_the_transports_answers_and_ours() -> None:
    op = DOC["paths"]["/api/v1/mcp"]["post"]
    answers = op["responses"]
    assert op["security"] == [{"bearer": []}]
    # Every token kind may call it (each tool judges its caller), so no 403 before the protocol.
    assert set(answers) == {"200", "202", "400", "401", "404", "406", "413", "415", "500", "503"}
    assert answers["202"]["content"] == {}
    # Refused before there was a request to answer: the envelope, as everywhere else.
    for code in ("401", "406", "413", "415", "500", "503"):
        assert answers[code]["content"]["application/json"]["schema"] == ENVELOPE, code
    # A JSON-RPC error answering a request (the protocol's 2026-07-28 revision) may share 400.
    schemas = DOC["components"]["schemas"]
    refusal = answers["400"]["content"]["application/json"]["schema"]["$ref"].rsplit("/")[-1]
    assert {"$ref": ENVELOPE["$ref"]} in schemas[refusal]["anyOf"]
    body = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/")[-1]
    assert set(schemas[body]["required"]) == {"jsonrpc", "method"}


def _audience(method: str, path: str) -> str:
    return ROUTES[(method, path.replace("{", "<").replace("}", ">"))]


def test_the_document_is_valid_openapi_with_a_bearer_scheme() -> None:
    validate(DOC)
    assert DOC["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}


@pytest.mark.parametrize(("method", "path", "op"), _ops(), ids=lambda x: str(x)[:60])
def test_every_operation_lists_what_it_answers(method: str, path: str, op: dict[str, Any]) -> None:
    answers = op["responses"]
    success = [int(code) for code in answers if code.startswith("2")]
    if (method, path) in OTHER_SUCCESS:
        other = OTHER_SUCCESS[(method, path)]
        assert success == list(other if isinstance(other, tuple) else (other,))
    else:
        ok = 201 if (method, path) in CREATES else 202 if (method, path) in ACCEPTS else 200
        assert success == [ok] + ([204] if path.endswith("/claim") else [])
    for code in map(str, success):
        if code != "204" and (method, path) not in BYTES:
            assert answers[code]["content"]["application/json"]["schema"], code
    for code, answer in answers.items():
        if not code.startswith("2") and not (code == "302" and (method, path) in BYTES):
            assert answer["content"]["application/json"]["schema"] == ENVELOPE, code
    # Any route may fail (500), and the local front door may hold as many connections as it
    # serves (503); a route that takes a body may get one over the payload limits (413).
    assert {"500", "503"} <= set(answers)
    assert ("413" in answers) == ("requestBody" in op)
    if _audience(method, path) == "public":
        assert "security" not in op and set(answers) == {"200", "500", "503"}
        return
    assert op["security"] == [{"bearer": []}]
    assert {"400", "401", "403", "422", "503"} <= set(answers)
    assert "Retry-After" in answers["503"]["headers"]
    if any(p["in"] == "path" for p in op.get("parameters", [])) or method == "POST":
        assert "404" in answers or path == "/api/v1/spaces" or (path.startswith("/api/v1/workers/"))


@pytest.mark.parametrize(
    ("path", "name"), [("/api/v1/leases", "space"), ("/api/v1/workers", "pool")]
)
def test_the_scope_of_a_listing_is_a_required_parameter(path: str, name: str) -> None:
    params = {p["name"]: p for p in DOC["paths"][path]["get"]["parameters"]}
    assert params[name]["required"] is True
    assert all(p["required"] is False for n, p in params.items() if n != name)


def test_path_parameters_are_required_and_optional_bodies_are_not() -> None:
    for _, _, op in _ops():
        for param in op.get("parameters", []):
            if param["in"] == "path":
                assert param["required"] is True
    reports = {r: DOC["paths"][f"/api/v1/leases/{{lease_id}}/{r}"]["post"] for r in ("complete",)}
    assert not reports["complete"]["requestBody"].get("required")
    assert DOC["paths"]["/api/v1/leases/{lease_id}/fail"]["post"]["requestBody"]["required"]


def test_the_claim_body_names_claim_id_and_host() -> None:
    claim = DOC["components"]["schemas"]["Claim"]["properties"]
    assert claim["claim_id"]["anyOf"][0] == {"type": "string", "minLength": 1, "maxLength": 128}
    assert claim["host"]["anyOf"][0] == {"type": "string", "maxLength": 255}


def test_what_the_views_render_fits_the_response_models(rig: Rig) -> None:
    won = rig.claimed()
    lease = rig.lease(won.lease.id)
    shaped(m.LeaseOut, v.lease_view(lease))
    task, _ = rig.task()
    shaped(m.TaskOut, v.task_view(task, TaskStatus.READY))
    for event in rig.store.timeline(lease.subject_kind, lease.subject_id, None):
        shaped(m.EventOut, v.event_view(event))


def test_the_token_list_documents_the_header_that_says_the_data_is_behind() -> None:
    answer = DOC["paths"]["/api/v1/tokens"]["get"]["responses"]["200"]
    assert set(answer["headers"]) == {"Tenure-Schema"}
    assert answer["headers"]["Tenure-Schema"]["schema"] == {"type": "string"}


def test_the_lease_list_documents_its_subject_kind_filter_as_a_list_of_the_kinds() -> None:
    params = {p["name"]: p for p in DOC["paths"]["/api/v1/leases"]["get"]["parameters"]}
    schema = params["subject_kind"]["schema"]
    assert (schema["type"], schema["maxItems"]) == ("array", 3)
    kinds = DOC["components"]["schemas"][schema["items"]["$ref"].rpartition("/")[2]]
    assert kinds["enum"] == ["task", "workflow", "space"]
    assert "commas" in params["subject_kind"]["description"]
