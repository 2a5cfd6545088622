"""The rules routes with scheduling controls: a subject's controls, a fire that files a task
awaiting approval, and bad controls refused with 422 validation_failed naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.support import MEMBER
from tests.unit.test_rules_routes import http, rule_body

__all__ = ["http"]  # the fixture, shared with the rules routes' own tests

SUBJECT = {"kind": "task", "title": "Reply to {from}", "max_attempts": 4, "max_run_seconds": 60}


def test_a_rule_answers_the_controls_its_subject_names(http: Any) -> None:
    got = http("POST", "/rules", rule_body(subject={**SUBJECT, "concurrency_key": "k-{from}"}))
    assert got.status == 201
    assert got.json()["rule"]["subject"] == {**SUBJECT, "concurrency_key": "k-{from}"}


def test_fire_of_an_approval_rule_answers_its_waiting_task_and_no_lease(http: Any) -> None:
    body = rule_body(subject={**SUBJECT, "requires_approval": True})
    rule = http("POST", "/rules", body).json()["rule"]
    got = http("POST", f"/rules/{rule['id']}/fire", actor=MEMBER)
    assert got.status == 201, got.body
    answer = got.json()
    assert answer["lease"] is None
    assert answer["task"]["status"] == "blocked"
    assert [r["source"] for r in answer["task"]["blocked_reasons"]] == ["approval"]
    approved = http("POST", f"/tasks/{answer['task']['id']}/approve", {}, actor=MEMBER)
    assert approved.status == 200, approved.body


@pytest.mark.parametrize(
    ("control", "field"),
    [
        ({"max_attempts": 0}, "subject.max_attempts"),
        ({"max_run_seconds": "60"}, "subject.max_run_seconds"),
        ({"expires_in_seconds": -1}, "subject.expires_in_seconds"),
        ({"concurrency_key": ""}, "subject.concurrency_key"),
        ({"requires_approval": 1}, "subject.requires_approval"),
    ],
)
def test_a_bad_control_is_422_validation_failed_naming_it(
    http: Any, control: dict[str, Any], field: str
) -> None:
    got = http("POST", "/rules", rule_body(subject={**SUBJECT, **control}))
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith(f"{field}:"), got.message


# ------------------------------------------------------------------- schedule settings

HOURLY = {"schedule": "rate(1 hour)"}


def test_a_scheduled_rule_answers_its_overlap_and_window(http: Any) -> None:
    made = http("POST", "/rules", rule_body(trigger=HOURLY))
    assert made.status == 201, made.body
    rule = made.json()["rule"]
    assert (rule["overlap"], rule["catchup_window_seconds"]) == ("skip", 0)
    patch = {"overlap": "cancel_previous", "catchup_window_seconds": 900}
    changed = http("PATCH", f"/rules/{rule['id']}", patch)
    assert changed.status == 200, changed.body
    assert changed.json()["rule"]["overlap"] == "cancel_previous"
    got = http("GET", f"/rules/{rule['id']}").json()["rule"]
    assert (got["overlap"], got["catchup_window_seconds"]) == ("cancel_previous", 900)


def test_an_inbound_rule_answers_no_overlap(http: Any) -> None:
    rule = http("POST", "/rules", rule_body()).json()["rule"]
    assert (rule["overlap"], rule["catchup_window_seconds"]) == (None, None)


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"overlap": "sometimes"}, "overlap"),
        ({"overlap": None}, "overlap"),
        ({"overlap": 3}, "overlap"),
        ({"catchup_window_seconds": 86_401}, "catchup_window_seconds"),
        ({"catchup_window_seconds": -5}, "catchup_window_seconds"),
        ({"catchup_window_seconds": "60"}, "catchup_window_seconds"),
    ],
)
def test_a_bad_schedule_setting_is_422_on_create_and_patch(
    http: Any, setting: dict[str, Any], field: str
) -> None:
    got = http("POST", "/rules", rule_body(trigger=HOURLY, **setting))
    if setting.get("overlap", "") is not None:
        assert (got.status, got.code) == (422, "validation_failed"), got.body
        assert field in got.message, got.message
    rule = http("POST", "/rules", rule_body(name="ok", trigger=HOURLY)).json()["rule"]
    patched = http("PATCH", f"/rules/{rule['id']}", setting)
    assert (patched.status, patched.code) == (422, "validation_failed"), patched.body
    assert field in patched.message, patched.message
    assert http("GET", f"/rules/{rule['id']}").json()["rule"]["overlap"] == "skip"


def test_an_inbound_rule_with_an_overlap_is_422_naming_it(http: Any) -> None:
    got = http("POST", "/rules", rule_body(overlap="allow"))
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("overlap:"), got.message
