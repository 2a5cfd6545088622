"""SQS record bodies of inbound email: both delivery shapes, the samples, and each refusal."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SqsModel
from tenure.triggers.inbound.envelopes import (
    EnvelopeError,
    InboundMail,
    MissingField,
    NotANotification,
    NotJson,
    NotReceivedMail,
    NotS3Action,
    WrongObject,
    parse_record_body,
)

EVENTS = Path(__file__).resolve().parents[2] / "samplesources" / "events"
BUCKET = "tenure-inbound-123456789012-us-east-1"
INVOICE_ID = "k2f1n7qv3o8d5s0c6h4b9t1m2e7r3u5a8p0l6g01"


def _sample(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def _ses() -> dict[str, Any]:
    return _sample("ses-received-s3.json")


def _wrapped(notification: dict[str, Any]) -> str:
    envelope = _sample("sns-envelope-ses-received.json")
    envelope["Message"] = json.dumps(notification)
    return json.dumps(envelope)


INVOICE = InboundMail(
    message_id=INVOICE_ID,
    timestamp=datetime(2026, 11, 30, 6, 55, 5, 412000, tzinfo=UTC),
    bucket=BUCKET,
    object_key=f"inbound/{INVOICE_ID}",
    recipients=("invoices@inbound.tenure.example",),
    source="billing@supplier.example.org",
    verdicts={"spam": "PASS", "virus": "PASS", "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"},
)


def test_raw_message_delivery_body_is_the_ses_notification() -> None:
    assert parse_record_body((EVENTS / "ses-received-s3.json").read_text()) == INVOICE


def test_sns_envelope_body_unwraps_to_the_same_mail() -> None:
    assert parse_record_body((EVENTS / "sns-envelope-ses-received.json").read_text()) == INVOICE


def test_every_record_of_the_sqs_batch_sample_parses() -> None:
    event = _sample("sqs-batch-inbound.json")
    records = SqsModel.model_validate(event).Records  # the sample is a real Lambda SQS event
    assert len(records) == 2
    mails = [parse_record_body(record.body) for record in records]
    assert [m.message_id for m in mails] == ["4vq9ut1e7mp2hn8c1l5sd0r6kq3o7fjb2ig9ah01", INVOICE_ID]
    assert mails[0].recipients == ("ops@inbound.tenure.example",)
    assert mails[0].source == "maria.okafor@partners.example.com"
    assert mails[0].timestamp == datetime(2026, 11, 30, 6, 41, 52, 87000, tzinfo=UTC)
    assert all(m.object_key == f"inbound/{m.message_id}" and m.bucket == BUCKET for m in mails)


def test_inbound_mail_is_frozen() -> None:
    with pytest.raises(AttributeError):
        INVOICE.bucket = "elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize("body", ["", "not json", "{unclosed", "\x00\x01"])
def test_a_body_that_is_not_json_is_refused_as_not_json(body: str) -> None:
    with pytest.raises(NotJson) as refused:
        parse_record_body(body)
    assert not refused.value.acknowledge and refused.value.permanent


@pytest.mark.parametrize("body", ["[1, 2]", '"a string"', "42", "null"])
def test_json_that_is_not_an_object_is_refused_as_not_json(body: str) -> None:
    with pytest.raises(NotJson, match="not an object"):
        parse_record_body(body)


def test_an_sns_message_that_is_not_json_is_refused_as_not_json() -> None:
    envelope = _sample("sns-envelope-ses-received.json")
    envelope["Message"] = "Hello from SNS!"
    with pytest.raises(NotJson, match="SNS Message"):
        parse_record_body(json.dumps(envelope))


@pytest.mark.parametrize("kind", ["SubscriptionConfirmation", "UnsubscribeConfirmation"])
def test_an_sns_subscription_message_is_refused_and_acknowledged(kind: str) -> None:
    body = json.dumps(
        {
            "Type": kind,
            "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
            "Token": "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d9276",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:tenure-inbound-mail",
            "Message": "You have chosen to subscribe to the topic.",
            "SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription",
            "Timestamp": "2026-11-30T06:00:00.000Z",
        }
    )
    with pytest.raises(NotANotification, match=kind) as refused:
        parse_record_body(body)
    assert refused.value.acknowledge


@pytest.mark.parametrize("kind", ["Bounce", "Complaint", "Delivery"])
def test_an_ses_notification_of_another_type_is_refused_and_acknowledged(kind: str) -> None:
    notification = _ses()
    notification["notificationType"] = kind
    for body in (json.dumps(notification), _wrapped(notification)):
        with pytest.raises(NotReceivedMail, match=kind) as refused:
            parse_record_body(body)
        assert refused.value.acknowledge


@pytest.mark.parametrize(
    "action",
    [
        {"type": "SNS", "topicArn": "arn:aws:sns:us-east-1:123456789012:t", "encoding": "UTF8"},
        {"type": "Lambda", "functionArn": "arn:aws:lambda:us-east-1:1:function:f"},
        {"type": "Bounce", "smtpReplyCode": "550"},
    ],
)
def test_a_receipt_action_other_than_s3_is_refused_for_the_dlq(action: dict[str, str]) -> None:
    notification = _ses()
    notification["receipt"]["action"] = action
    with pytest.raises(NotS3Action, match=action["type"]) as refused:
        parse_record_body(_wrapped(notification))
    assert not refused.value.acknowledge


def _without(path: tuple[str, ...]) -> dict[str, Any]:
    notification = copy.deepcopy(_ses())
    node = notification
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return notification


@pytest.mark.parametrize(
    "path",
    [
        ("mail", "messageId"),
        ("mail", "timestamp"),
        ("mail", "source"),
        ("mail",),
        ("receipt", "recipients"),
        ("receipt", "action", "bucketName"),
        ("receipt", "action", "objectKey"),
        ("receipt", "action", "type"),
        ("receipt",),
    ],
)
def test_a_missing_field_is_refused_naming_where(path: tuple[str, ...]) -> None:
    with pytest.raises(MissingField) as refused:
        parse_record_body(json.dumps(_without(path)))
    assert path[-1] in refused.value.reason
    assert not refused.value.acknowledge


def test_a_field_of_the_wrong_type_is_refused_without_echoing_its_value() -> None:
    notification = _ses()
    notification["receipt"]["recipients"] = "secret-person@example.com"
    with pytest.raises(MissingField) as refused:
        parse_record_body(json.dumps(notification))
    assert "receipt.recipients" in refused.value.reason
    assert "secret-person" not in refused.value.reason


def test_an_sns_envelope_without_its_required_fields_is_refused() -> None:
    envelope = _sample("sns-envelope-ses-received.json")
    del envelope["TopicArn"]
    with pytest.raises(MissingField, match="TopicArn"):
        parse_record_body(json.dumps(envelope))


def test_a_json_object_of_neither_shape_is_refused_as_missing_fields() -> None:
    with pytest.raises(MissingField, match="neither"):
        parse_record_body(json.dumps({"hello": "world"}))


def test_every_refusal_is_an_envelope_error_and_a_value_error() -> None:
    for error in (
        NotJson,
        NotANotification,
        NotReceivedMail,
        NotS3Action,
        MissingField,
        WrongObject,
    ):
        assert issubclass(error, EnvelopeError) and issubclass(error, ValueError)
        assert error("why").reason == "why"


# --- the object named is this mail's, in the inbound bucket ---------------------------------


def _naming(
    message_id: str | None = None, key: str | None = None, bucket: str | None = None
) -> str:
    notification = _ses()
    if message_id is not None:
        notification["mail"]["messageId"] = message_id
        notification["receipt"]["action"]["objectKey"] = f"inbound/{message_id}"
    if key is not None:
        notification["receipt"]["action"]["objectKey"] = key
    if bucket is not None:
        notification["receipt"]["action"]["bucketName"] = bucket
    return _wrapped(notification)


@pytest.mark.parametrize(
    "message_id",
    ["../../attachments/evil", "a/b", ".", "..", "m" * 201, "a b", "a\x00b", "é"],
    ids=["climbs", "slash", "dot", "dot-dot", "too-long", "space", "nul", "not-ascii"],
)
def test_a_message_id_that_cannot_name_an_object_of_its_own_is_refused(message_id: str) -> None:
    # It names the mail's attachments' keys: `email/<messageId>/…`.
    with pytest.raises(WrongObject, match="messageId") as refused:
        parse_record_body(_naming(message_id=message_id))
    assert not refused.value.acknowledge


@pytest.mark.parametrize("message_id", ["a", "m" * 200, "A-z_0.9=+", INVOICE_ID])
def test_a_message_id_of_letters_digits_and_marks_is_accepted(message_id: str) -> None:
    assert parse_record_body(_naming(message_id=message_id)).message_id == message_id


@pytest.mark.parametrize(
    "key",
    ["inbound/another-mail", f"inbound/{INVOICE_ID}/x", f"inbound/x{INVOICE_ID}", "inbound/"],
)
def test_an_object_key_that_is_not_the_mail_s_own_is_refused(key: str) -> None:
    # Another mail's object would be filed again under this messageId, its attachments too.
    with pytest.raises(WrongObject, match="objectKey") as refused:
        parse_record_body(_naming(key=key))
    assert not refused.value.acknowledge


@pytest.mark.parametrize("key", [INVOICE_ID, f"inbound/{INVOICE_ID}", f"a/b/{INVOICE_ID}"])
def test_an_object_key_ending_in_the_message_id_is_accepted(key: str) -> None:
    assert parse_record_body(_naming(key=key)).object_key == key


def test_a_bucket_other_than_the_inbound_bucket_is_refused_when_it_is_known() -> None:
    body = _naming(bucket="tenure-attachments")
    with pytest.raises(WrongObject, match="bucketName") as refused:
        parse_record_body(body, inbound_bucket=BUCKET)
    assert not refused.value.acknowledge
    assert parse_record_body(body).bucket == "tenure-attachments"  # no bucket known: as named
    assert parse_record_body(_naming(), inbound_bucket=BUCKET) == INVOICE


def test_a_verdict_longer_than_any_status_is_refused() -> None:
    notification = _ses()
    notification["receipt"]["spamVerdict"] = {"status": "P" * 1000}
    with pytest.raises(MissingField, match="spamVerdict"):
        parse_record_body(_wrapped(notification))
