"""Only SES, through this stack's receipt rule, can put a mail notification in front of the
inbound function: a principal of the same account whose own policies allow `sns:Publish` or
`sqs:SendMessage` everywhere (an insider, or a compromised role) cannot publish a forged
notification to the topic nor send one straight to the queue, because the topic's and the
queue's policies deny every caller but the one AWS service each expects, from the expected
source. Decided by the IAM policy simulator on the template's own policies."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.infra import least_privilege
from tests.infra.least_privilege import Request, Role, Stack
from tests.infra.test_least_privilege import simulator, stack

__all__ = ["simulator", "stack"]

RULE = (
    "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:receipt-rule-set/"
    "${AWS::StackName}-inbound:receipt-rule/${AWS::StackName}-store-and-notify"
)
SECURE = ("aws:SecureTransport", "true")
INSIDER = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/Insider"
EVERYWHERE = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["sns:Publish", "sqs:SendMessage"], "Resource": "*"}
    ],
}


@pytest.fixture(scope="module")
def with_insider(stack: Stack) -> Stack:
    return replace(stack, roles={**stack.roles, "Insider": Role("Insider", [EVERYWHERE], {})})


def _decide(simulator: Path, stack: Stack, *requests: Request) -> list[str]:
    return [d.result for d in least_privilege.simulate(simulator, stack, list(requests))]


def test_a_principal_of_the_account_cannot_publish_a_forged_notification(
    simulator: Path, with_insider: Stack
) -> None:
    topic = with_insider.resolver.sub("${InboundEmailTopic}")
    queue = with_insider.resolver.sub("${InboundQueue.Arn}")
    me = (SECURE, ("aws:PrincipalArn", with_insider.resolver.sub(INSIDER)))
    publish = Request("Insider", "sns:Publish", topic, me)
    send = Request("Insider", "sqs:SendMessage", queue, me)
    # Even claiming to come from the topic: a caller's own request carries no such source.
    claimed = Request("Insider", "sqs:SendMessage", queue, (*me, ("aws:SourceArn", topic)))
    assert _decide(simulator, with_insider, publish, send, claimed) == [
        "ExplicitlyDenied",
        "ExplicitlyDenied",
        "ExplicitlyDenied",
    ]


def test_ses_through_the_receipt_rule_publishes_and_the_topic_delivers(
    simulator: Path, with_insider: Stack
) -> None:
    resolve = with_insider.resolver.sub
    topic, queue = resolve("${InboundEmailTopic}"), resolve("${InboundQueue.Arn}")
    account = ("aws:SourceAccount", resolve("${AWS::AccountId}"))
    # What AWS puts in a service principal's request context.
    by_ses = ("aws:PrincipalServiceName", "ses.amazonaws.com")
    by_sns = ("aws:PrincipalServiceName", "sns.amazonaws.com")
    ses = Request(
        "Insider",
        "sns:Publish",
        topic,
        (SECURE, by_ses, account, ("aws:SourceArn", resolve(RULE))),
        service="ses.amazonaws.com",
    )
    sns = Request(
        "Insider",
        "sqs:SendMessage",
        queue,
        (SECURE, by_sns, ("aws:SourceArn", topic)),
        service="sns.amazonaws.com",
    )
    other_rule = replace(
        ses, context=(SECURE, by_ses, account, ("aws:SourceArn", resolve(RULE) + "x"))
    )
    assert _decide(simulator, with_insider, ses, sns, other_rule) == [
        "Allowed",
        "Allowed",
        "ImplicitlyDenied",
    ]


def test_the_redrive_role_sends_the_dead_letters_back_and_nothing_else(
    simulator: Path, stack: Stack
) -> None:
    resolve = stack.resolver.sub
    (props,) = [
        r["Properties"]
        for name, r in least_privilege.transformed()["Resources"].items()
        if name == "InboundRedriveRole"
    ]
    redrive = [stack.resolver.resolve(p["PolicyDocument"]) for p in props["Policies"]]
    # The simulator names a role's principal after its key: key it by the role's own name.
    name = resolve("${InboundRedriveRole}")
    with_redrive = replace(stack, roles={**stack.roles, name: Role(name, redrive, {})})
    queue, dead = resolve("${InboundQueue.Arn}"), resolve("${InboundDeadLetterQueue.Arn}")
    me = (SECURE, ("aws:PrincipalArn", resolve("${InboundRedriveRole.Arn}")))
    back = Request(name, "sqs:SendMessage", queue, me)
    move = Request(name, "sqs:StartMessageMoveTask", dead, me)
    publish = Request(name, "sns:Publish", resolve("${InboundEmailTopic}"), me)
    assert _decide(simulator, with_redrive, back, move, publish) == [
        "Allowed",
        "Allowed",
        "ExplicitlyDenied",
    ]
