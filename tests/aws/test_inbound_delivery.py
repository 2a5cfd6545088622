"""SES → S3 + SNS → SQS → inbound handler on moto's real APIs: what
`tenure email send` publishes arrives as an SNS envelope, the local poller hands it to the
handler, and a record that keeps failing reaches the DLQ after maxReceiveCount."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from tenure import wiring
from tenure.app.tenure import Tenure
from tenure.config import export, settings
from tenure.domain.model import Pool, Principal
from tenure.domain.states import PoolKind
from tenure.store.dynamo import OneTable
from tenure.triggers.inbound import handler
from tenure_cli.local.email_send import send
from tenure_cli.local.inbound_poller import InboundPoller

from tests.aws.mocked import mocked_aws

ADMIN = Principal(kind="operator", token_id="t-admin", role="admin")
EMAIL = Path(__file__).resolve().parents[2] / "samplesources" / "email"
INBOX = "ops@inbound.tenure.example"


@dataclass
class Wired:
    svc: Tenure
    sqs: Any
    queue_url: str
    dlq_url: str
    stack_file: Path
    poller: InboundPoller


@pytest.fixture
def wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Wired]:
    monkeypatch.setenv("TENURE_INBOUND_BUCKET", "inbound")  # as the local stack sets it
    with mocked_aws():
        export("TENURE_DYNAMODB_ENDPOINT", "")
        export("TENURE_ATTACHMENTS_BUCKET", "attachments")
        store = OneTable(boto3.client("dynamodb", region_name="us-east-1"), "delivery")
        store.create_table()
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("inbound", "attachments"):
            s3.create_bucket(Bucket=bucket)
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq_url = sqs.create_queue(QueueName="inbound-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
        queue_url = sqs.create_queue(
            QueueName="inbound",
            Attributes={"VisibilityTimeout": "0", "RedrivePolicy": redrive},
        )["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        sns = boto3.client("sns", region_name="us-east-1")
        topic = sns.create_topic(Name="inbound-mail")["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)  # raw delivery off
        stack_file = tmp_path / "stack.json"
        stack_file.write_text(
            json.dumps(
                {
                    "aws": {
                        "endpoint": None,
                        "region": "us-east-1",
                        "resources": {"inbound_bucket": "inbound", "inbound_topic_arn": topic},
                    }
                }
            )
        )
        svc = wiring.build_service(store)
        svc.spaces.create_space(ADMIN, "OPS", "Operations", None)
        svc.pools.create_pool(
            ADMIN, Pool(name="triage", space="OPS", kind=PoolKind.COMMAND, created_at=0)
        )
        svc.addresses.add_address(ADMIN, "OPS", INBOX)
        svc.rules.create_rule(
            ADMIN,
            "OPS",
            "inbox",
            "triage",
            {"kind": "task", "title": "{subject}"},
            {"topic": "email.received", "match": {"to": INBOX}},
        )
        monkeypatch.setattr(wiring, "service", lambda: svc)
        handler.inbound.cache_clear()
        poller = InboundPoller(sqs, queue_url, queue_arn, handler.handle)
        yield Wired(svc, sqs, queue_url, dlq_url, stack_file, poller)
        handler.inbound.cache_clear()
        settings.cache_clear()


def _leases(w: Wired) -> list[Any]:
    return w.svc.operator.list_leases(ADMIN, "OPS", 100, None, None, None).leases


def test_an_email_sent_like_ses_arrives_as_an_sns_envelope_and_mints_its_lease(
    wired: Wired,
) -> None:
    sent = send(wired.stack_file.parent, EMAIL / "plain-text.eml", None)
    assert sent["recipients"] == [INBOX]
    assert wired.poller.poll_once(wait_seconds=0) == 1
    (lease,) = _leases(wired)
    job = wired.svc.rows.leases.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    assert job.trigger["data"]["message_id"] == sent["message_id"]
    assert wired.poller.poll_once(wait_seconds=0) == 0  # handled records were deleted


def test_a_mail_nested_past_what_python_can_recurse_is_sent_and_files_its_task(
    wired: Wired,
) -> None:
    # The parser raised RecursionError: `tenure email send` crashed, and the handler took it
    # for a passing fault, had the queue deliver it five times, then dead-lettered it.
    levels = b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(1500)
    )
    eml = wired.stack_file.parent / "deep.eml"
    eml.write_bytes(b"From: a@b.example\nTo: " + INBOX.encode() + b"\nSubject: deep\n" + levels)
    send(wired.stack_file.parent, eml, None)
    assert wired.poller.poll_once(wait_seconds=0) == 1
    (lease,) = _leases(wired)
    job = wired.svc.rows.leases.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    assert (job.trigger["data"]["subject"], job.trigger["data"]["body"]) == ("deep", "")
    assert wired.poller.poll_once(wait_seconds=0) == 0


@pytest.mark.parametrize(
    "headers",
    [
        b"Subject: " + b"S" * 400_000 + b"\n",
        b"Subject: s\n" + b"".join(b"X-H%d: v\n" % n for n in range(30_000)),
        b"Subject: s\nCc: " + b", ".join(b"u%d@x.example" % n for n in range(30_000)) + b"\n",
    ],
    ids=["long-subject", "many-headers", "many-cc"],
)
def test_a_mail_whose_headers_pass_what_sns_carries_is_sent_as_ses_sends_it(
    wired: Wired, headers: bytes
) -> None:
    # SNS carries 256 KB: the notification copied every header and the whole Subject, and
    # the publish failed. SES cuts the headers it lists and says so.
    eml = wired.stack_file.parent / "big.eml"
    eml.write_bytes(b"From: a@b.example\nTo: " + INBOX.encode() + b"\n" + headers + b"\nhi\n")
    sent = send(wired.stack_file.parent, eml, [INBOX])
    [message] = wired.sqs.receive_message(QueueUrl=wired.queue_url)["Messages"]
    note = json.loads(json.loads(message["Body"])["Message"])
    assert note["mail"]["headersTruncated"] is True
    assert len(message["Body"].encode()) < 256 * 1024
    wired.sqs.change_message_visibility(
        QueueUrl=wired.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    assert wired.poller.poll_once(wait_seconds=0) == 1
    (lease,) = _leases(wired)
    job = wired.svc.rows.leases.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    assert job.trigger["data"]["message_id"] == sent["message_id"]


def test_a_mail_sent_when_the_publish_fails_leaves_no_object_behind(wired: Wired) -> None:
    record = json.loads(wired.stack_file.read_text())
    record["aws"]["resources"]["inbound_topic_arn"] += "-gone"
    wired.stack_file.write_text(json.dumps(record))
    with pytest.raises(ClientError):
        send(wired.stack_file.parent, EMAIL / "plain-text.eml", None)
    s3 = boto3.client("s3", region_name="us-east-1")
    assert s3.list_objects_v2(Bucket="inbound").get("KeyCount") == 0


def test_a_record_that_keeps_failing_reaches_the_dlq_after_max_receive_count(wired: Wired) -> None:
    wired.sqs.send_message(QueueUrl=wired.queue_url, MessageBody="this is not an SNS envelope")
    for _ in range(3):
        wired.poller.poll_once(wait_seconds=0)
    dead = wired.sqs.receive_message(QueueUrl=wired.dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in dead] == ["this is not an SNS envelope"]
    assert _leases(wired) == []


def test_an_email_for_an_archived_spaces_rule_is_acknowledged_logged_and_mints_nothing(
    wired: Wired, monkeypatch: pytest.MonkeyPatch
) -> None:
    (rule,) = wired.svc.rules.list_rules(ADMIN, "OPS").rules
    wired.svc.spaces.archive_space(ADMIN, "OPS")
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(handler.logger, "info", lambda msg, extra: said.append((msg, extra)))
    send(wired.stack_file.parent, EMAIL / "plain-text.eml", None)
    assert wired.poller.poll_once(wait_seconds=0) == 1
    assert _leases(wired) == [] and wired.svc.rows.tasks.task_page("OPS", 10, None).entries == []
    messages = [msg for msg, _ in said]
    assert messages == [
        "inbound email skipped rules of archived spaces",
        "inbound email matched no rule; acknowledged",
    ]
    assert said[0][1]["rule_ids"] == [rule.id]
    assert wired.poller.poll_once(wait_seconds=0) == 0  # acknowledged, not redelivered
