"""GET /spaces over the fake store: every space the caller may see, by key, in pages; a token
limited to spaces sees those alone; worker and lease tokens are refused as on every operator
route; bad limits and forged cursors are refused."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.app.migrations import SCHEMA_VERSION, SchemaState
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, READER, WORKER, Rig, as_lease

SCOPED_TO_A = Principal(kind="operator", token_id="tok-a", role="admin", spaces=("ALPHA",))


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    for key in ("ZULU", "ALPHA", "BETA", "MIKE"):
        rig.svc.spaces.create_space(ADMIN, key, f"space {key}", None)
    rig.svc.spaces.archive_space(ADMIN, "BETA")

    def call(path: str, actor: Principal) -> tuple[int, Any, dict[str, str]]:
        event = to_event("GET", f"/api/v1{path}", {"host": "unit"}, b"")
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return out["statusCode"], json.loads(out["body"] or "null"), out.get("headers") or {}

    return call


def keys(answer: Any) -> list[str]:
    return [s["key"] for s in answer["spaces"]]


def test_a_reader_sees_every_space_by_key_with_its_fields(http: Any) -> None:
    status, answer, _ = http("/spaces", READER)
    assert status == 200 and answer["next_cursor"] is None
    assert keys(answer) == ["ALPHA", "BETA", "MIKE", "OPS", "ZULU"]
    beta = answer["spaces"][1]
    assert set(beta) == {"key", "name", "archived", "max_active", "created_at"}
    assert beta["archived"] is True and answer["spaces"][0]["archived"] is False


def test_pages_follow_next_cursor_to_the_end_and_null_on_the_last(http: Any) -> None:
    seen: list[str] = []
    cursor = ""
    for _ in range(10):
        status, answer, _ = http(f"/spaces?limit=2{cursor}", READER)
        assert status == 200 and len(answer["spaces"]) <= 2
        seen += keys(answer)
        if answer["next_cursor"] is None:
            break
        cursor = f"&cursor={answer['next_cursor']}"
    assert seen == ["ALPHA", "BETA", "MIKE", "OPS", "ZULU"]
    # Exactly one full last page: no empty page is promised after it.
    _, first, _ = http("/spaces?limit=5", READER)
    assert len(first["spaces"]) == 5 and first["next_cursor"] is None


def test_a_token_limited_to_a_space_sees_that_space_alone(http: Any) -> None:
    status, answer, _ = http("/spaces", SCOPED_TO_A)
    assert (status, keys(answer), answer["next_cursor"]) == (200, ["ALPHA"], None)
    # A cursor handed to an unlimited reader does not open the other spaces to it.
    _, page, _ = http("/spaces?limit=1", READER)
    status, answer, _ = http(f"/spaces?cursor={page['next_cursor']}", SCOPED_TO_A)
    assert status == 200 and "BETA" not in keys(answer) and "ZULU" not in keys(answer)


def test_a_limited_token_pages_its_own_spaces_and_skips_one_that_does_not_exist(
    http: Any,
) -> None:
    three = Principal(
        kind="operator", token_id="tok-3", role="read", spaces=("ZULU", "GONE", "ALPHA")
    )
    _, first, _ = http("/spaces?limit=1", three)
    assert keys(first) == ["ALPHA"] and first["next_cursor"]
    _, rest, _ = http(f"/spaces?limit=5&cursor={first['next_cursor']}", three)
    assert keys(rest) == ["ZULU"] and rest["next_cursor"] is None


@pytest.mark.parametrize(
    ("actor", "code"),
    [(WORKER, "forbidden"), (as_lease("lease_x"), "lease_token_mismatch")],
)
def test_worker_and_lease_tokens_are_refused(http: Any, actor: Principal, code: str) -> None:
    status, answer, _ = http("/spaces?limit=500", actor)
    assert status == 403 and answer["error"]["code"] == code


@pytest.mark.parametrize("query", ["limit=0", "limit=101", "limit=x", "cursor=bm9wZQ"])
def test_bad_limits_and_forged_cursors_are_validation_failed(http: Any, query: str) -> None:
    status, answer, _ = http(f"/spaces?{query}", READER)
    assert status == 422 and answer["error"]["code"] == "validation_failed"


def test_the_answer_says_when_the_table_is_older_than_the_list(http: Any, rig: Rig) -> None:
    rig.store.space_list.discard("MIKE")  # made by a release before spaces were listed
    _, answer, headers = http("/spaces", READER)
    assert "MIKE" not in keys(answer) and "admin migrate" in headers["Tenure-Schema"]
    rig.store.schema = SchemaState(version=SCHEMA_VERSION)
    _, answer, headers = http("/spaces", READER)
    assert "Tenure-Schema" not in headers
