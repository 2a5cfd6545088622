"""One inbound email, from its SQS record to its leases.

record body → InboundMail (envelopes) → the rules SES's recipients could fire (their owners
and the inbound index, Firings.email_candidates) → the raw MIME from the inbound bucket →
ParsedMail (mime) → the trigger's data → one lease per enabled `email.received` rule whose
match holds on a recipient SES reported and the rule's space owns — at most once per (SES
messageId, rule), however often SQS redelivers the record (Firings, app/rules/firings.py).

Nothing is read or kept for mail nobody receives: when no space owns a recipient, or no rule
of the owning space names it, the mail is acknowledged without being read. A mail SES found a
virus in goes no further than its envelope: nothing is parsed, stored or minted, and its object
stays in the inbound bucket for whoever looks. One SES did not scan clean (a virus verdict
other than PASS) mints without its attachments, none of them stored (Firings.fire_email).

Where an email's attachments live: each is stored once per message at
`email/<SES messageId>/<attachment_id>` in the attachments bucket, and only when the mail
mints a lease — after every judgement, just before its first lease is committed, so a mail
no rule fires for (unowned, unmatched, spam, archived, past a rule's hourly cap) leaves no
object behind, and no lease names an attachment that was not stored first. A delivery that
mints again (a new rule, or a crash between the objects and the lease) writes the same
objects again: an attachment's id derives from the message id and its position, so every
delivery names the same ones. Their metadata — attachment_id, filename, content_type,
byte_size — is in the trigger data every lease of that email carries on its job row. A
lease's attachments listing reads them from there with `kind: "email"`; no row per (lease,
attachment) is needed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import ClientError

from tenure.app.artifacts.attachments import email_attachment_key
from tenure.app.rules.firings import FAIL
from tenure.app.tenure import Tenure
from tenure.domain.model import Lease
from tenure.records import record
from tenure.triggers.inbound.envelopes import InboundMail, parse_record_body
from tenure.triggers.inbound.mime import (
    MAX_ADDRESS_BYTES,
    MAX_MESSAGE_ID_CHARS,
    MailAttachment,
    ParsedMail,
    parse_mail,
)

# The trigger data rides on the job row (≤ 400 KB an item): the body is cut to this many
# characters there, and `body_truncated` says so. The whole mail stays in the inbound bucket.
MAX_TRIGGER_BODY_CHARS = 32_000
# So is every other field the sender, or the notification, may make long (a Subject or a From
# name of any length, To, Cc and SES's recipients of any number of addresses, an address or a
# Message-ID of any length), each saying `<field>_truncated` when it was cut: uncut, one mail
# could pass the item's 400 KB and be dead-lettered instead of minted. An address longer than
# MAX_ADDRESS_BYTES is no address: it is dropped (`from` is then "").
MAX_TRIGGER_TEXT_CHARS = 1000
MAX_TRIGGER_ADDRESSES = 100


class UnreadableMail(Exception):
    """The notification names an object that cannot be read (missing, or access refused).

    Reported as a batch item failure: SQS retries it and after `maxReceiveCount` it reaches
    the DLQ with its message id, so no email is silently lost.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@record
class Received:
    message_id: str
    leases: list[Lease]
    warnings: tuple[str, ...]
    # Rules whose match held but whose space is archived: nothing minted for them.
    skipped_archived: tuple[str, ...] = ()
    # Rules whose hourly cap was reached, and rules left out because SES judged it spam.
    rate_limited: tuple[str, ...] = ()
    skipped_spam: tuple[str, ...] = ()
    # "virus" when SES's virus verdict is FAIL: nothing read, stored or minted.
    refused: str | None = None
    # "virus_unscanned" when SES's virus verdict is not PASS: the leases name no attachment
    # and none was stored.
    attachments_withheld: str | None = None

    @property
    def matched(self) -> bool:
        return bool(self.leases)


def attachment_id(message_id: str, index: int) -> str:
    """Stable per (message, position): a redelivered email names the same attachments."""
    digest = hashlib.sha256(f"{message_id}\x00{index}".encode()).hexdigest()[:24]
    return f"att_{digest}"


def attachment_key(message_id: str, att_id: str) -> str:
    return email_attachment_key(message_id, att_id)


