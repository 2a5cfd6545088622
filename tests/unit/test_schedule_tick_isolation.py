"""One scheduled rule whose occasions cannot be computed (stored by an earlier release past
today's bounds, or in a zone the time zone database has since dropped) is skipped by whatever
walks every rule, the local scheduler's tick and a resuming service's catch-up, and the other
rules' occasions still fire."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tenure.domain.rules.rule import Rule
from tenure.store.schedules import target_input
from tenure_cli.local.scheduler_loop import SchedulerLoop

from tests.unit.rules_support import FakeSchedules
from tests.unit.support import ADMIN, POOL, SPACE, T0, Rig

SUBJECT = {"kind": "task", "title": "scheduled"}
START = datetime.fromtimestamp(T0 / 1000, tz=UTC)


def _stored_beyond_the_bounds(
    rig: Rig, name: str, schedule: str, timezone: str, **top: Any
) -> Rule:
    """A rule as an earlier release accepted it (or whose zone the time zone database has
    since dropped): made valid, then its trigger written past today's validation."""
    rule = rig.svc.rules.create_rule(
        ADMIN, SPACE, name, POOL, SUBJECT, {"schedule": "rate(1 hour)"}, **top
    )
    legacy = replace(
        rule, trigger={"schedule": schedule, "timezone": timezone}, version=rule.version + 1
    )
    rig.svc.rules.rule_store.replace_rule(rule, legacy)
    return legacy


@pytest.mark.parametrize(
    ("schedule", "timezone"),
    [("rate(100000000 days)", "UTC"), ("cron(0 * * * ? *)", "Mars/Olympus")],
)
def test_a_resuming_service_catches_up_the_other_rules_past_one_it_cannot_compute(
    rig: Rig, schedules: FakeSchedules, schedule: str, timezone: str
) -> None:
    window = {"overlap": "allow", "catchup_window_seconds": 3 * 3600}
    _stored_beyond_the_bounds(rig, "broken", schedule, timezone, **window)
    rig.svc.rules.create_rule(
        ADMIN, SPACE, "hourly", POOL, SUBJECT, {"schedule": "rate(1 hour)"}, **window
    )
    rig.clock.advance(2 * 3600 + 60)
    assert rig.svc.firings.catch_up() == 1
    # The hourly rule's two missed occasions, and nothing of the other.
    assert len(rig.svc.operator.list_leases(ADMIN, SPACE, 100, None, None, None).leases) == 2


class _HeldSchedules:
    """What the local loop reads of Scheduler: the group's schedules, as get_schedule
    answers them."""

    target_arn = "arn:aws:lambda:us-east-1:123456789012:function:tenure-SchedulerFunction"

    def __init__(self, created: datetime) -> None:
        self.created = created
        self.held: dict[str, dict[str, Any]] = {}

    def add(self, rule_id: str, expression: str, timezone: str = "UTC") -> None:
        self.held[rule_id] = {
            "Name": rule_id,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": timezone,
            "State": "ENABLED",
            "CreationDate": self.created,
            "Target": {"Arn": self.target_arn, "Input": target_input(rule_id)},
        }

    def names(self, limit: int = 1000) -> list[str]:
        return sorted(self.held)[:limit]

    def describe(self, name: str) -> dict[str, Any] | None:
        return self.held.get(name)


@pytest.mark.parametrize(
    ("broken", "timezone"),
    [
        ("rate(1000000 days)", "UTC"),
        ("rate(100000000 days)", "UTC"),
        ("at(9999-12-31T23:59:59)", "Etc/GMT+12"),
        ("cron(0 * * * ? *)", "Mars/Olympus"),
    ],
)
def test_the_local_tick_fires_the_other_rules_past_one_it_cannot_compute(
    capsys: pytest.CaptureFixture[str], broken: str, timezone: str
) -> None:
    held = _HeldSchedules(START)
    held.add("rule_a_broken", broken, timezone)
    held.add("rule_b_good", "rate(1 minute)")
    invoked: list[dict[str, Any]] = []
    loop = SchedulerLoop(held, invoked.append)  # type: ignore[arg-type]
    capsys.readouterr()
    fired = loop.tick(START + timedelta(seconds=150))
    assert [e["rule_id"] for e in fired] == ["rule_b_good", "rule_b_good"]
    assert invoked == fired
    said = capsys.readouterr()
    lines = [x for x in (said.out + said.err).splitlines() if "rule_a_broken" in x]
    assert len(lines) == 1 and "skipped" in lines[0]
    assert "rule_b_good" not in said.out + said.err
    # The next tick carries on, and says so again: the rule is still there to be fixed.
    fired = loop.tick(START + timedelta(seconds=190))
    assert [e["rule_id"] for e in fired] == ["rule_b_good"]
    said = capsys.readouterr()
    assert len([x for x in (said.out + said.err).splitlines() if "rule_a_broken" in x]) == 1
