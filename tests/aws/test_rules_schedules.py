"""Scheduled rules on moto: the Scheduler adapter, the scheduler function's
handler, and the local scheduler loop, with the real Scheduler and DynamoDB APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from tenure import wiring
from tenure.app.tenure import Tenure
from tenure.config import export
from tenure.domain.model import Pool, Principal
from tenure.domain.states import PoolKind
from tenure.store.dynamo import OneTable
from tenure.store.schedules import EventBridgeSchedules
from tenure.triggers import rule_schedule
from tenure.wiring import ManualClock, SystemClock
from tenure_cli.local.scheduler_loop import SchedulerLoop

from tests.aws.mocked import mocked_aws

ADMIN = Principal(kind="operator", token_id="t-admin", role="admin")
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:tenure-SchedulerFunction"
ROLE = "arn:aws:iam::123456789012:role/tenure-RuleSchedulerRole"
SAMPLE = Path(__file__).resolve().parents[2] / "samplesources" / "events"


@dataclass
class Aws:
    svc: Tenure
    store: OneTable
    schedules: EventBridgeSchedules
    clock: ManualClock

    def at(self, when: datetime) -> datetime:
        """The service's clock set to `when`: a schedule delivers at its time or after."""
        self.clock.now = int(when.timestamp() * 1000)
        return when


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    with mocked_aws():
        export("TENURE_DYNAMODB_ENDPOINT", "")
        store = OneTable(boto3.client("dynamodb", region_name="us-east-1"), "rules")
        store.create_table()
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="tenure-rules")
        schedules = EventBridgeSchedules(client, "tenure-rules", TARGET, ROLE)
        clock = ManualClock(SystemClock().now_ms())
        svc = wiring.build_service(store, clock)
        svc.rules.schedules = schedules
        svc.spaces.create_space(ADMIN, "OPS", "Operations", None)
        svc.pools.create_pool(
            ADMIN, Pool(name="nightly", space="OPS", kind=PoolKind.COMMAND, created_at=0)
        )
        monkeypatch.setattr(wiring, "service", lambda: svc)
        yield Aws(svc, store, schedules, clock)


def _rule(aws: Aws, schedule: str, timezone: str = "UTC", name: str = "nightly", **top: Any) -> str:
    trigger = {"schedule": schedule, "timezone": timezone}
    rule = aws.svc.rules.create_rule(
        ADMIN, "OPS", name, "nightly", {"kind": "space"}, trigger, **top
    )
    return rule.id