class InboundEmail:
    def __init__(
        self, svc: Tenure, s3: Any, attachments_bucket: str, inbound_bucket: str | None = None
    ) -> None:
        self.svc = svc
        self.s3 = s3
        self.attachments_bucket = attachments_bucket
        # Where SES stores the mail: a notification naming another bucket is refused.
        self.inbound_bucket = inbound_bucket

    def receive(self, body: str) -> Received:
        """Raises EnvelopeError (see its `acknowledge`) or UnreadableMail."""
        mail = parse_record_body(body, self.inbound_bucket)
        if mail.verdicts.get("virus") == FAIL:
            return Received(mail.message_id, [], (), refused="virus")
        candidates = self.svc.firings.email_candidates(mail.recipients)
        if not candidates:
            return Received(mail.message_id, [], ())
        parsed = parse_mail(self._raw(mail))
        data = trigger_data(mail, parsed, described(mail.message_id, parsed.attachments))
        fired = self.svc.firings.fire_email(
            int(mail.timestamp.timestamp() * 1000),
            data,
            candidates,
            lambda: self._store_attachments(mail.message_id, parsed.attachments),
        )
        return Received(
            mail.message_id,
            fired.leases,
            parsed.warnings,
            tuple(fired.skipped_archived),
            tuple(fired.rate_limited),
            tuple(fired.skipped_spam),
            fired.refused,
            fired.attachments_withheld,
        )

    def _raw(self, mail: InboundMail) -> bytes:
        try:
            out = self.s3.get_object(Bucket=mail.bucket, Key=mail.object_key)
        except ClientError as err:
            code = err.response["Error"]["Code"]
            raise UnreadableMail(
                f"s3://{mail.bucket}/{mail.object_key} cannot be read ({code})"
            ) from err
        return bytes(out["Body"].read())

    def _store_attachments(self, message_id: str, attachments: tuple[MailAttachment, ...]) -> None:
        for index, att in enumerate(attachments, 1):
            self.s3.put_object(
                Bucket=self.attachments_bucket,
                Key=attachment_key(message_id, attachment_id(message_id, index)),
                Body=att.content,
                ContentType=att.content_type,
                Metadata={"filename": att.filename.encode("ascii", "replace").decode()},
            )


def described(message_id: str, attachments: tuple[MailAttachment, ...]) -> list[dict[str, Any]]:
    """The trigger data's attachment list: what `_store_attachments` writes, by the same ids."""
    return [
        {
            "attachment_id": attachment_id(message_id, index),
            "filename": att.filename,
            "content_type": att.content_type,
            "byte_size": att.byte_size,
        }
        for index, att in enumerate(attachments, 1)
    ]


def trigger_data(
    mail: InboundMail, parsed: ParsedMail, attachments: list[dict[str, Any]]
) -> dict[str, Any]:
    """The `data` of an email's trigger, as a lease's payload carries it."""
    body = parsed.body
    sender = parsed.from_address if _is_address(parsed.from_address) else ""
    to, cc = _addresses(parsed.to), _addresses(parsed.cc)
    # Who SES received it for: what rules match on (the To and Cc headers are the sender's say).
    recipients = _addresses(tuple(r.lower() for r in mail.recipients))
    header_message_id = parsed.message_id
    data: dict[str, Any] = {
        "message_id": mail.message_id,
        # The From header's one address, or "" (which no `match.from` holds for). Never the
        # envelope's MAIL FROM: DMARC vouches for the From header's domain, not for it.
        "from": sender,
        "from_name": parsed.from_name[:MAX_TRIGGER_TEXT_CHARS],
        "to": to,
        "cc": cc,
        "recipients": recipients,
        "verdicts": dict(mail.verdicts),
        "subject": parsed.subject[:MAX_TRIGGER_TEXT_CHARS],
        "body": body[:MAX_TRIGGER_BODY_CHARS],
        "attachments": attachments,
        "header_message_id": header_message_id and header_message_id[:MAX_MESSAGE_ID_CHARS],
    }
    if len(body) > MAX_TRIGGER_BODY_CHARS:
        data["body_truncated"] = True
    for name, cut in (
        ("subject", len(parsed.subject) > MAX_TRIGGER_TEXT_CHARS),
        ("from_name", len(parsed.from_name) > MAX_TRIGGER_TEXT_CHARS),
        ("from", sender != parsed.from_address),
        ("to", len(to) < len(parsed.to)),
        ("cc", len(cc) < len(parsed.cc)),
        ("recipients", len(recipients) < len(mail.recipients)),
        ("header_message_id", len(header_message_id or "") > MAX_MESSAGE_ID_CHARS),
    ):
        if cut:
            data[f"{name}_truncated"] = True
    return data


def _is_address(text: str) -> bool:
    return len(text.encode("utf-8", "surrogatepass")) <= MAX_ADDRESS_BYTES


def _addresses(found: tuple[str, ...]) -> list[str]:
    """The first MAX_TRIGGER_ADDRESSES of `found` that are addresses (the rest are dropped)."""
    return [address for address in found if _is_address(address)][:MAX_TRIGGER_ADDRESSES]
