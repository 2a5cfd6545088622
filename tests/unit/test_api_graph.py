"""The task graph, scheduler and recovery routes over the fake store: bodies, statuses and
envelopes, no network."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import models as m
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, MEMBER, POOL, READER, Rig, as_lease, shaped


@dataclasses.dataclass
class Answer:
    status: int
    data: Any

    @property
    def code(self) -> str | None:
        return (
            self.data["error"]["code"]
            if isinstance(self.data, dict) and "error" in self.data
            else None
        )


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(method: str, path: str, body: Any = None, actor: Principal = MEMBER) -> Answer:
        raw = json.dumps(body) if body is not None else ""
        event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw.encode())
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return Answer(out["statusCode"], json.loads(out.get("body") or "null"))

    return call


def _task(http: Any, **body: Any) -> dict[str, Any]:
    got = http("POST", "/tasks", {"space": "OPS", "title": "t", **body})
    assert got.status == 201, got.data
    shaped(m.TaskAnswer, got.data)
    return dict(got.data["task"])


def test_a_tree_with_a_dependency_reads_blocked_then_rolls_up(http: Any, rig: Rig) -> None:
    parent = _task(http)
    first = _task(http, parent_id=parent["id"], pool=POOL)
    second = _task(
        http,
        parent_id=parent["id"],
        depends_on=[first["id"]],
        auto_enqueue_on_ready=True,
        pool=POOL,
    )
    assert second["status"] == "blocked"
    assert second["blocked_reasons"] == [
        {"source": "dependency", "depends_on_task_ids": [first["id"]]}
    ]
    for _ in range(2):
        won = rig.claim()
        rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    got = http("GET", f"/tasks/{parent['id']}", actor=READER)
    assert got.data["task"]["status"] == "completed"
    assert got.data["task"]["children"] == {"total": 2, "completed": 2}
    types = [e["type"] for e in http("GET", f"/tasks/{parent['id']}/activity").data["events"]]
    assert types.count("task.rollup_completed") == 1


def test_cross_space_dependencies_are_422_naming_the_field(http: Any) -> None:
    http("POST", "/spaces", {"key": "SEC", "name": "Security"}, actor=ADMIN)
    other = http("POST", "/tasks", {"space": "SEC", "title": "x"}).data["task"]
    got = http("POST", "/tasks", {"space": "OPS", "title": "t", "depends_on": [other["id"]]})
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.data["error"]["message"].startswith("depends_on")
    got = http("POST", "/tasks", {"space": "OPS", "title": "t", "auto_enqueue_on_ready": True})
    assert (got.status, got.code) == (422, "validation_failed")


def test_patch_and_pause_and_resume_a_task(http: Any) -> None:
    task = _task(http)
    got = http("PATCH", f"/tasks/{task['id']}", {"auto_enqueue_on_ready": True, "pool": POOL})
    assert got.status == 200 and got.data["lease"]["state"] == "pending"
    paused = http("POST", f"/tasks/{task['id']}/pause")
    assert paused.data["task"]["effective_paused"] is True
    assert paused.data["task"]["paused_by_task_id"] == task["id"]
    backlog = http("GET", "/scheduler/backlog?space=OPS", actor=READER).data
    assert backlog == {"leases": [], "next_cursor": None}
    shown = http("GET", "/scheduler/backlog?space=OPS&include_paused=true", actor=READER)
    shaped(m.Backlog, shown.data)
    assert shown.data["leases"][0]["paused_by_task_id"] == task["id"]
    assert http("POST", f"/tasks/{task['id']}/resume").data["task"]["effective_paused"] is False
    assert http("PATCH", f"/tasks/{task['id']}", {}).status == 422
    assert http("POST", f"/tasks/{task['id']}/pause", actor=READER).code == "forbidden"


def test_scheduler_routes(http: Any) -> None:
    status = http("GET", "/scheduler", actor=READER)
    assert status.data == {
        "paused": False,
        "queued_run_count": 0,
        "capacity_waiting_count": 0,
        "starved_run_count": 0,
        "needs_attention_run_count": 0,
    }
    assert http("POST", "/scheduler/pause").code == "forbidden"
    assert http("POST", "/scheduler/pause", actor=ADMIN).data["paused"] is True
    drained = http("POST", "/scheduler/drain", {"timeout_seconds": 0}, actor=ADMIN)
    assert drained.data == {"drained": True, "active": 0}
    too_long = http("POST", "/scheduler/drain", {"timeout_seconds": 21}, actor=ADMIN)
    assert (too_long.status, too_long.code) == (422, "validation_failed")
    assert http("POST", "/scheduler/resume", actor=ADMIN).data["paused"] is False


def test_retry_bulk_force_and_inspect(http: Any, rig: Rig) -> None:
    held = rig.running()
    rows = http("POST", "/leases/bulk/fail", {"lease_ids": [held.id, "nope"], "reason": "stuck"})
    assert rows.status == 200
    shaped(m.ForceResults, rows.data)
    first, second = rows.data["results"]
    assert (first["ok"], first["lease"]["state"]) == (True, "failed")
    assert (second["lease_id"], second["ok"], second["code"]) == ("nope", False, "lease_not_found")
    empty = http("POST", "/leases/bulk/fail", {"lease_ids": [held.id], "reason": ""})
    assert (empty.status, empty.code) == (422, "validation_failed")
    again = http("POST", f"/leases/{held.id}/retry")
    assert again.status == 201 and again.data["lease"]["attempt"] == 2
    assert again.data["lease"]["previous_lease_id"] == held.id
    assert again.data["lease"]["retry_depth"] == 1
    assert first["lease"]["failure_kind"] == "operator_forced"
    shot = http("GET", f"/inspect/{held.id}", actor=READER)
    shaped(m.InspectOut, shot.data)
    assert shot.data["next_action"] == "claim_available"  # w1 is still reachable
    assert shot.data["current_lease"]["id"] == again.data["lease"]["id"]
    assert "token" not in json.dumps(shot.data).replace("claim_token_hash_truncated", "")
    assert http("GET", "/inspect/nothing_here", actor=READER).status == 404
    released = http("POST", "/leases/bulk/release", {"lease_ids": [again.data["lease"]["id"]]})
    assert released.data["results"][0]["code"] == "invalid_transition"
