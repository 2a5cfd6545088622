"""The template's part of rules: schedules' group, target and role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse
from tenure.config import ENVIRONMENT

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text()))["Resources"]


def test_each_setting_meant_for_one_function_is_set_on_that_function(
    resources: dict[str, Any],
) -> None:
    scoped = [(var, src.split(":", 1)[1]) for var, src in ENVIRONMENT.values() if ":" in src]
    assert scoped, "the schedules' settings are scoped to the API function"
    for var, function in scoped:
        env = resources[function]["Properties"].get("Environment", {}).get("Variables", {})
        assert var in env, f"{function} lacks {var}"


def test_the_scheduler_role_is_assumed_by_scheduler_and_invokes_only_the_scheduler_function(
    resources: dict[str, Any],
) -> None:
    role = resources["RuleSchedulerRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    (policy,) = role["Policies"]
    (grant,) = policy["PolicyDocument"]["Statement"]
    assert grant["Action"] == "lambda:InvokeFunction"
    assert {"Fn::GetAtt": ["SchedulerFunction", "Arn"]} in grant["Resource"]


def test_the_api_function_may_manage_schedules_and_pass_only_that_role(
    resources: dict[str, Any],
) -> None:
    statements = resources["ApiFunction"]["Properties"]["Policies"][0]["Statement"]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
        "scheduler:DeleteSchedule",
    } <= actions
    (passing,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert passing["Resource"] == {"Fn::GetAtt": ["RuleSchedulerRole", "Arn"]}
    assert "dynamodb:DeleteItem" in actions  # a rule's delete removes its rows


def test_the_scheduler_function_is_the_schedules_target(resources: dict[str, Any]) -> None:
    fn = resources["SchedulerFunction"]["Properties"]
    assert (fn["CodeUri"], fn["Handler"]) == ("../functions/scheduler", "app.handler")
    assert resources["RuleScheduleGroup"]["Type"] == "AWS::Scheduler::ScheduleGroup"


def test_the_inbound_function_reads_the_queue_reporting_item_failures(
    resources: dict[str, Any],
) -> None:
    fn = resources["InboundFunction"]["Properties"]
    (source,) = fn["Events"].values()
    assert source["Type"] == "SQS"
    assert source["Properties"]["Queue"] == {"Fn::GetAtt": ["InboundQueue", "Arn"]}
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    visibility = resources["InboundQueue"]["Properties"]["VisibilityTimeout"]
    # Lambda's own advice for an SQS source: six times the function's timeout, so a batch
    # Lambda could not hand over while the function was throttled is tried again before the
    # message reappears; shorter, throttling alone spends its receives toward the DLQ.
    assert visibility >= 6 * fn["Timeout"], "a throttled batch would count as a failed receive"


def test_the_receipt_rule_stores_under_inbound_and_notifies_the_topic_only_with_a_domain(
    resources: dict[str, Any],
) -> None:
    rule = resources["InboundReceiptRule"]
    assert rule["Condition"] == "ReceivesEmail"
    assert resources["InboundReceiptRuleSet"]["Condition"] == "ReceivesEmail"
    (action,) = rule["Properties"]["Rule"]["Actions"]
    assert action["S3Action"] == {
        "BucketName": {"Ref": "InboundBucket"},
        "ObjectKeyPrefix": "inbound/",
        "TopicArn": {"Ref": "InboundEmailTopic"},
    }


def test_raw_inbound_mail_expires_under_inbound(resources: dict[str, Any]) -> None:
    (rule,) = resources["InboundBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert (rule["Prefix"], rule["Status"]) == ("inbound/", "Enabled")
    assert rule["ExpirationInDays"] == {"Ref": "InboundRetentionDays"}
