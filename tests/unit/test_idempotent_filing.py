"""Idempotent filing: POST /tasks and enqueue with an Idempotency-Key answer once per key."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import MEMBER, POOL, SPACE, Rig

OTHER = Principal(kind="operator", token_id="tok-other", role="member")


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(
        method: str, path: str, body: Any, key: str | None, actor: Principal = MEMBER
    ) -> tuple[int, Any]:
        headers = {"host": "unit"}
        if key is not None:
            headers["idempotency-key"] = key
        event = to_event(method, f"/api/v1{path}", headers, json.dumps(body).encode())
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        text = out.get("body") or ""
        return out["statusCode"], json.loads(text) if text else None

    return call


BODY = {"space": SPACE, "title": "Build it", "pool": POOL}


def test_the_same_key_and_body_answer_the_first_answer_and_file_one_task(
    http: Any, rig: Rig
) -> None:
    first = http("POST", "/tasks", BODY, "k-1")
    assert first[0] == 201
    rig.advance(3600)
    again = http("POST", "/tasks", BODY, "k-1")
    assert again == first
    assert len(rig.store.tasks) == 1


def test_the_same_key_with_another_body_is_422_naming_the_header(http: Any, rig: Rig) -> None:
    assert http("POST", "/tasks", BODY, "k-1")[0] == 201
    status, error = http("POST", "/tasks", {**BODY, "title": "Something else"}, "k-1")
    assert status == 422
    assert error["error"]["code"] == "validation_failed"
    assert "Idempotency-Key" in error["error"]["message"]
    assert len(rig.store.tasks) == 1


def test_no_key_or_another_callers_key_or_a_day_later_files_again(http: Any, rig: Rig) -> None:
    http("POST", "/tasks", BODY, None)
    http("POST", "/tasks", BODY, None)
    http("POST", "/tasks", BODY, "k-1")
    http("POST", "/tasks", BODY, "k-1", OTHER)
    rig.advance(24 * 3600 + 1)
    http("POST", "/tasks", BODY, "k-1")
    assert len(rig.store.tasks) == 5


def test_a_refused_request_frees_its_key(http: Any, rig: Rig) -> None:
    status, _ = http("POST", "/tasks", {**BODY, "pool": "nowhere"}, "k-1")
    assert status == 404
    assert http("POST", "/tasks", BODY, "k-1")[0] == 201


def test_enqueue_with_a_key_opens_one_run(http: Any, rig: Rig) -> None:
    status, filed = http("POST", "/tasks", {"space": SPACE, "title": "later"}, None)
    assert status == 201
    task_id = filed["task"]["id"]
    first = http("POST", f"/tasks/{task_id}/enqueue", {"pool": POOL}, "e-1")
    assert first[0] == 201
    assert http("POST", f"/tasks/{task_id}/enqueue", {"pool": POOL}, "e-1") == first
    status, error = http("POST", f"/tasks/{task_id}/enqueue", {"pool": "other"}, "e-1")
    assert (status, error["error"]["code"]) == (422, "validation_failed")


def test_a_key_too_long_is_422_naming_the_header(http: Any) -> None:
    status, error = http("POST", "/tasks", BODY, "k" * 256)
    assert status == 422
    assert "Idempotency-Key" in error["error"]["message"]


def test_the_openapi_document_lists_the_header_on_both_routes() -> None:
    doc = api.contract()
    for path in ("/api/v1/tasks", "/api/v1/tasks/{task_id}/enqueue"):
        post = doc["paths"][path]["post"]
        names = [p["name"] for p in post.get("parameters", []) if p["in"] == "header"]
        assert names == ["idempotency-key"]
        assert "422" in post["responses"]


def test_two_lease_tokens_whose_short_ids_clash_never_share_a_key(http: Any, rig: Rig) -> None:
    """A lease token's `token_id` is the first 8 hex characters of its hash (what operators
    see of it): about one pair in 2^32 share it. Keys are scoped by the lease itself, so two
    jobs of two leases never get each other's answers whatever their short ids."""
    first = rig.claimed("w1")
    second = rig.claimed("w2")
    one = Principal(kind="lease", token_id="34c51ac8", lease_id=first.lease.id)
    two = Principal(kind="lease", token_id="34c51ac8", lease_id=second.lease.id)
    body = {"title": "summarize the ticket"}
    status, a = http("POST", "/tasks", body, "step-1", one)
    assert status == 201, a
    status, b = http("POST", "/tasks", body, "step-1", two)
    assert status == 201, b
    assert a["task"]["id"] != b["task"]["id"], "each lease files its own task"
    assert http("POST", "/tasks", body, "step-1", one) == (201, a), "a repeat still answers"
