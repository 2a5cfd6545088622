"""SQS record bodies of inbound email, as SES → SNS → SQS delivers them, read into InboundMail.

Two body shapes are accepted: the SNS envelope (``{"Type": "Notification",
"Message": "<SES notification JSON>", …}``, the default subscription) and raw message delivery
(the body *is* the SES notification). Only a ``Received`` notification whose receipt action
is ``S3`` names a stored message; everything else is refused with a typed error.

Models: the SNS envelope is Powertools' ``SnsNotificationModel`` (it already maps the
``SigningCertURL``/``UnsubscribeURL`` spelling SQS bodies use). The SES side is modelled here
because Powertools' ``SesModel`` describes the *Lambda* receipt action only — its action is
``Literal["Lambda"]`` with a required ``functionArn`` and its common headers require
``returnPath``, ``to``, ``date`` and ``subject`` — so an S3-action notification (and a mail
without a Subject or To header) would not validate against it.
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from datetime import UTC, datetime
from typing import Any, ClassVar

from aws_lambda_powertools.utilities.parser.models import SnsNotificationModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tenure.records import record


class EnvelopeError(ValueError):
    """A record body that names no stored email. ``reason`` is safe to log (no body text).

    Every subclass is permanent: SQS redelivers the same bytes, so a retry cannot succeed.
    ``acknowledge`` tells the caller what to do with the record:

    * True — well-formed, but not an inbound email (an SNS subscription message, a bounce or
      complaint notification): acknowledge it and count it; it carries nothing to mint from.
    * False — malformed or misrouted (not JSON, fields missing, a receipt action that stored
      nothing in S3): report it as a batch item failure so it reaches the DLQ after the
      queue's ``maxReceiveCount`` and someone looks at it, rather than losing mail.
    """

    acknowledge: ClassVar[bool] = False
    permanent: ClassVar[bool] = True

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotJson(EnvelopeError):
    """The body, or the SNS envelope's Message, is not a JSON object."""


class NotANotification(EnvelopeError):
    """An SNS message other than a Notification (SubscriptionConfirmation, Unsubscribe…)."""

    acknowledge = True


class NotReceivedMail(EnvelopeError):
    """An SES notification of another type (Bounce, Complaint, Delivery…)."""

    acknowledge = True


class NotS3Action(EnvelopeError):
    """A Received notification whose receipt action is not S3, so no object holds the MIME."""


class MissingField(EnvelopeError):
    """A required field is absent or of the wrong type; ``reason`` lists where."""


class WrongObject(EnvelopeError):
    """The notification names an object that is not its own mail's."""


@record
class InboundMail:
    """Where one received email is stored, and who SES received it for."""

    message_id: str  # SES's mail.messageId: the idempotency key per rule (SQS redelivers)
    timestamp: datetime  # mail.timestamp, when SES received it (aware, UTC)
    bucket: str
    object_key: str
    recipients: tuple[str, ...]  # receipt.recipients: the addresses the receipt rule matched
    source: str  # mail.source, the envelope sender (MAIL FROM)
    # SES's verdicts as it reported them (status strings: PASS, FAIL, GRAY, PROCESSING_FAILED,
    # DISABLED), None where the notification has none.
    verdicts: dict[str, str | None] = field(default_factory=dict)


# --- the SES notification (only what Tenure reads; other fields are allowed and ignored) ------


class _Verdict(BaseModel):
    status: str = Field(max_length=64)  # SES's are one word: PASS, PROCESSING_FAILED…


class _S3Action(BaseModel):
    type: str
    bucketName: str = Field(min_length=1)
    objectKey: str = Field(min_length=1)
    objectKeyPrefix: str | None = None
    topicArn: str | None = None


class _Receipt(BaseModel):
    timestamp: datetime
    recipients: list[str] = Field(min_length=1)
    action: _S3Action
    processingTimeMillis: int | None = None
    spamVerdict: _Verdict | None = None
    virusVerdict: _Verdict | None = None
    spfVerdict: _Verdict | None = None
    dkimVerdict: _Verdict | None = None
    dmarcVerdict: _Verdict | None = None


class _Mail(BaseModel):
    timestamp: datetime
    source: str
    messageId: str = Field(min_length=1)
    destination: list[str]
    headersTruncated: bool | None = None


class SesReceivedNotification(BaseModel):
    """SES's ``Received`` notification for a receipt rule with an S3 action."""

    model_config = ConfigDict(extra="ignore")

    notificationType: str
    mail: _Mail
    receipt: _Receipt


# --- reading a body ---------------------------------------------------------------------------