def _this_minute() -> str:
    """An occasion delivered on time (one days old would be a missed one, judged by the
    rule's catch-up window)."""
    return datetime.now(UTC).replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_scheduled_rule_has_one_schedule_shaped_as_section_10_says(aws: Aws) -> None:
    rule_id = _rule(aws, "cron(0 2 * * ? *)", "Europe/Paris")
    held = aws.schedules.describe(rule_id)
    assert held is not None
    assert (held["ScheduleExpression"], held["ScheduleExpressionTimezone"], held["State"]) == (
        "cron(0 2 * * ? *)",
        "Europe/Paris",
        "ENABLED",
    )
    assert held["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert (held["Target"]["Arn"], held["Target"]["RoleArn"]) == (TARGET, ROLE)
    assert json.loads(held["Target"]["Input"]) == {
        "rule_id": rule_id,
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }
    assert aws.schedules.names() == [rule_id]


def test_disable_update_and_delete_follow_the_rule_in_the_same_request(aws: Aws) -> None:
    rule_id = _rule(aws, "rate(1 hour)")
    aws.svc.rules.update_rule(ADMIN, rule_id, {"enabled": False})
    assert (aws.schedules.describe(rule_id) or {})["State"] == "DISABLED"
    aws.svc.rules.update_rule(
        ADMIN, rule_id, {"enabled": True, "trigger": {"schedule": "rate(2 hours)"}}
    )
    held = aws.schedules.describe(rule_id) or {}
    assert (held["State"], held["ScheduleExpression"]) == ("ENABLED", "rate(2 hours)")
    aws.svc.rules.delete_rule(ADMIN, rule_id)
    assert aws.schedules.describe(rule_id) is None and aws.schedules.names() == []
    aws.schedules.delete(rule_id)  # deleting what is gone is not an error


def test_the_handler_invoked_twice_with_the_same_input_mints_one_lease(aws: Aws) -> None:
    rule_id = _rule(aws, "rate(1 hour)", overlap="allow")
    event = {"rule_id": rule_id, "scheduled_time": _this_minute()}
    first = rule_schedule.handle(dict(event), None)
    second = rule_schedule.handle(dict(event), None)
    assert first["lease_id"] is not None and first == second
    leases = aws.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases
    assert [x.id for x in leases] == [first["lease_id"]]
    an_hour_on = aws.at(datetime.fromisoformat(event["scheduled_time"]) + timedelta(hours=1))
    other = rule_schedule.handle({**event, "scheduled_time": an_hour_on.isoformat()}, None)
    assert other["lease_id"] not in (None, first["lease_id"])


def test_the_sample_scheduler_invocation_replays_through_the_handler(aws: Aws) -> None:
    event = json.loads((SAMPLE / "scheduler-invocation.json").read_text())
    # The sample names a rule of some other stack: nothing to fire, nothing minted, no error.
    assert rule_schedule.handle(event, None)["lease_id"] is None
    rule_id = _rule(aws, "rate(1 hour)")
    now = {"rule_id": rule_id, "scheduled_time": _this_minute()}
    assert rule_schedule.handle({**event, **now}, None)["lease_id"] is not None


def test_a_malformed_invocation_is_an_error_and_mints_nothing(aws: Aws) -> None:
    with pytest.raises(ValueError, match="scheduled_time"):
        rule_schedule.handle(
            {"rule_id": "rule_x", "scheduled_time": "<aws.scheduler.scheduled-time>"}, None
        )


def test_the_local_loop_fires_an_at_rule_once_when_due(aws: Aws) -> None:
    when = (datetime.now(UTC) + timedelta(minutes=3)).replace(second=0, microsecond=0)
    rule_id = _rule(aws, f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})")
    loop = SchedulerLoop(aws.schedules, lambda event: rule_schedule.handle(event, None))
    assert loop.tick(when - timedelta(seconds=1)) == []
    fired = loop.tick(aws.at(when + timedelta(seconds=1)))
    assert fired == [{"rule_id": rule_id, "scheduled_time": when.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    assert loop.tick(when + timedelta(days=1)) == []
    assert len(aws.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases) == 1


def test_the_local_loop_fires_a_rate_rule_each_period_and_not_while_disabled(aws: Aws) -> None:
    rule_id = _rule(aws, "rate(1 minute)", overlap="allow")
    created = aws.schedules.describe(rule_id)["CreationDate"].astimezone(UTC)  # type: ignore[index]
    loop = SchedulerLoop(aws.schedules, lambda event: rule_schedule.handle(event, None))
    assert len(loop.tick(aws.at(created + timedelta(seconds=150)))) == 2
    aws.svc.rules.update_rule(ADMIN, rule_id, {"enabled": False})
    assert loop.tick(aws.at(created + timedelta(seconds=300))) == []
    aws.svc.rules.update_rule(ADMIN, rule_id, {"enabled": True})
    # Times missed while disabled are not made up; the next period fires.
    assert len(loop.tick(aws.at(created + timedelta(seconds=361)))) == 1
    assert len(aws.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases) == 3


def test_resync_remakes_schedules_a_restarted_scheduler_forgot(aws: Aws) -> None:
    on = _rule(aws, "cron(0 2 * * ? *)", "Europe/Paris", name="on")
    off = _rule(aws, "rate(1 hour)", name="off")
    aws.svc.rules.update_rule(ADMIN, off, {"enabled": False})
    for name in aws.schedules.names():
        aws.schedules.delete(name)
    assert aws.svc.rules.resync_schedules() == 2
    assert sorted(aws.schedules.names()) == sorted([on, off])
    assert (aws.schedules.describe(off) or {})["State"] == "DISABLED"
    held = aws.schedules.describe(on) or {}
    assert (held["ScheduleExpression"], held["ScheduleExpressionTimezone"]) == (
        "cron(0 2 * * ? *)",
        "Europe/Paris",
    )


def test_the_handler_skips_a_rule_of_an_archived_space_and_says_why(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule_id = _rule(aws, "rate(1 hour)")
    event = {"rule_id": rule_id, "scheduled_time": _this_minute()}
    said: list[str] = []
    monkeypatch.setattr(rule_schedule.logger, "info", lambda msg, extra: said.append(msg))
    aws.svc.spaces.archive_space(ADMIN, "OPS")
    assert rule_schedule.handle(dict(event), None)["lease_id"] is None
    assert said == ["rule skipped: its space is archived"]
    assert aws.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases == []
    aws.svc.spaces.unarchive_space(ADMIN, "OPS")
    assert rule_schedule.handle(dict(event), None)["lease_id"] is not None


def test_the_handler_refuses_a_delivery_ahead_of_the_clock_and_says_why(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule_id = _rule(aws, "rate(1 hour)")
    ahead = (datetime.now(UTC) + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(rule_schedule.logger, "warning", lambda m, extra: said.append((m, extra)))
    answer = rule_schedule.handle({"rule_id": rule_id, "scheduled_time": ahead}, None)
    assert answer == {
        "rule_id": rule_id,
        "scheduled_time": ahead,
        "lease_id": None,
        "skipped": "scheduled_time_ahead",
    }
    ((message, extra),) = said
    assert "ahead of the clock" in message and extra["scheduled_time"] == ahead
    assert aws.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases == []
    now = {"rule_id": rule_id, "scheduled_time": _this_minute()}
    assert rule_schedule.handle(now, None)["lease_id"] is not None
