"""A lease's attachments: recorded in the table, bytes in the private bucket."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tenure.app.ports import Attachment, BlobStore
from tenure.domain import authz
from tenure.domain import fencing as rules
from tenure.domain.errors import (
    CeilingReached,
    InvalidTransition,
    NotFound,
    UnsupportedRuntime,
    ValidationFailed,
)
from tenure.domain.model import Lease, Principal
from tenure.domain.rules.rule import EMAIL_TOPIC

if TYPE_CHECKING:
    from tenure.app.artifacts.logs import Artifacts
    from tenure.app.kernel import Kernel

MAX_INLINE_BYTES = 1024 * 1024  # content_base64, decoded
MAX_UPLOAD_BYTES = 5 * 1024**3  # one S3 PUT
ATTACHMENTS_PER_LEASE = 100  # also bounds the HEADs one listing makes
UPLOAD_EXPIRES_S = 900
DOWNLOAD_EXPIRES_S = 300
# Fetched bytes up to this size are answered in the body; larger ones redirect to S3 (a
# Lambda answer carries at most 6 MB, base64 included).
SERVE_INLINE_BYTES = 1024 * 1024
# A pending upload still missing this long after its URL expired will not come any more
# (S3 checks the signature when a PUT starts; a slow one may finish after the expiry).
ABANDON_AFTER_MS = (UPLOAD_EXPIRES_S + 3600) * 1000

PENDING, STORED, REJECTED, ABANDONED = "pending", "stored", "rejected", "abandoned"
# An inbound email's attachments are stored once per message and shared by every lease its
# rules minted; they list among each of those leases' attachments (kind "email"), and only
# among theirs.
EMAIL_KIND = "email"
EMAIL_PREFIX = "email/"


def email_attachment_key(message_id: str, attachment_id: str) -> str:
    return f"{EMAIL_PREFIX}{message_id}/{attachment_id}"


@dataclass(frozen=True)
class Upload:
    url: str
    method: str
    headers: dict[str, str]


@dataclass(frozen=True)
class Download:
    attachment: Attachment
    data: bytes | None = None  # the bytes themselves, or
    url: str | None = None  # a presigned GET to redirect to


class Attachments:
    def __init__(self, kernel: Kernel, artifacts: Artifacts) -> None:
        self.artifacts = artifacts
        self.kernel = kernel

    def _bucket(self) -> BlobStore:
        if self.artifacts.blobs is None:
            raise UnsupportedRuntime("this deployment has no attachments bucket configured")
        return self.artifacts.blobs

    def add_attachment(
        self,
        actor: Principal,
        lease_id: str,
        filename: str,
        content_type: str,
        kind: str,
        byte_size: int | None,
        content: bytes | None,
    ) -> tuple[Attachment, Upload | None]:
        """Record an attachment: stored at once (`content`), or with an upload URL for a PUT
        of exactly `byte_size` bytes of `content_type`."""
        lease = self.kernel.own_lease(actor, lease_id, authz.SHIP)
        rules.refuse_token_fields(
            {"filename": filename, "content_type": content_type, "kind": kind}
        )
        if lease.reclaimed_at is not None:
            raise InvalidTransition(f"lease {lease_id} was reclaimed; it takes no attachments")
        if content is not None:
            if len(content) > MAX_INLINE_BYTES:
                raise ValidationFailed(
                    f"content_base64: decodes to {len(content)} bytes, more than the "
                    f"{MAX_INLINE_BYTES} bytes (1 MiB) an inline attachment may have; "
                    "leave content_base64 out to get an upload URL"
                )
            if byte_size is not None and byte_size != len(content):
                raise ValidationFailed(
                    f"byte_size: is {byte_size} but content_base64 decodes to {len(content)}"
                )
            byte_size = len(content)
        if byte_size is None:
            raise ValidationFailed("byte_size: required when content_base64 is not given")
        if byte_size > MAX_UPLOAD_BYTES:
            raise ValidationFailed(f"byte_size: is more than {MAX_UPLOAD_BYTES} bytes")
        blobs = self._bucket()
        att_id = self.kernel.ids.new_id("att")
        attachment = Attachment(
            id=att_id,
            lease_id=lease.id,
            kind=kind,
            filename=filename,
            content_type=content_type,
            byte_size=byte_size,
            created_at=self.kernel.clock.now_ms(),
            key=f"leases/{lease.id}/{att_id}",
            status=STORED if content is not None else PENDING,
        )
        if content is not None:
            blobs.put(attachment.key, content, content_type)
        try:
            self.kernel.store.put_attachment(attachment, ATTACHMENTS_PER_LEASE)
        except CeilingReached as full:
            if content is not None:
                blobs.delete([attachment.key])
            raise ValidationFailed(
                f"attachments: lease {lease_id} has {ATTACHMENTS_PER_LEASE} already, the most "
                "one lease may keep"
            ) from full
        if content is not None:
            return attachment, None
        url, headers = blobs.presign_put(attachment.key, content_type, byte_size, UPLOAD_EXPIRES_S)
        return attachment, Upload(url, "PUT", headers)

    def list_attachments(self, actor: Principal, lease_id: str) -> list[Attachment]:
        """The lease's attachments whose bytes are stored as declared, oldest first."""
        lease = self.artifacts.visible_lease(actor, lease_id)
        if lease.reclaimed_at is not None:
            return []
        found = [self._settled(a) for a in self.kernel.store.list_attachments(lease.id)]
        return self._from_email(lease) + [a for a in found if a.status == STORED]

    def fetch_attachment(self, actor: Principal, lease_id: str, attachment_id: str) -> Download:
        lease = self.artifacts.visible_lease(actor, lease_id)
        attachment = None
        if lease.reclaimed_at is None and len(attachment_id) <= 128:
            attachment = self.kernel.store.get_attachment(lease.id, attachment_id) or next(
                (a for a in self._from_email(lease) if a.id == attachment_id), None
            )
        if attachment is None:
            raise NotFound(f"attachment {attachment_id} of lease {lease_id} does not exist")
        attachment = self._settled(attachment)
        if attachment.status != STORED:
            raise NotFound(
                f"attachment {attachment_id} has no stored bytes ({attachment.status}: "
                "its upload has not arrived as declared)"
            )
        blobs = self._bucket()
        if attachment.byte_size <= SERVE_INLINE_BYTES:
            data = blobs.get(attachment.key)
            if data is None:
                raise NotFound(
                    f"attachment {attachment_id}'s bytes are gone from the bucket (its "
                    "lifecycle rule expires objects older than the template's "
                    "AttachmentRetentionDays)"
                )
            return Download(attachment, data=data)
        url = blobs.presign_get(
            attachment.key, attachment.filename, attachment.content_type, DOWNLOAD_EXPIRES_S
        )
        return Download(attachment, url=url)

    def _from_email(self, lease: Lease) -> list[Attachment]:
        """The attachments of the email whose rule minted the lease, from its job's trigger
        (one read of the job row; at most the MIME parser's 20 attachments)."""
        job = self.kernel.store.get_job(lease.job_id)
        trigger = (job.trigger if job else None) or {}
        data = trigger.get("data") or {}
        message_id = data.get("message_id")
        if trigger.get("topic") != EMAIL_TOPIC or not isinstance(message_id, str):
            return []
        return [
            Attachment(
                id=str(item["attachment_id"]),
                lease_id=lease.id,
                kind=EMAIL_KIND,
                filename=str(item.get("filename") or item["attachment_id"]),
                content_type=str(item.get("content_type") or "application/octet-stream"),
                byte_size=int(item.get("byte_size") or 0),
                created_at=lease.created_at,
                key=email_attachment_key(message_id, str(item["attachment_id"])),
                status=STORED,
            )
            for item in data.get("attachments") or []
            if isinstance(item, dict) and item.get("attachment_id")
        ]

    def _settled(self, attachment: Attachment) -> Attachment:
        """A pending upload judged by a HEAD of its object: stored when the size and content
        type are what was declared, rejected (and its object deleted) when not, abandoned
        when nothing came long after its URL expired; otherwise still pending."""
        if attachment.status != PENDING or self.artifacts.blobs is None:
            return attachment
        seen = self.artifacts.blobs.head(attachment.key)
        if seen is None:
            if self.kernel.clock.now_ms() - attachment.created_at < ABANDON_AFTER_MS:
                return attachment
            status = ABANDONED
        elif seen == (attachment.byte_size, attachment.content_type):
            status = STORED
        else:
            status = REJECTED
            self.artifacts.blobs.delete([attachment.key])
        self.kernel.store.set_attachment_status(attachment, status)
        return replace(attachment, status=status)
