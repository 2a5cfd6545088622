"""What a lease is served: an email's attachments only to leases of that very mail, at the
size of the stored object; uploads as they were checked; within the pool's byte quota."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.artifacts.attachments import (
    SERVE_INLINE_BYTES,
    email_attachment_key,
    upload_key,
)
from tenure.domain.errors import ValidationFailed
from tenure.domain.rules.rule import EMAIL_TOPIC

from tests.unit.fake_artifacts import FakeBlobs
from tests.unit.rules_support import TASK_SUBJECT, inbox_trigger
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, Rig, as_lease, with_artifacts

ADDRESS = "ops@in.example.com"


@pytest.fixture
def rig() -> Rig:
    rig = with_artifacts(Rig())
    rig.svc.addresses.add_address(ADMIN, SPACE, ADDRESS)
    rig.svc.rules.create_rule(ADMIN, SPACE, "inbox", POOL, TASK_SUBJECT, inbox_trigger(to=ADDRESS))
    return rig


def blobs(rig: Rig) -> FakeBlobs:
    assert isinstance(rig.svc.artifacts.blobs, FakeBlobs)
    return rig.svc.artifacts.blobs


def mail(message_id: str, attachments: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "from": "a@partner.example",
        "to": [ADDRESS],
        "cc": [],
        "recipients": [ADDRESS],
        "subject": "s",
        "body": "",
        "verdicts": {
            "spam": "PASS",
            "virus": "PASS",
            "spf": "PASS",
            "dkim": "PASS",
            "dmarc": "PASS",
        },
        "attachments": attachments,
    }


def test_a_forged_email_event_cannot_reach_another_mails_attachments(rig: Rig) -> None:
    key = email_attachment_key("secret-mail", "att_1")
    blobs(rig).put(key, b"payroll", "text/csv")
    forged = mail("secret-mail", [{"attachment_id": "att_1", "filename": "p.csv", "byte_size": 7}])
    with pytest.raises(ValidationFailed) as refused:
        rig.svc.firings.post_event(MEMBER, SPACE, EMAIL_TOPIC, forged, None, None)
    assert refused.value.message.startswith("topic:")
    # Another topic carrying the same data is just data: no email attachment is served.
    rig.svc.rules.create_rule(ADMIN, SPACE, "fwd", POOL, TASK_SUBJECT, {"topic": "mail.forwarded"})
    (lease,) = rig.svc.firings.post_event(MEMBER, SPACE, "mail.forwarded", forged, None, None)
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []


def test_an_email_attachments_size_is_the_stored_objects_not_the_trigger_datas(rig: Rig) -> None:
    big = SERVE_INLINE_BYTES * 40
    blobs(rig).put(email_attachment_key("m1", "att_1"), b"x" * big, "application/zip")
    data = mail("m1", [{"attachment_id": "att_1", "filename": "a.zip", "byte_size": 10}])
    (lease,) = rig.svc.firings.fire_email(rig.clock.now_ms(), data).leases
    (listed,) = rig.svc.attachments.list_attachments(READER, lease.id)
    assert (listed.kind, listed.byte_size) == ("email", big)
    got = rig.svc.attachments.fetch_attachment(READER, lease.id, "att_1")
    assert got.data is None and got.url  # redirected, never read into the answer


def test_an_email_attachment_whose_object_is_gone_is_not_listed(rig: Rig) -> None:
    data = mail("m2", [{"attachment_id": "att_1", "filename": "a.txt", "byte_size": 1}])
    (lease,) = rig.svc.firings.fire_email(rig.clock.now_ms(), data).leases
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []


def test_a_put_repeated_after_the_check_does_not_change_the_bytes_served(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    att, upload = rig.svc.attachments.add_attachment(
        me, lease.id, "r.txt", "text/plain", "file", 4, None
    )
    assert upload is not None and upload_key(att.key) in upload.url
    blobs(rig).put(upload_key(att.key), b"good", "text/plain")
    assert [a.status for a in rig.svc.attachments.list_attachments(READER, lease.id)] == ["stored"]
    blobs(rig).put(upload_key(att.key), b"evil", "text/plain")  # the URL still lives
    assert rig.svc.attachments.fetch_attachment(READER, lease.id, att.id).data == b"good"


def test_a_lease_adds_attachments_only_within_its_pools_byte_quota(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"attachment_quota_bytes": 10})
    lease = rig.running()
    me = as_lease(lease.id)
    rig.svc.attachments.add_attachment(me, lease.id, "a", "text/plain", "file", None, b"123456")
    with pytest.raises(ValidationFailed, match="attachment_quota_bytes") as over:
        rig.svc.attachments.add_attachment(me, lease.id, "b", "text/plain", "file", 6, None)
    assert over.value.message.startswith("byte_size:")
    with pytest.raises(ValidationFailed, match="attachment_quota_bytes"):
        rig.svc.attachments.add_attachment(me, lease.id, "c", "text/plain", "file", 11, None)
    rig.svc.attachments.add_attachment(me, lease.id, "d", "text/plain", "file", None, b"1234")


def test_pools_default_to_a_one_gib_attachment_quota(rig: Rig) -> None:
    assert rig.svc.kernel.catalog.pool(POOL).attachment_quota_bytes == 1024**3
