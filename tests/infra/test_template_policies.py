"""The template's resource and trust policies: a service acting for this stack is held to the
very resource it acts for (not any of the account's), every queue and topic refuses plain
HTTP, and the HTTP API's access log says who called and why an authorization failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from samtranslator.yaml_helper import yaml_parse

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return dict(yaml_parse(TEMPLATE.read_text())["Resources"])


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    found = policy["Statement"]
    return found if isinstance(found, list) else [found]


def test_scheduler_assumes_the_rule_role_only_for_this_stack_s_schedule_group(
    resources: dict[str, Any],
) -> None:
    role = resources["RuleSchedulerRole"]["Properties"]
    (trust,) = _statements(role["AssumeRolePolicyDocument"])
    condition = trust["Condition"]
    assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert condition["ArnEquals"] == {"aws:SourceArn": {"Fn::GetAtt": ["RuleScheduleGroup", "Arn"]}}


RULE = (
    "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:receipt-rule-set/"
    "${AWS::StackName}-inbound:receipt-rule/${AWS::StackName}-store-and-notify"
)


@pytest.mark.parametrize(
    ("policy", "sid"),
    [
        ("InboundBucketPolicy", "AllowSesToStoreMail"),
        ("InboundEmailTopicPolicy", "AllowSesToPublish"),
    ],
)
def test_ses_stores_and_publishes_only_for_this_stack_s_receipt_rule(
    resources: dict[str, Any], policy: str, sid: str
) -> None:
    document = resources[policy]["Properties"]["PolicyDocument"]
    (ses,) = [s for s in _statements(document) if s.get("Sid") == sid]
    assert ses["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ses["Condition"]["ArnLike"] == {"aws:SourceArn": {"Fn::Sub": RULE}}
    rule = resources["InboundReceiptRule"]["Properties"]
    assert rule["RuleSetName"] == {"Ref": "InboundReceiptRuleSet"}
    assert rule["Rule"]["Name"] == {"Fn::Sub": "${AWS::StackName}-store-and-notify"}
    assert resources["InboundReceiptRuleSet"]["Properties"]["RuleSetName"] == {
        "Fn::Sub": "${AWS::StackName}-inbound"
    }


def _refuses_plain_http(document: dict[str, Any], target: dict[str, Any]) -> bool:
    return any(
        s["Effect"] == "Deny"
        and s["Principal"] == "*"
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        and target in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        for s in _statements(document)
    )


def test_every_queue_and_topic_refuses_requests_over_plain_http(
    resources: dict[str, Any],
) -> None:
    queues = [n for n, r in resources.items() if r["Type"] == "AWS::SQS::Queue"]
    topics = [n for n, r in resources.items() if r["Type"] == "AWS::SNS::Topic"]
    assert queues and topics
    policies = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy")
    ]
    for queue in queues:
        held = [p for p in policies if {"Ref": queue} in p.get("Queues", [])]
        assert any(
            _refuses_plain_http(p["PolicyDocument"], {"Fn::GetAtt": [queue, "Arn"]}) for p in held
        ), queue
    for topic in topics:
        held = [p for p in policies if {"Ref": topic} in p.get("Topics", [])]
        assert any(_refuses_plain_http(p["PolicyDocument"], {"Ref": topic}) for p in held), topic


def test_the_access_log_says_who_called_and_why_an_authorization_failed(
    resources: dict[str, Any],
) -> None:
    settings = resources["HttpApi"]["Properties"]["AccessLogSettings"]
    line = json.loads(settings["Format"])
    assert line["sourceIp"] == "$context.identity.sourceIp"
    assert line["userAgent"] == "$context.identity.userAgent"
    assert line["authorizerError"] == "$context.authorizer.error"
    assert line["integrationError"] == "$context.integrationErrorMessage"
