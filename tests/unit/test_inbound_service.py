"""The inbound service from an SQS record body to its leases, on the fake store and an S3 in
memory: what it reads, what it stores in the attachments bucket, and what it mints.

Any sender on the internet may mail any address at the domain with 20 attachments; they are
stored only for a mail that mints at least one lease, so a mail nobody receives, that no rule
matches, that SES judged spam or that a rule's hourly cap refuses leaves nothing behind."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from email.message import EmailMessage
from typing import Any

import pytest
from botocore.exceptions import ClientError
from tenure.app.artifacts.attachments import email_attachment_key
from tenure.domain.model import Lease
from tenure.triggers.inbound import service
from tenure.triggers.inbound.envelopes import parse_record_body
from tenure.triggers.inbound.mime import (
    MAX_ATTACHMENTS,
    MAX_CONTENT_TYPE_CHARS,
    MAX_FILENAME_CHARS,
    MAX_MESSAGE_ID_CHARS,
    MailAttachment,
    ParsedMail,
)
from tenure.triggers.inbound.service import (
    MAX_TRIGGER_ADDRESSES,
    MAX_TRIGGER_TEXT_CHARS,
    InboundEmail,
)
from tenure_cli.local.email_send import notification

from tests.unit.rules_support import TASK_SUBJECT, inbox_trigger
from tests.unit.support import ADMIN, POOL, SPACE, Rig

INBOX = "ops@in.example.com"
INBOUND = "tenure-inbound"
ATTACHMENTS = "tenure-attachments"
TOPIC = "arn:aws:sns:us-east-1:123456789012:tenure-inbound-mail"
ATTACHMENT_BYTES = 200_000


class MemoryS3:
    """The two S3 calls the inbound service makes, counted."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}
        self.gets: list[str] = []
        self.puts: list[tuple[str, str, int]] = []

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        self.gets.append(Key)
        if (Bucket, Key) not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def put_object(self, Bucket: str, Key: str, Body: bytes, **_: Any) -> dict[str, Any]:
        self.puts.append((Bucket, Key, len(Body)))
        self.objects[(Bucket, Key)] = Body
        return {}

    def written(self) -> tuple[int, int]:
        """(objects, bytes) written to the attachments bucket."""
        sizes = [size for bucket, _, size in self.puts if bucket == ATTACHMENTS]
        return len(sizes), sum(sizes)


