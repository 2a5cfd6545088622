"""The EventBridge Scheduler adapter of the Schedules port: one schedule per scheduled rule."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

# Scheduler substitutes this with the instant the invocation was due, so a rule
# mints at most one lease per (rule_id, scheduled_time) however often it is invoked.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def target_input(rule_id: str) -> str:
    """The scheduler function's input; `ScheduledFiring.from_event` reads it back."""
    return json.dumps({"rule_id": rule_id, "scheduled_time": SCHEDULED_TIME})


class EventBridgeSchedules:
    def __init__(self, client: Any, group: str, target_arn: str, role_arn: str) -> None:
        self.client = client
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn

    def put(self, name: str, expression: str, timezone: str, rule_id: str, enabled: bool) -> None:
        request = {
            "Name": name,
            "GroupName": self.group,
            "ScheduleExpression": expression,
            "ScheduleExpressionTimezone": timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if enabled else "DISABLED",
            "Description": f"tenure rule {rule_id}",
            "Target": {
                "Arn": self.target_arn,
                "RoleArn": self.role_arn,
                "Input": target_input(rule_id),
                # A lost invocation is retried by Scheduler; the firing key makes it harmless.
                "RetryPolicy": {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600},
            },
        }
        try:
            self.client.update_schedule(**request)
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            self.client.create_schedule(**request)

    def delete(self, name: str) -> None:
        try:
            self.client.delete_schedule(Name=name, GroupName=self.group)
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise

    def describe(self, name: str) -> dict[str, Any] | None:
        """The schedule as Scheduler holds it, or None (tests and the local scheduler loop)."""
        try:
            return dict(self.client.get_schedule(Name=name, GroupName=self.group))
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            return None

    def names(self, limit: int = 1000) -> list[str]:
        """Every schedule name in the group, page by page up to `limit` (the local loop)."""
        found: list[str] = []
        kwargs: dict[str, Any] = {"GroupName": self.group, "MaxResults": 100}
        while len(found) < limit:
            out = self.client.list_schedules(**kwargs)
            found.extend(str(s["Name"]) for s in out.get("Schedules", []))
            if not out.get("NextToken"):
                break
            kwargs["NextToken"] = out["NextToken"]
        return found[:limit]
