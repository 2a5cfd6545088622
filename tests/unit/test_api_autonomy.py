"""The autonomy routes (blocks, recover) over the fake store: bodies, statuses, envelopes and
who may call them."""

from __future__ import annotations

from typing import Any

from tenure.api import models as m

from tests.unit.support import READER, Rig, as_lease, schema_of, shaped
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)


def _task(http: Any, **body: Any) -> dict[str, Any]:  # noqa: F811
    got: Answer = http("POST", "/tasks", {"space": "OPS", "title": "t", **body})
    assert got.status == 201, got.data
    return dict(got.data["task"])


def test_block_list_clear_and_recover_answer_their_models(http: Any) -> None:  # noqa: F811
    task = _task(http)
    made = http("POST", f"/tasks/{task['id']}/blocks", {"kind": "error", "reason": "boom"})
    assert made.status == 201, made.data
    block = shaped(m.BlockAnswer, made.data)["block"]
    listed = http("GET", f"/tasks/{task['id']}/blocks", actor=READER)
    assert [b["id"] for b in shaped(m.BlocksAnswer, listed.data)["blocks"]] == [block["id"]]
    read = http("GET", f"/tasks/{task['id']}", actor=READER)
    assert shaped(m.TaskAnswer, read.data)["task"]["status"] == "blocked"
    cleared = http("POST", f"/tasks/{task['id']}/blocks/{block['id']}/clear", {"note": "ok"})
    assert cleared.status == 200 and cleared.data["block"]["state"] == "cleared"
    refused = http("POST", f"/tasks/{task['id']}/recover", {"note": "nothing to recover"})
    assert (refused.status, refused.code) == (409, "invalid_transition")
    missing = http("POST", f"/tasks/{task['id']}/blocks/blk_nope/clear", {})
    assert (missing.status, missing.code) == (404, "not_found")


def test_a_bad_kind_or_an_expiring_error_block_is_refused_by_name(http: Any) -> None:  # noqa: F811
    task = _task(http)
    bad = http("POST", f"/tasks/{task['id']}/blocks", {"kind": "sleepy", "reason": "x"})
    assert (bad.status, bad.code) == (422, "validation_failed") and "kind" in str(bad.data)
    timed = {"kind": "error", "reason": "x", "expires_in_seconds": 60}
    bad = http("POST", f"/tasks/{task['id']}/blocks", timed)
    assert (bad.status, bad.code) == (422, "validation_failed")
    assert "expires_in_seconds" in bad.data["error"]["message"]


def test_a_lease_token_may_block_its_own_task_only_and_never_recover(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    won = rig.claimed()
    other = _task(http)
    mine = won.lease.task_id
    lease = as_lease(won.lease.id)
    body = {"kind": "needs_input", "reason": "?"}
    refused = http("POST", f"/tasks/{other['id']}/blocks", body, actor=lease)
    assert (refused.status, refused.code) == (403, "lease_token_mismatch")
    refused = http("POST", f"/tasks/{mine}/recover", {}, actor=lease)
    assert (refused.status, refused.code) == (403, "lease_token_mismatch")
    made = http("POST", f"/tasks/{mine}/blocks", body, actor=lease)
    assert made.status == 201, made.data
    assert rig.lease(won.lease.id).end_reason is not None


def test_a_completion_naming_a_task_it_did_not_file_is_422_with_the_ids(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    won = rig.claimed()
    other = _task(http)
    body = {"created_task_ids": [other["id"]]}
    refused = http("POST", f"/leases/{won.lease.id}/complete", body, actor=as_lease(won.lease.id))
    assert (refused.status, refused.code) == (422, "unverified_created_tasks")
    assert other["id"] in refused.data["error"]["message"]
    read = http("GET", f"/leases/{won.lease.id}", actor=READER)
    assert read.data["state"] == "dispatched"


def test_post_tasks_takes_a_bounded_ttl_from_a_lease_token_only(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    won = rig.claimed()
    lease = as_lease(won.lease.id)
    body = {"title": "sub", "pool": "builders"}
    for bad in (0, -5, 7 * 86_400 + 1, "soon"):
        refused = http("POST", "/tasks", {**body, "ttl_seconds": bad}, actor=lease)
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
    operator = http("POST", "/tasks", {**body, "space": "OPS", "ttl_seconds": 60})
    assert (operator.status, operator.code) == (422, "validation_failed")
    made = http("POST", "/tasks", {**body, "ttl_seconds": 60}, actor=lease)
    assert made.status == 201, made.data
    reasons = schema_of(m.LeaseOut)
    assert "ttl_expired" in str(reasons) and "parent_stopped" in str(reasons)
