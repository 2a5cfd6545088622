"""Every list answer carries `next_cursor`: a walk of the served OpenAPI document finds each
GET answer whose body holds a list of records and checks it documents `next_cursor`; the
routes whose lists are bounded by construction document it as always null. GET /workers
pages for real (a pool's workers are not bounded by anything but their retention), and so does
GET /rules (a space's 200 rules may weigh more than one answer carries)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, POOL, READER, SPACE, WORKER, Rig

# GET answers holding lists of records that are not list answers, and why.
NOT_LISTS = {
    "/api/v1/inspect/{some_id}": "one task's triage snapshot: its recent runs and events",
}
# List answers bounded by construction: next_cursor is always null.
BOUNDED = {
    "/api/v1/pools": "a space's pools, within the instance's pool cap",
    "/api/v1/spaces/{key}/addresses": "a space's addresses, at most 100",
    "/api/v1/leases/{lease_id}/attachments": "a lease's attachments, capped",
    "/api/v1/tasks/{task_id}/blocks": "a task's blocks, kept on its one row",
}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _holds_records(doc: dict[str, Any], prop: dict[str, Any]) -> bool:
    for option in [prop, *prop.get("anyOf", [])]:
        option = _resolve(doc, option)
        if option.get("type") == "array":
            item = _resolve(doc, option.get("items", {}))
            if item.get("type") == "object" or "properties" in item:
                return True
    return False


def list_answers() -> dict[str, dict[str, Any]]:
    doc = api.contract()
    found: dict[str, dict[str, Any]] = {}
    for path, ops in doc["paths"].items():
        answer = ops.get("get", {}).get("responses", {}).get("200", {})
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        if not schema:
            continue
        body = _resolve(doc, schema)
        props = body.get("properties", {})
        if any(_holds_records(doc, p) for p in props.values()) and path not in NOT_LISTS:
            found[path] = props
    return found


def test_the_walk_finds_the_lists_it_should() -> None:
    found = list_answers()
    assert len(found) >= 14
    assert {"/api/v1/leases", "/api/v1/tasks", "/api/v1/workers", "/api/v1/spaces"} <= set(found)
    assert set(BOUNDED) <= set(found)


@pytest.mark.parametrize("path", sorted(list_answers()))
def test_every_list_answer_documents_next_cursor(path: str) -> None:
    props = list_answers()[path]
    assert "next_cursor" in props, f"{path} answers a list without next_cursor"
    if path in BOUNDED:
        assert props["next_cursor"].get("type") == "null", f"{path}: {BOUNDED[path]}"


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(path: str, actor: Principal = READER) -> tuple[int, Any]:
        event = to_event("GET", f"/api/v1{path}", {"host": "unit"}, b"")
        event["requestContext"]["authorizer"] = {
            "lambda": {"principal": json.dumps(dataclasses.asdict(actor))}
        }
        out = api.handle(event, None)
        return out["statusCode"], json.loads(out["body"] or "null")

    return call


def test_workers_page_to_the_end_and_bounded_lists_say_null(http: Any, rig: Rig) -> None:
    for n in range(5):
        rig.svc.claims.claim(WORKER, POOL, f"w-{n}", "1.0", 0, None)
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        status, answer = http(f"/workers?pool={POOL}&limit=2{cursor}")
        assert status == 200 and len(answer["workers"]) <= 2
        seen += [w["worker_id"] for w in answer["workers"]]
        if answer["next_cursor"] is None:
            break
        cursor = f"&cursor={answer['next_cursor']}"
    assert seen == [f"w-{n}" for n in range(5)]
    status, answer = http(f"/workers?pool={POOL}&cursor=bm9wZQ")
    assert (status, answer["error"]["code"]) == (422, "validation_failed")
    status, answer = http(f"/pools?space={rig.make_pool('other').space}")
    assert status == 200 and answer["next_cursor"] is None


def test_rules_page_over_http_and_refuse_a_bad_limit_or_cursor(http: Any, rig: Rig) -> None:
    for n in range(3):
        rig.svc.rules.create_rule(ADMIN, SPACE, f"r{n}", POOL, {"kind": "space"}, {"topic": "t"})
    status, whole = http(f"/rules?space={SPACE}")
    assert status == 200 and len(whole["rules"]) == 3 and whole["next_cursor"] is None
    status, first = http(f"/rules?space={SPACE}&limit=2")
    assert [r["name"] for r in first["rules"]] == ["r0", "r1"] and first["next_cursor"]
    status, rest = http(f"/rules?space={SPACE}&limit=2&cursor={first['next_cursor']}")
    assert [r["name"] for r in rest["rules"]] == ["r2"] and rest["next_cursor"] is None
    for query in ("limit=0", "limit=201", "cursor=bm9wZQ", f"cursor={first['next_cursor']}x"):
        status, answer = http(f"/rules?space={SPACE}&{query}")
        assert (status, answer["error"]["code"]) == (422, "validation_failed"), query


def test_the_mcp_lease_list_pages_with_next_cursor(rig: Rig) -> None:
    from tenure.api.mcp.tools import ListArgs, _list

    for _ in range(3):
        rig.task()
    first = _list(rig.svc, READER, ListArgs(space_key="OPS", limit=2))
    assert len(first["leases"]) == 2 and first["next_cursor"]
    rest = _list(rig.svc, READER, ListArgs(space_key="OPS", limit=2, cursor=first["next_cursor"]))
    assert len(rest["leases"]) == 1 and rest["next_cursor"] is None
    ids = {x["id"] for x in first["leases"]} | {x["id"] for x in rest["leases"]}
    assert len(ids) == 3