def parse_record_body(body: str, inbound_bucket: str | None = None) -> InboundMail:
    """Read one SQS record body (SNS envelope or raw delivery) into an InboundMail.

    Raises a subclass of EnvelopeError; see its docstring for which to acknowledge. The object
    named must be the mail's own (_own_object), in `inbound_bucket` when one is given.
    """
    document = _json_object(body, "record body")
    if "Type" in document:
        envelope = _sns_notification(document)
        document = _json_object(envelope.Message, "SNS Message")
    elif "notificationType" not in document:
        raise MissingField("body is neither an SNS envelope (Type) nor an SES notification")
    mail = _received_mail(document)
    _own_object(mail, inbound_bucket)
    return mail


# SES's message ids are letters and digits; the marks allow other writers' ids, and no "/"
# lets one climb out of `email/<messageId>/`, where the mail's attachments are stored.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9_.=+-]{1,200}")


def _own_object(mail: InboundMail, inbound_bucket: str | None) -> None:
    """Refuse a notification naming an object that is not its mail's.

    A notification that named the attachments bucket had another mail's attachment filed as
    a mail; one that named another mail's object filed that mail again, and stored its
    attachments over those its own messageId had named. SES stores each mail at its
    receipt rule's prefix followed by the messageId, in the bucket the template gives it."""
    mid = mail.message_id
    if not _MESSAGE_ID.fullmatch(mid) or mid in (".", ".."):
        raise WrongObject(
            "mail.messageId is not 1-200 letters, digits or '-_.=+' (it names S3 keys)"
        )
    # The key's prefix, as a receipt rule writes one, is a folder (or nothing).
    before = mail.object_key[: -len(mid)]
    if not mail.object_key.endswith(mid) or before[-1:] not in ("", "/"):
        raise WrongObject("receipt.action.objectKey is not a prefix followed by mail.messageId")
    if inbound_bucket is not None and mail.bucket != inbound_bucket:
        raise WrongObject("receipt.action.bucketName is not the inbound bucket")


def _json_object(text: Any, what: str) -> dict[str, Any]:
    if not isinstance(text, str | bytes):
        raise NotJson(f"{what} is not a string")
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        raise NotJson(f"{what} is not JSON") from None
    if not isinstance(document, dict):
        raise NotJson(f"{what} is JSON but not an object")
    return document


def _sns_notification(document: dict[str, Any]) -> SnsNotificationModel:
    if document.get("Type") != "Notification":
        raise NotANotification(f"SNS message of type {str(document.get('Type'))[:64]!r}")
    try:
        # The model's validator renames keys in place; give it a copy.
        return SnsNotificationModel.model_validate(dict(document))
    except ValidationError as exc:
        raise MissingField(f"SNS envelope: {_where(exc)}") from None


def _received_mail(document: dict[str, Any]) -> InboundMail:
    kind = document.get("notificationType")
    if kind != "Received":
        raise NotReceivedMail(f"SES notification of type {str(kind)[:64]!r}")
    receipt = document.get("receipt")
    action = receipt.get("action") if isinstance(receipt, dict) else None
    action_type = action.get("type") if isinstance(action, dict) else None
    if action_type is None:
        raise MissingField("SES notification: receipt.action.type: Field required")
    if action_type != "S3":
        raise NotS3Action(f"receipt action of type {str(action_type)[:64]!r}")
    try:
        notification = SesReceivedNotification.model_validate(document)
    except ValidationError as exc:
        raise MissingField(f"SES notification: {_where(exc)}") from None
    received = notification.mail.timestamp
    # SES writes UTC with a "Z"; a time without an offset is read as UTC too, not local time.
    received = received.astimezone(UTC) if received.tzinfo else received.replace(tzinfo=UTC)
    return InboundMail(
        message_id=notification.mail.messageId,
        timestamp=received,
        bucket=notification.receipt.action.bucketName,
        object_key=notification.receipt.action.objectKey,
        recipients=tuple(notification.receipt.recipients),
        source=notification.mail.source,
        verdicts={
            name: verdict.status if verdict is not None else None
            for name, verdict in (
                ("spam", notification.receipt.spamVerdict),
                ("virus", notification.receipt.virusVerdict),
                ("spf", notification.receipt.spfVerdict),
                ("dkim", notification.receipt.dkimVerdict),
                ("dmarc", notification.receipt.dmarcVerdict),
            )
        },
    )


def _where(exc: ValidationError) -> str:
    """Where validation failed, without the input values (they may hold addresses)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
        for error in exc.errors(include_url=False)[:5]
    )
