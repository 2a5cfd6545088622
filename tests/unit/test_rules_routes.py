"""The /rules and /events routes over the fake store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.rules_support import NIGHTLY, TASK_SUBJECT, FakeSchedules, inbox_trigger
from tests.unit.support import ADMIN, MEMBER, READER, Rig


@dataclasses.dataclass
class Answer:
    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def code(self) -> str | None:
        data = self.json()
        return data["error"]["code"] if isinstance(data, dict) and "error" in data else None

    @property
    def message(self) -> str:
        return str(self.json()["error"]["message"])


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    rig.svc.rules.schedules = FakeSchedules()
    # Both the app's routes and the rules routes build the service through wiring.
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    rig.svc.addresses.add_address(ADMIN, "OPS", "support@example.com")

    def call(method: str, path: str, body: Any = None, actor: Principal | None = ADMIN) -> Answer:
        raw = body if isinstance(body, str) else json.dumps(body) if body is not None else ""
        event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw.encode())
        principal = json.dumps(dataclasses.asdict(actor)) if actor else ""
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return Answer(out["statusCode"], out.get("body") or "")

    return call


def rule_body(**kw: Any) -> dict[str, Any]:
    return {
        "space": "OPS",
        "name": "inbox",
        "pool": "builders",
        "subject": TASK_SUBJECT,
        "trigger": inbox_trigger(to="support@example.com"),
        **kw,
    }


def test_create_answers_201_with_the_rule_as_section_10_shapes_it(http: Any) -> None:
    got = http("POST", "/rules", rule_body())
    assert got.status == 201
    rule = got.json()["rule"]
    assert set(rule) >= {
        "id",
        "space",
        "name",
        "kind",
        "pool",
        "subject",
        "trigger",
        "enabled",
        "created_at",
        "schedule_name",
    }
    assert (rule["kind"], rule["schedule_name"], rule["enabled"]) == ("inbound", None, True)
    assert http("GET", f"/rules/{rule['id']}", actor=READER).json() == {"rule": rule}


def test_a_scheduled_rule_names_its_schedule(http: Any) -> None:
    rule = http("POST", "/rules", rule_body(name="nightly", trigger=NIGHTLY)).json()["rule"]
    assert rule["kind"] == "scheduled" and rule["schedule_name"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"trigger": {"schedule": "cron(bad)"}}, "trigger.schedule"),
        ({"trigger": {"schedule": "rate(1 hour)", "timezone": "Nowhere"}}, "trigger.timezone"),
        ({"pool": "nope"}, "pool"),
        ({"trigger": {"topic": "email.received", "match": {"from": 3}}}, "trigger.match.from"),
        ({"subject": {"kind": "task"}}, "subject.title"),
        ({"enabled": "yes"}, "enabled"),
        ({"color": "red"}, "color"),
    ],
)
def test_a_bad_rule_is_422_validation_failed_naming_the_field(
    http: Any, change: dict[str, Any], field: str
) -> None:
    got = http("POST", "/rules", rule_body(**change))
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith(f"{field}:") or got.message.startswith(f"{field} "), got.message


def test_a_taken_name_is_409_already_exists(http: Any) -> None:
    assert http("POST", "/rules", rule_body()).status == 201
    got = http("POST", "/rules", rule_body())
    assert (got.status, got.code) == (409, "already_exists")


def test_unknown_rule_is_404_not_found_everywhere(http: Any) -> None:
    for method, path, body in (
        ("GET", "/rules/rule_nope", None),
        ("PATCH", "/rules/rule_nope", {"enabled": False}),
        ("DELETE", "/rules/rule_nope", None),
        ("POST", "/rules/rule_nope/fire", None),
    ):
        got = http(method, path, body)
        assert (got.status, got.code) == (404, "not_found"), (method, path)


def test_listing_rules_needs_a_space(http: Any) -> None:
    http("POST", "/rules", rule_body())
    got = http("GET", "/rules", actor=READER)
    assert (got.status, got.code) == (422, "missing_scope")
    listed = http("GET", "/rules?space=OPS", actor=READER).json()["rules"]
    assert [r["name"] for r in listed] == ["inbox"]


def test_patch_changes_only_what_it_names_and_null_is_refused(http: Any) -> None:
    rule = http("POST", "/rules", rule_body()).json()["rule"]
    got = http("PATCH", f"/rules/{rule['id']}", {"enabled": False, "name": "paused-inbox"})
    assert got.status == 200
    assert {k: got.json()["rule"][k] for k in ("enabled", "name", "trigger")} == {
        "enabled": False,
        "name": "paused-inbox",
        "trigger": rule["trigger"],
    }
    refused = http("PATCH", f"/rules/{rule['id']}", {"pool": None})
    assert (refused.status, refused.code) == (422, "validation_failed")
    assert refused.message.startswith("pool:")


def test_delete_answers_204_and_the_rule_is_gone(http: Any) -> None:
    rule = http("POST", "/rules", rule_body()).json()["rule"]
    got = http("DELETE", f"/rules/{rule['id']}")
    assert (got.status, got.body) == (204, "")
    assert http("GET", f"/rules/{rule['id']}").status == 404


def test_fire_answers_201_with_a_pending_lease(http: Any) -> None:
    rule = http("POST", "/rules", rule_body()).json()["rule"]
    got = http("POST", f"/rules/{rule['id']}/fire", actor=MEMBER)
    assert got.status == 201
    lease = got.json()["lease"]
    assert (lease["state"], lease["subject_kind"], lease["pool"]) == ("pending", "task", "builders")


def test_events_answer_202_and_the_same_event_id_the_same_leases(http: Any) -> None:
    http("POST", "/rules", rule_body(trigger={"topic": "deploy.finished"}))
    body = {"space": "OPS", "topic": "deploy.finished", "data": {"sha": "1"}, "event_id": "e1"}
    first = http("POST", "/events", body, actor=MEMBER)
    again = http("POST", "/events", body, actor=MEMBER)
    assert (first.status, again.status) == (202, 202)
    assert len(first.json()["leases"]) == 1
    assert [x["id"] for x in again.json()["leases"]] == [x["id"] for x in first.json()["leases"]]
    none = http("POST", "/events", {**body, "topic": "other", "event_id": "e2"}, actor=MEMBER)
    assert none.json() == {"leases": []}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"topic": "t", "data": {}}, "space"),
        ({"space": "OPS", "data": {}}, "topic"),
        ({"space": "OPS", "topic": "t", "data": {}, "occurred_at": "yesterday"}, "occurred_at"),
        ({"space": "OPS", "topic": "t", "data": []}, "data"),
        ({"space": "OPS", "topic": "t"}, "data"),  # required, `{}` when there is nothing
        ({"space": "OPS", "topic": "t", "data": {}, "extra": 1}, "extra"),
    ],
)
def test_a_bad_event_is_422_naming_the_field(http: Any, body: dict[str, Any], field: str) -> None:
    got = http("POST", "/events", body, actor=MEMBER)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith(f"{field}:"), got.message


def test_rules_routes_are_in_the_openapi_document(http: Any) -> None:
    doc = http("GET", "/openapi.json", actor=None).json()
    assert {"/api/v1/rules", "/api/v1/rules/{rule_id}", "/api/v1/events"} <= set(doc["paths"])


def test_post_tasks_with_not_before_answers_a_waiting_lease(http: Any) -> None:
    body = {
        "space": "OPS",
        "title": "later",
        "pool": "builders",
        "not_before": "2026-01-01T09:30:00Z",
    }
    got = http("POST", "/tasks", body, actor=MEMBER)
    assert got.status == 201, got.body
    lease = got.json()["lease"]
    assert lease["timing"]["not_before"] == "2026-01-01T09:30:00.000Z"
    shown = http("GET", f"/leases/{lease['id']}", actor=READER).json()
    assert shown["queued_condition"]["code"] == "waiting_until"


@pytest.mark.parametrize("value", ["tomorrow", "2026-01-01T09:30:00", 5])
def test_a_bad_not_before_is_422_naming_it(http: Any, value: Any) -> None:
    body = {"space": "OPS", "title": "later", "pool": "builders", "not_before": value}
    got = http("POST", "/tasks", body, actor=MEMBER)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("not_before:"), got.message


def test_enqueue_with_not_before_answers_its_waiting_condition(http: Any) -> None:
    task = http("POST", "/tasks", {"space": "OPS", "title": "t"}, actor=MEMBER).json()["task"]
    got = http(
        "POST",
        f"/tasks/{task['id']}/enqueue",
        {"pool": "builders", "not_before": "2026-01-02T00:00:00+01:00"},
        actor=MEMBER,
    )
    assert got.status == 201, got.body
    lease = http("GET", f"/leases/{got.json()['lease']['id']}", actor=READER).json()
    assert lease["queued_condition"]["code"] == "waiting_until"


def _fire(http: Any, subject: dict[str, Any], name: str) -> dict[str, Any]:
    rule = http("POST", "/rules", rule_body(name=name, subject=subject)).json()["rule"]
    lease: dict[str, Any] = http("POST", f"/rules/{rule['id']}/fire", actor=MEMBER).json()["lease"]
    return lease


def test_workflow_and_space_leases_read_and_list_like_task_leases(http: Any) -> None:
    http("POST", "/workflows", {"space": "OPS", "slug": "triage", "name": "Triage"})
    wf = _fire(http, {"kind": "workflow", "slug": "triage"}, "wf")
    sp = _fire(http, {"kind": "space"}, "sp")
    assert (wf["subject_kind"], wf["task"], wf["workflow"]) == (
        "workflow",
        None,
        {"slug": "triage"},
    )
    assert (sp["subject_kind"], sp["task"], sp["workflow"]) == ("space", None, None)
    listed = {x["id"] for x in http("GET", "/leases?space=OPS", actor=READER).json()["leases"]}
    assert {wf["id"], sp["id"]} <= listed
    assert http("GET", f"/leases/{wf['id']}", actor=READER).json()["workflow"] == {"slug": "triage"}


def test_workflow_and_space_activity_routes_answer_their_timelines(http: Any) -> None:
    http("POST", "/workflows", {"space": "OPS", "slug": "triage", "name": "Triage"})
    wf = _fire(http, {"kind": "workflow", "slug": "triage"}, "wf")
    sp = _fire(http, {"kind": "space"}, "sp")
    got = http("GET", "/workflows/triage/activity?space=OPS", actor=READER)
    assert got.status == 200
    assert [(ev["type"], ev["lease_id"]) for ev in got.json()["events"]] == [
        ("lease.created", wf["id"])
    ]
    events = http("GET", "/spaces/OPS/activity", actor=READER).json()["events"]
    assert [(ev["type"], ev["lease_id"]) for ev in events] == [("lease.created", sp["id"])]


def test_activity_routes_refuse_a_missing_scope_and_unknown_subjects(http: Any) -> None:
    got = http("GET", "/workflows/triage/activity", actor=READER)
    assert (got.status, got.code) == (422, "missing_scope")
    got = http("GET", "/workflows/nope/activity?space=OPS", actor=READER)
    assert (got.status, got.code) == (404, "not_found")
    got = http("GET", "/spaces/NOPE/activity", actor=READER)
    assert (got.status, got.code) == (404, "not_found")


RULE_SAMPLES = sorted(
    (Path(__file__).resolve().parents[2] / "samplesources" / "rules").glob("*.json")
)


@pytest.mark.parametrize("sample", RULE_SAMPLES, ids=lambda p: p.stem)
def test_the_sample_rule_set_is_accepted_as_written(http: Any, rig: Rig, sample: Path) -> None:
    rig.make_pool("triage")
    http("POST", "/spaces/OPS/addresses", {"address": "support@inbound.example.com"})
    http("POST", "/workflows", {"space": "OPS", "slug": "nightly-report", "name": "Nightly report"})
    got = http("POST", "/rules", json.loads(sample.read_text()))
    assert got.status == 201, got.body
    assert got.json()["rule"]["name"] == sample.stem
