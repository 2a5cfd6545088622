"""What a schedule may say is bounded so that every occasion it can produce is a time the
service can compute: refused with 422 naming `trigger.schedule` and the bound, on create and
on PATCH, where it used to be accepted or answered 500."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tenure.domain.errors import ValidationFailed
from tenure.domain.rules.schedules import (
    InvalidSchedule,
    ScheduledFiring,
    next_fire_times,
    parse_schedule,
    validate,
)

from tests.unit.rules_support import FakeSchedules
from tests.unit.support import ADMIN, POOL, SPACE, T0, Rig
from tests.unit.test_rules_routes import http  # noqa: F401 (the fixture)

SUBJECT = {"kind": "task", "title": "scheduled"}
START = datetime.fromtimestamp(T0 / 1000, tz=UTC)

# --- what an expression may say ---------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "rate(365 days)",
        "rate(8760 hours)",
        "rate(525600 minutes)",
        "at(2199-12-31T23:59:00)",
        "at(1970-01-01T00:00:00)",
    ],
)
def test_a_schedule_at_the_bounds_is_accepted(expression: str) -> None:
    parse_schedule(expression)


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("rate(366 days)", "at most 365 days"),
        ("rate(8761 hours)", "at most 365 days"),
        ("rate(525601 minutes)", "at most 365 days"),
        ("rate(1000000 days)", "at most 365 days"),
        ("rate(100000000 days)", "at most 365 days"),
        ("rate(99999999999999999999999 minutes)", "at most 365 days"),
        ("at(9999-12-31T23:59:59)", "from 1970 to 2199"),
        ("at(2200-01-01T00:00:00)", "from 1970 to 2199"),
        ("at(0001-01-01T00:00:00)", "from 1970 to 2199"),
        ("at(1969-12-31T23:59:59)", "from 1970 to 2199"),
    ],
)
def test_a_schedule_beyond_the_bounds_is_refused_saying_the_bound(
    expression: str, says: str
) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        validate(expression, "UTC")
    assert refused.value.field == "schedule"
    assert says in refused.value.message


@pytest.mark.parametrize(
    "expression",
    [
        "rate(" + "9" * 5000 + " minutes)",
        "cron(" + "1" * 5000 + " * * * ? *)",
        "cron(\u00b2 * * * ? *)",
        "cron(0/\u00b2 * * * ? *)",
        "cron(0 0 ? * 1#\u00b2 *)",
        "rate(\u0665 minutes)",
        "at(\u0662\u0660\u0662\u0667-01-01T00:00:00)",
    ],
)
def test_an_expression_of_odd_or_endless_digits_is_refused_not_crashed(expression: str) -> None:
    """Python's int() reads superscripts as digits and refuses more than 4,300 of them:
    only ASCII digits, and only so many, are read."""
    with pytest.raises(InvalidSchedule):
        validate(expression, "UTC")


@pytest.mark.parametrize("zone", ["Etc/GMT+12", "Etc/GMT-14", "Pacific/Kiritimati", "UTC"])
def test_the_last_and_first_instants_an_at_may_name_are_computed_in_any_zone(zone: str) -> None:
    last = next_fire_times("at(2199-12-31T23:59:00)", zone, START, 1)
    assert len(last) == 1 and last[0].year in (2199, 2200)
    assert next_fire_times("at(1970-01-01T00:00:00)", zone, START, 1) == []


def test_the_longest_rate_is_computed_many_periods_ahead() -> None:
    times = next_fire_times("rate(365 days)", "UTC", START, 5)
    assert times == [START + timedelta(days=365 * n) for n in range(1, 6)]


# --- wherever a rule's schedule is accepted --------------------------------------------------


OUT_OF_BOUNDS = [
    ({"schedule": "rate(1000000 days)", "timezone": "UTC"}, "at most 365 days"),
    ({"schedule": "rate(100000000 days)", "timezone": "UTC"}, "at most 365 days"),
    ({"schedule": "at(9999-12-31T23:59:59)", "timezone": "Etc/GMT+12"}, "from 1970 to 2199"),
]


@pytest.mark.parametrize(("trigger", "says"), OUT_OF_BOUNDS)
def test_creating_or_patching_a_rule_beyond_the_bounds_is_validation_failed(
    rig: Rig, schedules: FakeSchedules, trigger: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        rig.svc.rules.create_rule(ADMIN, SPACE, "far", POOL, SUBJECT, trigger)
    assert refused.value.message.startswith("trigger.schedule:") and says in refused.value.message
    rule = rig.svc.rules.create_rule(
        ADMIN, SPACE, "near", POOL, SUBJECT, {"schedule": "rate(1 hour)"}
    )
    with pytest.raises(ValidationFailed) as refused:
        rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": trigger})
    assert refused.value.message.startswith("trigger.schedule:") and says in refused.value.message
    assert rig.svc.rules.rule(rule.id).trigger["schedule"] == "rate(1 hour)"
    assert [held["expression"] for held in schedules.held.values()] == ["rate(1 hour)"]


@pytest.mark.parametrize(("trigger", "says"), OUT_OF_BOUNDS)
def test_the_http_routes_answer_422_naming_the_schedule_and_the_bound(
    http: Any,  # noqa: F811 (the fixture)
    trigger: dict[str, Any],
    says: str,
) -> None:
    body = {"space": SPACE, "name": "far", "pool": POOL, "subject": SUBJECT, "trigger": trigger}
    got = http("POST", "/rules", body)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("trigger.schedule:") and says in got.message
    near = {**body, "name": "near", "trigger": {"schedule": "rate(1 hour)"}}
    rule = http("POST", "/rules", near).json()["rule"]
    got = http("PATCH", f"/rules/{rule['id']}", {"trigger": trigger})
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("trigger.schedule:") and says in got.message


def test_a_scheduled_time_out_of_range_is_a_bad_input_naming_the_field() -> None:
    event = {"rule_id": "rule_x", "scheduled_time": "9999-12-31T23:59:59-12:00"}
    with pytest.raises(ValueError, match="scheduled_time"):
        ScheduledFiring.from_event(event)