class Reads:
    """Every read the email path makes of the table, by method, in call order."""

    METHODS = ("address_owners", "inbound_rules", "get_job", "get_lease", "get_space", "get_pool")

    def __init__(self, rig: Rig) -> None:
        self.calls: list[str] = []
        for name in self.METHODS:
            self._wrap(rig, name)

    def _wrap(self, rig: Rig, name: str) -> None:
        real = getattr(rig.store, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return real(*args, **kwargs)

        setattr(rig.store, name, counted)


def raw_mail(attachments: int = MAX_ATTACHMENTS, subject: str = "invoice 42") -> bytes:
    message = EmailMessage()
    message["From"] = "Alice <alice@partner.example>"
    message["To"] = INBOX
    message["Subject"] = subject
    message["Message-ID"] = "<m@partner.example>"
    message.set_content("please see the attached files")
    for n in range(attachments):
        message.add_attachment(
            bytes([n]) * ATTACHMENT_BYTES,
            maintype="application",
            subtype="octet-stream",
            filename=f"file-{n}.bin",
        )
    return message.as_bytes()


def sns_body(
    s3: MemoryS3,
    raw: bytes,
    message_id: str,
    recipients: list[str],
    source: str | None = None,
    **verdicts: str | None,
) -> str:
    """The SQS record body SES → SNS → SQS delivers for `raw`, stored as SES's S3 action
    stores it; `source` is the envelope's MAIL FROM; a verdict given as None is left out of
    the notification."""
    note = notification(raw, message_id, INBOUND, TOPIC, recipients)
    if source is not None:
        note["mail"]["source"] = note["mail"]["commonHeaders"]["returnPath"] = source
    for name, status in verdicts.items():
        if status is None:
            del note["receipt"][f"{name}Verdict"]
        else:
            note["receipt"][f"{name}Verdict"] = {"status": status}
    s3.objects[(INBOUND, note["receipt"]["action"]["objectKey"])] = raw
    return json.dumps(
        {
            "Type": "Notification",
            "MessageId": f"sns-{message_id}",
            "TopicArn": TOPIC,
            "Subject": "Amazon SES Email Receipt Notification",
            "Message": json.dumps(note),
            "Timestamp": "2026-11-30T06:55:05.533Z",
            "SignatureVersion": "1",
            "Signature": "c2lnbmF0dXJl",
            "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
        }
    )


@pytest.fixture
def s3() -> MemoryS3:
    return MemoryS3()


@pytest.fixture
def inbound(rig: Rig, s3: MemoryS3) -> InboundEmail:
    rig.svc.addresses.add_address(ADMIN, SPACE, INBOX)
    return InboundEmail(rig.svc, s3, ATTACHMENTS)


def rule(rig: Rig, name: str = "inbox", **kw: Any) -> None:
    trigger = kw.pop("trigger", inbox_trigger(to=INBOX))
    rig.svc.rules.create_rule(ADMIN, SPACE, name, POOL, TASK_SUBJECT, trigger, **kw)


def trigger_data(rig: Rig, lease: Lease) -> dict[str, Any]:
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    return dict(job.trigger["data"])


# --- attachments are stored only for mail that mints -----------------------------------------


def test_mail_to_an_address_no_space_owns_judged_spam_stores_nothing_and_reads_nothing(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig, accept_spam=True)
    reads = Reads(rig)
    body = sns_body(s3, raw_mail(), "m-unowned", ["nobody@in.example.com"], spam="FAIL")
    received = inbound.receive(body)
    assert (len(received.leases), s3.written()) == (0, (0, 0))
    # Nobody receives it: the owners' one batch read decides it, and the mail is not read.
    assert (reads.calls, s3.gets) == (["address_owners"], [])


def test_mail_no_rule_matches_stores_nothing(rig: Rig, s3: MemoryS3, inbound: InboundEmail) -> None:
    rule(rig, trigger=inbox_trigger(to=INBOX, subject_contains="urgent"))
    reads = Reads(rig)
    received = inbound.receive(sns_body(s3, raw_mail(), "m-nomatch", [INBOX]))
    assert (received.leases, s3.written()) == ([], (0, 0))
    # The reads it took before attachments were judged: the owners, the index, the mail.
    assert (reads.calls, len(s3.gets)) == (["address_owners", "inbound_rules"], 1)


def test_spam_for_rules_that_do_not_accept_it_stores_nothing(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig)
    received = inbound.receive(sns_body(s3, raw_mail(), "m-spam", [INBOX], spam="FAIL"))
    assert (received.leases, len(received.skipped_spam), s3.written()) == ([], 1, (0, 0))


def test_mail_past_a_rules_hourly_cap_stores_nothing(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig, max_firings_per_hour=1)
    assert len(inbound.receive(sns_body(s3, raw_mail(0), "m-first", [INBOX])).leases) == 1
    received = inbound.receive(sns_body(s3, raw_mail(), "m-capped", [INBOX]))
    assert (received.leases, len(received.rate_limited), s3.written()) == ([], 1, (0, 0))


def test_mail_for_an_archived_spaces_rule_stores_nothing(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    received = inbound.receive(sns_body(s3, raw_mail(), "m-archived", [INBOX]))
    assert (received.leases, len(received.skipped_archived), s3.written()) == ([], 1, (0, 0))


def test_a_minting_mail_stores_its_attachments_once_and_a_redelivery_stores_none(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig, "first")
    rule(rig, "second")
    body = sns_body(s3, raw_mail(), "m-minted", [INBOX])
    first = inbound.receive(body)
    assert len(first.leases) == 2
    assert s3.written() == (MAX_ATTACHMENTS, MAX_ATTACHMENTS * ATTACHMENT_BYTES)
    data = trigger_data(rig, first.leases[0])
    for att in data["attachments"]:
        key = email_attachment_key("m-minted", att["attachment_id"])
        assert len(s3.objects[(ATTACHMENTS, key)]) == att["byte_size"] == ATTACHMENT_BYTES
    again = inbound.receive(body)
    assert [x.id for x in again.leases] == [x.id for x in first.leases]
    assert s3.written() == (MAX_ATTACHMENTS, MAX_ATTACHMENTS * ATTACHMENT_BYTES)


def test_a_rule_that_fires_on_a_later_delivery_names_the_same_stored_attachments(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig, "first")
    body = sns_body(s3, raw_mail(2), "m-later", [INBOX])
    first = inbound.receive(body)
    rule(rig, "second")  # made after the first delivery: the redelivery fires it
    again = inbound.receive(body)
    assert len(again.leases) == 2 and again.leases[0].id == first.leases[0].id
    ids = [
        [a["attachment_id"] for a in trigger_data(rig, lease)["attachments"]]
        for lease in again.leases
    ]
    assert ids[0] == ids[1] and len(ids[0]) == 2
    assert all((ATTACHMENTS, email_attachment_key("m-later", i)) in s3.objects for i in ids[0])


def test_the_table_reads_of_a_minting_mail_are_those_of_its_decision_and_its_mint(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig)
    reads = Reads(rig)
    inbound.receive(sns_body(s3, raw_mail(1), "m-reads", [INBOX]))
    assert reads.calls == ["address_owners", "inbound_rules", "get_space", "get_job", "get_pool"]
    assert len(s3.gets) == 1


# --- the sender is the one address of the From header, never the envelope's MAIL FROM ---------

VIP = "ceo@bank.example"


def headers_only(*lines: str) -> bytes:
    return ("\r\n".join([*lines, f"To: {INBOX}", "Subject: wire the money", "", "now"])).encode()


@pytest.mark.parametrize(
    ("raw", "warning"),
    [
        (headers_only(), None),  # no From header: SES's MAIL FROM is the sender's own say
        (headers_only("From: not an address"), "from header holds no readable address"),
        (headers_only(f"From: {VIP}", "From: mallory@evil.example"), "2 From headers"),
        (headers_only(f"From: {VIP}, mallory@evil.example"), "names 2 addresses"),
        (headers_only(f"From: {VIP} <mallory@evil.example>"), "no single readable address"),
    ],
    ids=["no-from", "unreadable", "two-headers", "two-addresses", "address-as-display-name"],
)
def test_a_from_rule_never_matches_a_sender_the_from_header_does_not_name_alone(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail, raw: bytes, warning: str | None
) -> None:
    rule(rig, "vip", trigger=inbox_trigger(to=INBOX, **{"from": VIP}))
    rule(rig, "all")
    body = sns_body(s3, raw, "m-spoof", [INBOX], source=VIP)  # DMARC PASS, as notification()
    received = inbound.receive(body)
    (lease,) = received.leases  # the rule without `from` still files the mail
    assert trigger_data(rig, lease)["from"] == ""
    if warning is not None:
        assert any(warning in w for w in received.warnings), received.warnings


def test_a_from_header_naming_one_address_is_the_sender(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig, "vip", trigger=inbox_trigger(to=INBOX, **{"from": VIP}))
    raw = headers_only(f"From: The CEO <{VIP.upper()}>")
    body = sns_body(s3, raw, "m-vip", [INBOX], source="bounce@mta.example")
    (lease,) = inbound.receive(body).leases
    data = trigger_data(rig, lease)
    assert (data["from"], data["from_name"]) == (VIP, "The CEO")


# --- attachments only from a mail SES scanned clean --------------------------------------------


@pytest.mark.parametrize("virus", ["GRAY", "PROCESSING_FAILED", "DISABLED", None])
def test_a_mail_not_scanned_clean_mints_without_its_attachments(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail, virus: str | None
) -> None:
    rule(rig)
    body = sns_body(s3, raw_mail(3), f"m-{virus}", [INBOX], virus=virus)
    received = inbound.receive(body)
    (lease,) = received.leases
    data = trigger_data(rig, lease)
    assert (data["attachments"], data["attachments_withheld"]) == ([], "virus_unscanned")
    assert data["body"] == "please see the attached files"  # the text still flows
    assert data["verdicts"]["virus"] == virus
    assert received.attachments_withheld == "virus_unscanned"
    assert s3.written() == (0, 0)
    again = inbound.receive(body)
    assert [x.id for x in again.leases] == [lease.id] and s3.written() == (0, 0)


def test_a_mail_scanned_clean_mints_with_its_attachments(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig)
    received = inbound.receive(sns_body(s3, raw_mail(3), "m-pass", [INBOX], virus="PASS"))
    (lease,) = received.leases
    data = trigger_data(rig, lease)
    assert len(data["attachments"]) == 3 and "attachments_withheld" not in data
    assert received.attachments_withheld is None
    assert s3.written() == (3, 3 * ATTACHMENT_BYTES)


def test_a_mail_with_a_virus_is_not_read_and_mints_nothing(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    rule(rig)
    received = inbound.receive(sns_body(s3, raw_mail(3), "m-virus", [INBOX], virus="FAIL"))
    assert (received.leases, received.refused, s3.gets, s3.written()) == ([], "virus", [], (0, 0))


def test_a_mail_s_headers_are_cut_to_what_a_job_row_carries(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    # A job row holds at most 400 KB: an uncut 450,000-character subject failed the mint and
    # sent the mail to the dead-letter queue; 25,000 To addresses made 500 KB of trigger data.
    rule(rig)
    many = ", ".join(f"u{n}@example.com" for n in range(5000))
    raw = (
        f"From: {'N' * 20_000} <a@b.example>\r\nTo: {INBOX}, {many}\r\nCc: {many}\r\n"
        f"Subject: {'S' * 20_000}\r\nMessage-ID: <big@b.example>\r\n\r\nbody"
    ).encode()
    [lease] = inbound.receive(sns_body(s3, raw, "m-big", [INBOX])).leases
    data = trigger_data(rig, lease)
    assert len(data["subject"]) == MAX_TRIGGER_TEXT_CHARS and data["subject_truncated"] is True
    assert len(data["from_name"]) == MAX_TRIGGER_TEXT_CHARS
    assert data["from_name_truncated"] is True
    assert len(data["to"]) == len(data["cc"]) == MAX_TRIGGER_ADDRESSES
    assert data["to"][0] == INBOX and data["to_truncated"] is data["cc_truncated"] is True
    assert len(json.dumps(data)) < 100_000


def test_what_no_sender_or_header_can_write_as_an_address_is_dropped_from_the_trigger(
    rig: Rig, s3: MemoryS3, inbound: InboundEmail
) -> None:
    # A 390,000-character From or Message-ID, folded or not, passed the job row's 400 KB; the
    # mint was refused and the mail dead-lettered after its attachments had been stored.
    rule(rig)
    long_address = "f" * 4000 + "@x.example"
    raw = (
        f"From: <{long_address}>\r\nTo: {INBOX}, <{long_address}>\r\nCc: <{long_address}>\r\n"
        f"Subject: s\r\nMessage-ID: <{'m' * 5000}@x.example>\r\n\r\nbody"
    ).encode()
    foreign = [f"{'r' * 400}@x.example", *(f"u{n}@x.example" for n in range(150))]
    [lease] = inbound.receive(sns_body(s3, raw, "m-long", [INBOX, *foreign])).leases
    data = trigger_data(rig, lease)
    assert (data["from"], data["from_truncated"]) == ("", True)
    assert (data["to"], data["to_truncated"]) == ([INBOX], True)
    assert (data["cc"], data["cc_truncated"]) == ([], True)
    assert len(data["header_message_id"]) <= MAX_MESSAGE_ID_CHARS
    assert data["recipients"][:2] == [INBOX, "u0@x.example"]
    assert (len(data["recipients"]), data["recipients_truncated"]) == (MAX_TRIGGER_ADDRESSES, True)


def test_the_trigger_of_the_most_hostile_mail_stays_well_under_a_job_row(rig: Rig) -> None:
    # Every field at its longest, in characters of four UTF-8 bytes: what DynamoDB counts.
    wide = "\U0001f600"
    address = wide * 400 + "@x.example"
    fits = wide * 76 + "@x.example"  # 314 bytes: an address still
    content_type = "application/" + "x" * (MAX_CONTENT_TYPE_CHARS - len("application/"))
    attachment = MailAttachment(wide * MAX_FILENAME_CHARS, content_type, 1, b"x")
    parsed = ParsedMail(
        message_id="<" + wide * 400_000 + ">",
        from_address=address,
        from_name=wide * 400_000,
        to=(fits,) * 1000,
        cc=(fits,) * 1000,
        subject=wide * 400_000,
        body=wide * 400_000,
        attachments=(attachment,) * MAX_ATTACHMENTS,
        warnings=(),
    )
    mail = parse_record_body(sns_body(MemoryS3(), b"Subject: s\r\n\r\nx", "m-worst", [INBOX]))
    mail = replace(mail, recipients=(fits,) * 1000)
    data = service.trigger_data(
        mail, parsed, service.described(mail.message_id, parsed.attachments)
    )
    size = len(json.dumps(data, ensure_ascii=False).encode())
    assert size < 300_000, size
    assert data["from"] == "" and data["from_truncated"] is True
    assert len(data["header_message_id"].encode()) <= MAX_MESSAGE_ID_CHARS * 4
    assert len(data["recipients"]) == len(data["to"]) == len(data["cc"]) == MAX_TRIGGER_ADDRESSES
