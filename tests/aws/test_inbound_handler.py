"""The inbound function on moto: the sample SQS batch, the SNS envelope and raw
delivery, redelivery, unmatched mail and records that cannot be processed."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import boto3
import pytest
from tenure import wiring
from tenure.app.tenure import Tenure
from tenure.config import export, settings
from tenure.domain.model import Pool, Principal
from tenure.domain.states import PoolKind
from tenure.store.dynamo import OneTable
from tenure.triggers.inbound import handler

from tests.aws.mocked import mocked_aws

ADMIN = Principal(kind="operator", token_id="t-admin", role="admin")
ROOT = Path(__file__).resolve().parents[2] / "samplesources"
BUCKET = "tenure-inbound-123456789012-us-east-1"  # the samples' receipt action names it
ATTACHMENTS = "tenure-attachments"
OPS_KEY = "inbound/4vq9ut1e7mp2hn8c1l5sd0r6kq3o7fjb2ig9ah01"
INVOICE_KEY = "inbound/k2f1n7qv3o8d5s0c6h4b9t1m2e7r3u5a8p0l6g01"


@dataclass
class Aws:
    svc: Tenure
    s3: Any


def batch() -> dict[str, Any]:
    return dict(json.loads((ROOT / "events" / "sqs-batch-inbound.json").read_text()))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    monkeypatch.setenv("TENURE_INBOUND_BUCKET", BUCKET)  # undone after: settings() is cleared
    with mocked_aws():
        export("TENURE_DYNAMODB_ENDPOINT", "")
        export("TENURE_ATTACHMENTS_BUCKET", ATTACHMENTS)
        store = OneTable(boto3.client("dynamodb", region_name="us-east-1"), "inbound")
        store.create_table()
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in (BUCKET, ATTACHMENTS):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(
            Bucket=BUCKET, Key=OPS_KEY, Body=(ROOT / "email" / "plain-text.eml").read_bytes()
        )
        s3.put_object(
            Bucket=BUCKET,
            Key=INVOICE_KEY,
            Body=(ROOT / "email" / "multipart-attachments.eml").read_bytes(),
        )
        svc = wiring.build_service(store)
        svc.spaces.create_space(ADMIN, "OPS", "Operations", None)
        svc.spaces.create_space(ADMIN, "FIN", "Finance", None)
        for name, space in (("triage", "OPS"), ("invoices", "FIN")):
            svc.pools.create_pool(
                ADMIN, Pool(name=name, space=space, kind=PoolKind.COMMAND, created_at=0)
            )
        monkeypatch.setattr(wiring, "service", lambda: svc)
        handler.inbound.cache_clear()
        yield Aws(svc, s3)
        handler.inbound.cache_clear()
        settings.cache_clear()


def _inbox(aws: Aws, space: str, pool: str, to: str, name: str = "inbox") -> None:
    subject = {"kind": "task", "title": "{subject} (from {from})"}
    trigger = {"topic": "email.received", "match": {"to": to}}
    aws.svc.addresses.add_address(ADMIN, space, to)
    aws.svc.rules.create_rule(ADMIN, space, name, pool, subject, trigger)


def _leases(aws: Aws, space: str) -> list[Any]:
    return aws.svc.operator.list_leases(ADMIN, space, 100, None, None, None).leases


def _trigger(aws: Aws, lease: Any) -> dict[str, Any]:
    job = aws.svc.rows.leases.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    return job.trigger


def test_the_sample_batch_mints_one_lease_per_matching_rule_across_spaces(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    assert handler.handle(batch(), None) == {"batchItemFailures": []}
    (ops,) = _leases(aws, "OPS")
    assert len(_leases(aws, "FIN")) == 1
    task = aws.svc.rows.tasks.get_task(ops.task_id)
    assert task is not None
    assert (
        task.title == "Nightly export failed on host db-7 (from maria.okafor@partners.example.com)"
    )
    trigger = _trigger(aws, ops)
    assert (trigger["topic"], trigger["occurred_at"]) == ("email.received", "2026-11-30T06:41:52Z")
    data = trigger["data"]
    assert data["message_id"] == "4vq9ut1e7mp2hn8c1l5sd0r6kq3o7fjb2ig9ah01"
    assert (data["from"], data["to"], data["cc"]) == (
        "maria.okafor@partners.example.com",
        ["ops@inbound.tenure.example"],
        [],
    )
    assert "disk quota exceeded" in data["body"] and data["attachments"] == []


def test_email_attachments_are_stored_and_named_in_the_trigger(aws: Aws) -> None:
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    handler.handle(batch(), None)
    (fin,) = _leases(aws, "FIN")
    attachments = _trigger(aws, fin)["data"]["attachments"]
    assert [(a["filename"], a["content_type"], a["byte_size"]) for a in attachments] == [
        ("invoice-2026-1184.pdf", "application/pdf", 592),
        ("pallet.png", "image/png", 81),
    ]
    for att in attachments:
        key = f"email/k2f1n7qv3o8d5s0c6h4b9t1m2e7r3u5a8p0l6g01/{att['attachment_id']}"
        body = aws.s3.get_object(Bucket=ATTACHMENTS, Key=key)["Body"].read()
        assert len(body) == att["byte_size"]


def test_a_redelivered_batch_mints_nothing_new(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    handler.handle(batch(), None)
    first = [x.id for x in _leases(aws, "OPS")]
    assert handler.handle(batch(), None) == {"batchItemFailures": []}
    assert [x.id for x in _leases(aws, "OPS")] == first and len(first) == 1


def test_an_email_no_rule_matches_is_acknowledged_not_retried(aws: Aws) -> None:
    assert handler.handle(batch(), None) == {"batchItemFailures": []}
    assert _leases(aws, "OPS") == [] and _leases(aws, "FIN") == []


def test_raw_message_delivery_is_accepted_too(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    event = batch()
    record = event["Records"][0]
    record["body"] = json.loads(record["body"])["Message"]
    assert handler.handle({"Records": [record]}, None) == {"batchItemFailures": []}
    assert len(_leases(aws, "OPS")) == 1


def test_a_missing_object_or_a_bad_body_fails_alone_and_the_rest_goes_through(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    aws.s3.delete_object(Bucket=BUCKET, Key=INVOICE_KEY)
    event = batch()
    garbage = copy.deepcopy(event["Records"][0])
    garbage["messageId"] = "not-json"
    garbage["body"] = "this is not JSON"
    event["Records"].append(garbage)
    answer = handler.handle(event, None)
    failed = sorted(f["itemIdentifier"] for f in answer["batchItemFailures"])
    assert failed == sorted([event["Records"][1]["messageId"], "not-json"])
    assert len(_leases(aws, "OPS")) == 1 and _leases(aws, "FIN") == []


def test_a_batch_whose_every_record_fails_reports_each_rather_than_crashing(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    aws.s3.delete_object(Bucket=BUCKET, Key=OPS_KEY)
    aws.s3.delete_object(Bucket=BUCKET, Key=INVOICE_KEY)
    answer = handler.handle(batch(), None)
    assert len(answer["batchItemFailures"]) == 2


def test_mail_nobody_receives_is_acknowledged_without_reading_its_object(aws: Aws) -> None:
    # No space owns either recipient: the mail could fire nothing, so it is not read, and
    # an object gone missing does not send it to the DLQ.
    aws.s3.delete_object(Bucket=BUCKET, Key=OPS_KEY)
    aws.s3.delete_object(Bucket=BUCKET, Key=INVOICE_KEY)
    assert handler.handle(batch(), None) == {"batchItemFailures": []}


def test_an_sns_subscription_confirmation_is_acknowledged(aws: Aws) -> None:
    record = batch()["Records"][0]
    record["body"] = json.dumps(
        {
            "Type": "SubscriptionConfirmation",
            "MessageId": "m",
            "TopicArn": "arn:aws:sns:us-east-1:1:t",
            "Message": "You have chosen to subscribe",
            "Timestamp": "2026-11-30T06:41:52.201Z",
            "SignatureVersion": "1",
            "Signature": "x",
            "SigningCertURL": "https://example.com/c.pem",
            "SubscribeURL": "https://example.com/s",
            "Token": "t",
        }
    )
    assert handler.handle({"Records": [record]}, None) == {"batchItemFailures": []}


def _record(body: str, message_id: str = "sample-record") -> dict[str, Any]:
    record = copy.deepcopy(batch()["Records"][0])
    record["messageId"] = message_id
    record["body"] = body
    return record


@pytest.mark.parametrize("name", ["ses-received-s3.json", "sns-envelope-ses-received.json"])
def test_the_single_notification_samples_replay_through_the_handler(aws: Aws, name: str) -> None:
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    body = (ROOT / "events" / name).read_text()
    assert handler.handle({"Records": [_record(body)]}, None) == {"batchItemFailures": []}
    (lease,) = _leases(aws, "FIN")
    assert _trigger(aws, lease)["data"]["subject"] == "Invoice 2026-1184 and delivery photo"


EXPECTED = {
    "plain-text.eml": ("Nightly export failed on host db-7", "disk quota exceeded", 0),
    "html-only.eml": ("Incident resolved: API latency in eu-west-1", "", 0),
    "multipart-attachments.eml": ("Invoice 2026-1184 and delivery photo", "", 2),
    "encoded-subject.eml": ("Lieferung verzögert \u2013 Bestellung Nr. 4417", "", 0),
    "reply-quoted.eml": ("Re: Nightly export failed on host db-7", "", 0),
    "damaged-parts.eml": ("Scan 0042", "", None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_sample_eml_replays_from_s3_to_a_lease_with_its_trigger(aws: Aws, name: str) -> None:
    from tenure_cli.local.email_send import notification

    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    raw = (ROOT / "email" / name).read_bytes()
    ses_id = "sample-" + name.removesuffix(".eml")
    note = notification(
        raw,
        ses_id,
        BUCKET,
        "arn:aws:sns:us-east-1:123456789012:t",
        ["intake@inbound.tenure.example"],
    )
    aws.s3.put_object(Bucket=BUCKET, Key=note["receipt"]["action"]["objectKey"], Body=raw)
    answer = handler.handle({"Records": [_record(json.dumps(note), name)]}, None)
    assert answer == {"batchItemFailures": []}
    (lease,) = _leases(aws, "OPS")
    data = _trigger(aws, lease)["data"]
    subject, in_body, attachments = EXPECTED[name]
    assert data["subject"] == subject and data["message_id"] == ses_id
    assert in_body in data["body"] and data["body"].strip()
    if attachments is not None:
        assert len(data["attachments"]) == attachments
    task = aws.svc.rows.tasks.get_task(lease.task_id)
    assert task is not None and task.title.startswith(subject[:20])


def _eml_record(
    aws: Aws, name: str, recipients: list[str], **verdicts: str
) -> tuple[dict[str, Any], str]:
    from tenure_cli.local.email_send import notification

    raw = (ROOT / "email" / name).read_bytes()
    ses_id = "verdict-" + name.removesuffix(".eml")
    note = notification(raw, ses_id, BUCKET, "arn:aws:sns:us-east-1:123456789012:t", recipients)
    for verdict, status in verdicts.items():
        note["receipt"][f"{verdict}Verdict"] = {"status": status}
    key = note["receipt"]["action"]["objectKey"]
    aws.s3.put_object(Bucket=BUCKET, Key=key, Body=raw)
    return {"Records": [_record(json.dumps(note), ses_id)]}, key


def test_a_virus_is_acknowledged_and_mints_nothing_and_its_object_stays(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    event, key = _eml_record(
        aws, "multipart-attachments.eml", ["intake@inbound.tenure.example"], virus="FAIL"
    )
    assert handler.handle(event, None) == {"batchItemFailures": []}
    assert _leases(aws, "OPS") == []
    assert aws.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    stored = aws.s3.list_objects_v2(Bucket=ATTACHMENTS).get("Contents", [])
    assert stored == []  # nothing of it was parsed out and stored


def test_spam_fires_only_rules_that_accept_it_and_the_trigger_carries_the_verdicts(
    aws: Aws,
) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    aws.svc.rules.create_rule(
        ADMIN,
        "OPS",
        "spam-ok",
        "triage",
        {"kind": "space"},
        {"topic": "email.received", "match": {"to": "intake@inbound.tenure.example"}},
        accept_spam=True,
    )
    event, _ = _eml_record(aws, "plain-text.eml", ["Intake@inbound.tenure.example"], spam="FAIL")
    assert handler.handle(event, None) == {"batchItemFailures": []}
    (lease,) = _leases(aws, "OPS")
    data = _trigger(aws, lease)["data"]
    assert data["recipients"] == ["intake@inbound.tenure.example"]
    assert data["verdicts"] == {
        "spam": "FAIL",
        "virus": "PASS",
        "spf": "PASS",
        "dkim": "PASS",
        "dmarc": "PASS",
    }


def test_a_mail_whose_to_header_names_an_address_ses_did_not_receive_it_for_matches_nothing(
    aws: Aws,
) -> None:
    # plain-text.eml's To header names ops@inbound.tenure.example; SES received it for another.
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    event, _ = _eml_record(aws, "plain-text.eml", ["elsewhere@inbound.tenure.example"])
    assert handler.handle(event, None) == {"batchItemFailures": []}
    assert _leases(aws, "OPS") == []


def _many_attachments(to: str, count: int = 20, size: int = 200_000) -> bytes:
    message = EmailMessage()
    message["From"] = "Alice <alice@partner.example>"
    message["To"] = to
    message["Subject"] = "files"
    message.set_content("see attached")
    for n in range(count):
        message.add_attachment(
            bytes([n]) * size, maintype="application", subtype="pdf", filename=f"f{n}.pdf"
        )
    return message.as_bytes()


def _stored(aws: Aws) -> tuple[int, int]:
    """(objects, bytes) in the attachments bucket."""
    found = aws.s3.list_objects_v2(Bucket=ATTACHMENTS).get("Contents", [])
    return len(found), sum(item["Size"] for item in found)


def _raw_record(
    aws: Aws, raw: bytes, ses_id: str, recipients: list[str], **verdicts: str | None
) -> dict[str, Any]:
    """One record for `raw`, its object stored; a verdict given as None is left out."""
    from tenure_cli.local.email_send import notification

    note = notification(raw, ses_id, BUCKET, "arn:aws:sns:us-east-1:123456789012:t", recipients)
    for verdict, status in verdicts.items():
        if status is None:
            del note["receipt"][f"{verdict}Verdict"]
        else:
            note["receipt"][f"{verdict}Verdict"] = {"status": status}
    aws.s3.put_object(Bucket=BUCKET, Key=note["receipt"]["action"]["objectKey"], Body=raw)
    return {"Records": [_record(json.dumps(note), ses_id)]}


def test_mail_nobody_receives_or_no_rule_fires_for_stores_no_attachment(aws: Aws) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    stranger = "anyone@inbound.tenure.example"  # no space owns it
    for ses_id, to, spam in (
        ("flood-unowned", stranger, "FAIL"),
        ("flood-unowned-clean", stranger, "PASS"),
        ("flood-spam", "intake@inbound.tenure.example", "FAIL"),
    ):
        event = _raw_record(aws, _many_attachments(to), ses_id, [to], spam=spam)
        assert handler.handle(event, None) == {"batchItemFailures": []}
    assert _leases(aws, "OPS") == []
    assert _stored(aws) == (0, 0)


def test_mail_that_mints_stores_its_attachments_and_a_redelivery_mints_nothing_new(
    aws: Aws,
) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    raw = _many_attachments("intake@inbound.tenure.example")
    event = _raw_record(aws, raw, "flood-minted", ["intake@inbound.tenure.example"])
    assert handler.handle(event, None) == {"batchItemFailures": []}
    assert handler.handle(event, None) == {"batchItemFailures": []}
    (lease,) = _leases(aws, "OPS")
    assert len(_trigger(aws, lease)["data"]["attachments"]) == 20
    assert _stored(aws) == (20, 4_000_000)


@pytest.mark.parametrize(
    ("virus", "stored"),
    [("PASS", 3), ("GRAY", 0), ("PROCESSING_FAILED", 0), ("DISABLED", 0), (None, 0)],
)
def test_only_a_mail_scanned_clean_has_its_attachments_stored_and_listed(
    aws: Aws, virus: str | None, stored: int
) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    raw = _many_attachments("intake@inbound.tenure.example", count=3, size=1000)
    event = _raw_record(aws, raw, "scan", ["intake@inbound.tenure.example"], virus=virus)
    assert handler.handle(event, None) == {"batchItemFailures": []}
    (lease,) = _leases(aws, "OPS")
    data = _trigger(aws, lease)["data"]
    assert len(data["attachments"]) == stored and data["body"].startswith("see attached")
    assert data.get("attachments_withheld") == (None if stored else "virus_unscanned")
    assert _stored(aws) == (stored, stored * 1000)
    assert len(aws.svc.attachments.list_attachments(ADMIN, lease.id)) == stored


def test_attachments_withheld_are_logged_as_a_warning(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    _inbox(aws, "OPS", "triage", "intake@inbound.tenure.example")
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(handler.logger, "warning", lambda msg, extra: said.append((msg, extra)))
    raw = _many_attachments("intake@inbound.tenure.example", count=1, size=10)
    event = _raw_record(aws, raw, "gray", ["intake@inbound.tenure.example"], virus="GRAY")
    assert handler.handle(event, None) == {"batchItemFailures": []}
    ((message, extra),) = said
    assert "without its attachments" in message and extra["reason"] == "virus_unscanned"


def test_a_record_failing_for_any_other_reason_is_logged_with_its_error_and_counted(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The attachments bucket gone (a deployment's mistake): the mail that has files fails,
    # and the operator finds the message id and the error in the log, and a metric.
    _inbox(aws, "FIN", "invoices", "invoices@inbound.tenure.example")
    aws.s3.delete_bucket(Bucket=ATTACHMENTS)
    said: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(handler.logger, "exception", lambda msg, extra: said.append((msg, extra)))
    event = batch()
    answer = handler.handle(event, None)
    failed = event["Records"][1]["messageId"]
    assert answer["batchItemFailures"] == [{"itemIdentifier": failed}]
    ((message, extra),) = said
    assert "delivers it again" in message and extra["sqs_message_id"] == failed
    assert "NoSuchBucket" in extra["error"]
    out = capsys.readouterr().out
    (doc,) = [json.loads(line) for line in out.splitlines() if '"InboundFailed"' in line]
    assert doc["InboundFailed"] in (1.0, [1.0])


def test_a_notification_naming_another_bucket_is_refused_and_files_nothing(aws: Aws) -> None:
    # The attachments bucket holds other mails' files under keys a notification could name.
    _inbox(aws, "OPS", "triage", "ops@inbound.tenure.example")
    aws.s3.put_object(
        Bucket=ATTACHMENTS, Key=OPS_KEY, Body=(ROOT / "email" / "plain-text.eml").read_bytes()
    )
    event = batch()
    record = event["Records"][0]
    envelope = json.loads(record["body"])
    note = json.loads(envelope["Message"])
    note["receipt"]["action"]["bucketName"] = ATTACHMENTS
    envelope["Message"] = json.dumps(note)
    record["body"] = json.dumps(envelope)
    answer = handler.handle({"Records": [record]}, None)
    assert [f["itemIdentifier"] for f in answer["batchItemFailures"]] == [record["messageId"]]
    assert _leases(aws, "OPS") == []
