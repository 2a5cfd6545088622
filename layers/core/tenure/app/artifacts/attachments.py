"""A lease's attachments: recorded in the table, bytes in the private bucket."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.ports import Attachment, BlobStore
from tenure.app.rows import AttachmentRows, LeaseRows
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    CeilingReached,
    InvalidTransition,
    NotFound,
    Unauthenticated,
    UnsupportedRuntime,
    ValidationFailed,
)
from tenure.domain.model import Lease, Principal
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.artifacts.artifacts import Artifacts
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

# Types a browser renders as a document that may run script: served as opaque bytes instead,
# inline on the API's origin and named so in a redirect to the bucket alike.
ACTIVE_TYPES = frozenset(
    {"text/html", "image/svg+xml", "application/xhtml+xml", "text/xml", "application/xml"}
)
OPAQUE = "application/octet-stream"

PENDING, STORED, REJECTED, ABANDONED = "pending", "stored", "rejected", "abandoned"
# An inbound email's attachments are stored once per message and shared by every lease its
# rules minted; they list among each of those leases' attachments (kind "email"), and only
# among theirs.
EMAIL_KIND = "email"
EMAIL_PREFIX = "email/"
UPLOAD_PREFIX = "uploads/"
# The MIME parser keeps at most 20 attachments a mail; a trigger listing more is not one it made.
MAX_EMAIL_ATTACHMENTS = 20


def upload_key(key: str) -> str:
    """Where a presigned PUT writes. The bytes served are at `key`, copied there once checked,
    which no presigned URL can write: a PUT repeated after the check (the URL lives 15
    minutes) changes nothing anyone is served."""
    return f"{UPLOAD_PREFIX}{key}"


def email_attachment_key(message_id: str, attachment_id: str) -> str:
    return f"{EMAIL_PREFIX}{message_id}/{attachment_id}"


@record
class Upload:
    url: str
    method: str
    headers: dict[str, str]


def served_type(content_type: str) -> str:
    """The type an attachment is served as: as stored, unless a browser would run it (a page,
    an SVG image) or a header cannot carry it (what an earlier release took in other than
    printable ASCII): then opaque bytes."""
    media = content_type.split(";", 1)[0].strip().lower()
    printable = content_type.isascii() and content_type.isprintable()
    return OPAQUE if media in ACTIVE_TYPES or not printable else content_type


@record
class Download:
    attachment: Attachment
    data: bytes | None = None  # the bytes themselves, or
    url: str | None = None  # a presigned GET to redirect to


class Attachments:
    def __init__(
        self,
        kernel: Kernel,
        artifacts: Artifacts,
        *,
        attachments: AttachmentRows,
        leases: LeaseRows,
    ) -> None:
        self.artifacts = artifacts
        self.kernel = kernel
        self.attachments = attachments
        self.leases = leases

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
        lease = self.kernel.owned.own_lease(actor, lease_id, authz.SHIP)
        fencing.refuse_token_fields(
            {"filename": filename, "content_type": content_type, "kind": kind}
        )
        # An upload URL lasts no longer than the token may ship: after its lease has ended,
        # until its grace ends (S3 then refuses the PUT), not its usual 15 minutes.
        left = authz.ship_seconds_left(authz.lease_ended_at(lease), self.kernel.clock.now_ms())
        expires_s = UPLOAD_EXPIRES_S if left is None else min(UPLOAD_EXPIRES_S, left)
        if content is None and expires_s < 1:
            raise Unauthenticated(authz.SPENT)
        if self.kernel.catalog.reclaimed_at(lease) is not None:
            raise InvalidTransition(f"lease {lease_id} was reclaimed; it takes no attachments")
        byte_size = _size(byte_size, content)
        quota = self.kernel.catalog.pool(lease.pool).attachment_quota_bytes
        if byte_size > quota:
            raise ValidationFailed(
                f"byte_size: {byte_size} is more than the {quota} bytes of attachments a lease "
                "of this pool may add (its attachment_quota_bytes)"
            )
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
        self.artifacts.keep_detail(lease)  # before anything exists that a reclaim must delete
        if content is not None:
            blobs.put(attachment.key, content, content_type)
        try:
            self.attachments.put_attachment(attachment, ATTACHMENTS_PER_LEASE, quota)
        except CeilingReached as full:
            if content is not None:
                blobs.delete([attachment.key])
            if full.details.get("quota"):
                raise ValidationFailed(
                    f"byte_size: lease {lease_id}'s attachments would pass the {quota} bytes "
                    "a lease of its pool may add (attachment_quota_bytes)"
                ) from full
            raise ValidationFailed(
                f"attachments: lease {lease_id} has {ATTACHMENTS_PER_LEASE} already, the most "
                "one lease may keep"
            ) from full
        if content is not None:
            return attachment, None
        url, headers = blobs.presign_put(
            upload_key(attachment.key), content_type, byte_size, expires_s
        )
        return attachment, Upload(url, "PUT", headers)

    def list_attachments(self, actor: Principal, lease_id: str) -> list[Attachment]:
        """The lease's attachments whose bytes are stored as declared, oldest first."""
        lease = self.artifacts.visible_lease(actor, lease_id)
        if self.kernel.catalog.reclaimed_at(lease) is not None:
            return []
        found = [self._settled(a, lease) for a in self.attachments.list_attachments(lease.id)]
        return self._from_email(lease) + [a for a in found if a.status == STORED]

    def fetch_attachment(self, actor: Principal, lease_id: str, attachment_id: str) -> Download:
        lease = self.artifacts.visible_lease(actor, lease_id)
        attachment = None
        if self.kernel.catalog.reclaimed_at(lease) is None and len(attachment_id) <= 128:
            attachment = self.attachments.get_attachment(lease.id, attachment_id) or next(
                iter(self._from_email(lease, only=attachment_id)), None
            )
        if attachment is None:
            raise NotFound(f"attachment {attachment_id} of lease {lease_id} does not exist")
        attachment = self._settled(attachment, lease)
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
            attachment.key,
            attachment.filename,
            served_type(attachment.content_type),
            DOWNLOAD_EXPIRES_S,
        )
        return Download(attachment, url=url)

    def _from_email(self, lease: Lease, only: str | None = None) -> list[Attachment]:
        """The attachments of the email whose rule minted the lease, from its job's trigger
        (one read of the job row; at most the MIME parser's 20 attachments, `only` one).

        The trigger data is believed only as far as it is bound to the mail: the job must be
        the rule's firing on that very SES messageId (its id derives from rule and occasion),
        so no lease reaches another mail's objects by naming its message id. Each size is
        the stored object's (a HEAD), never the trigger's: the size decides whether the bytes
        are read into the answer. An object that is gone is not listed."""
        # The rules' module, loaded only by a lease that reads its attachments (the worker
        # function starts without the rules: `tenure bench coldstart`).
        from tenure.domain.rules.rule import EMAIL_TOPIC, email_occasion, firing_job_id

        job = self.leases.get_job(lease.job_id)
        trigger = (job.trigger if job else None) or {}
        data = trigger.get("data") or {}
        message_id = data.get("message_id")
        if job is None or trigger.get("topic") != EMAIL_TOPIC or not isinstance(message_id, str):
            return []
        if job.rule_id is None or job.id != firing_job_id(job.rule_id, email_occasion(message_id)):
            self.kernel.counters["email_attachments_unbound"] += 1
            return []
        blobs = self.artifacts.blobs
        found: list[Attachment] = []
        for item in (data.get("attachments") or [])[:MAX_EMAIL_ATTACHMENTS]:
            if not isinstance(item, dict) or not isinstance(item.get("attachment_id"), str):
                continue
            att_id = item["attachment_id"]
            if only is not None and att_id != only:
                continue
            key = email_attachment_key(message_id, att_id)
            seen = blobs.head(key) if blobs is not None else None
            if seen is None:
                continue
            found.append(
                Attachment(
                    id=att_id,
                    lease_id=lease.id,
                    kind=EMAIL_KIND,
                    filename=str(item.get("filename") or att_id),
                    content_type=seen.content_type or "application/octet-stream",
                    byte_size=seen.size,
                    created_at=lease.created_at,
                    key=key,
                    status=STORED,
                )
            )
        return found

    def _settled(self, attachment: Attachment, lease: Lease) -> Attachment:
        """A pending upload judged by a HEAD of its upload object: stored (copied to the key
        it is served from) when the size and content type are what was declared and it was
        written before the lease's token could no longer ship, rejected (and its object
        deleted) when not, abandoned when nothing came long after its URL expired;
        otherwise still pending."""
        blobs = self.artifacts.blobs
        if attachment.status != PENDING or blobs is None:
            return attachment
        uploaded = upload_key(attachment.key)
        seen = blobs.head(uploaded)
        if seen is None:
            if self.kernel.clock.now_ms() - attachment.created_at < ABANDON_AFTER_MS:
                return attachment
            status = ABANDONED
        elif not authz.shipped_in_time(_stamped_end(lease), seen.modified_at):
            status = REJECTED  # written after the grace by a URL handed out before its end
            blobs.delete([uploaded])
        elif (seen.size, seen.content_type) == (attachment.byte_size, attachment.content_type):
            status = STORED
            blobs.copy(uploaded, attachment.key)
            blobs.delete([uploaded])
        else:
            status = REJECTED
            blobs.delete([uploaded])
        self.attachments.set_attachment_status(attachment, status)
        return replace(attachment, status=status)


def _stamped_end(lease: Lease) -> int | None:
    """When the lease ended, where its row says (an ended row without its stamp, from before
    leases recorded it, is not judged: refusing there would drop bytes shipped in time)."""
    return lease.ended_at if lease.state.terminal else None


def _size(byte_size: int | None, content: bytes | None) -> int:
    """The attachment's size: the inline content's, which `byte_size` must match if given, or
    the `byte_size` an upload declares; 422 naming the field when it is missing or too large."""
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
        return len(content)
    if byte_size is None:
        raise ValidationFailed("byte_size: required when content_base64 is not given")
    if byte_size > MAX_UPLOAD_BYTES:
        raise ValidationFailed(f"byte_size: is more than {MAX_UPLOAD_BYTES} bytes")
    return byte_size
