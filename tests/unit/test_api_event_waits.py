"""The event-wait routes over the fake store: an `event` block, `POST /events` with `name`,
their answers and what they refuse."""

from __future__ import annotations

from typing import Any

from tenure.api import models as m

from tests.unit.support import Rig, as_lease, shaped
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)


def _task(http: Any) -> str:  # noqa: F811
    got: Answer = http("POST", "/tasks", {"space": "OPS", "title": "t"})
    assert got.status == 201, got.data
    return str(got.data["task"]["id"])


def _wait(http: Any, task_id: str, **body: Any) -> Answer:  # noqa: F811
    return http(  # type: ignore[no-any-return]
        "POST", f"/tasks/{task_id}/blocks", {"kind": "event", "event": "e", "key": "k", **body}
    )


def test_an_event_block_and_the_event_that_clears_it_answer_their_models(
    http: Any,  # noqa: F811
) -> None:
    task_id = _task(http)
    made = _wait(http, task_id)
    assert made.status == 201, made.data
    block = shaped(m.BlockAnswer, made.data)["block"]
    assert (block["kind"], block["state"], made.data["block"]["event"]) == ("event", "open", "e")
    sent = http("POST", "/events", {"space": "OPS", "name": "e", "key": "k", "data": [1]})
    assert sent.status == 200, sent.data
    assert shaped(m.SignalAnswer, sent.data)["cleared"] == 1
    read = http("GET", f"/tasks/{task_id}/blocks?all=true")
    assert [(b["state"], b["closed_by"]) for b in read.data["blocks"]] == [("cleared", "event")]


def test_a_body_with_both_topic_and_name_is_refused(http: Any) -> None:  # noqa: F811
    task_id = _task(http)
    _wait(http, task_id)
    both = {"space": "OPS", "topic": "t", "name": "e", "key": "k", "data": {}}
    got = http("POST", "/events", both)
    assert (got.status, got.code) == (422, "validation_failed"), got.data
    assert "not both" in got.data["error"]["message"]
    listed = http("GET", f"/tasks/{task_id}/blocks")
    assert [b["state"] for b in listed.data["blocks"]] == ["open"]


def test_oversized_names_keys_and_data_are_refused(http: Any) -> None:  # noqa: F811
    for body in (
        {"space": "OPS", "name": "e" * 129, "key": "k"},
        {"space": "OPS", "name": "e", "key": ""},
        {"space": "OPS", "name": "e", "key": "k", "data": "x" * 70_000},
    ):
        got = http("POST", "/events", body)
        assert (got.status, got.code) == (422, "validation_failed"), got.data
    task_id = _task(http)
    got = _wait(http, task_id, key="k" * 129)
    assert (got.status, got.code) == (422, "validation_failed")


def test_an_event_block_needs_its_event_and_key_and_takes_no_expiry(
    http: Any,  # noqa: F811
) -> None:
    task_id = _task(http)
    for body in (
        {"kind": "event", "event": "e"},
        {"kind": "event", "key": "k"},
        {"kind": "event", "event": "e", "key": "k", "expires_in_seconds": 5},
        {"kind": "error", "reason": "x", "event": "e", "key": "k"},
        {"kind": "error"},
    ):
        got = http("POST", f"/tasks/{task_id}/blocks", body)
        assert (got.status, got.code) == (422, "validation_failed"), (body, got.data)
    assert http("GET", f"/tasks/{task_id}/blocks").data["blocks"] == []


def test_a_lease_token_may_signal_but_never_fire_rules(http: Any, rig: Rig) -> None:  # noqa: F811
    won = rig.claimed()
    lease = as_lease(won.lease.id)
    fired = http("POST", "/events", {"space": "OPS", "topic": "t", "data": {}}, actor=lease)
    assert (fired.status, fired.code) == (403, "lease_token_mismatch")
    sent = http("POST", "/events", {"space": "OPS", "name": "e", "key": "k"}, actor=lease)
    assert (sent.status, sent.data) == (200, {"cleared": 0})


def test_data_that_cannot_be_stored_is_refused_before_it_is_kept(http: Any, rig: Rig) -> None:  # noqa: F811
    deep: Any = 1
    for _ in range(30):
        deep = [deep]
    for data in (float("nan"), float("-inf"), {"a": float("inf")}, deep, "\ud800", 10**40):
        got = http("POST", "/events", {"space": "OPS", "name": "bad", "key": "k", "data": data})
        assert (got.status, got.code) == (422, "validation_failed"), (data, got.data)
        assert "data" in got.data["error"]["message"]
    assert rig.store.kept_event("OPS", "bad", "k") is None
    # A block placed afterwards has nothing to clear it and stays as placed.
    task_id = _task(http)
    placed = _wait(http, task_id, event="bad", key="k")
    assert placed.status == 201, placed.data
