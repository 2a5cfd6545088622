"""Pure rules: timing, token minting and hashing, report fingerprints."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime
from typing import Any

from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease, Pool

# A held lease's stored deadline is written only when a heartbeat would otherwise leave it
# less than one toleration ahead; each write sets it (1 + SLACK) tolerations ahead. So a
# steady heartbeat writes once per SLACK of a toleration (the write rate follows the lease's
# own toleration, not a fixed number of seconds, and most heartbeats write nothing), and a
# lease still never expires sooner than one full toleration after its last heartbeat (it
# expires between 1.0 and 1.5 tolerations of silence, plus up to one sweep period;
# docs/fencing-and-timing.md). Half a toleration, because every deadline write is a billed
# write unit: a job that ends within half a toleration of its start is never renewed.
DEADLINE_SLACK = 0.5

# Ids and names are far shorter than this; a longer one cannot exist (and a DynamoDB key of
# over 2 KB would be refused by the engine), so it is simply not found.
MAX_ID_LENGTH = 200
MAX_TOKEN_LENGTH = 512

TOKEN_PREFIX = {"operator": "tnr_o_", "worker": "tnr_w_", "lease": "tnr_l_"}


# Anything shaped like a Tenure token (operator, worker or lease): never stored, never echoed.
TOKEN_SHAPE = re.compile(r"tnr_[owl]_[A-Za-z0-9_.\-]{16,}")


# What a bearer value must look like to be read from the table at all: a kind's prefix, then
# URL-safe characters (a lease token's `<lease id>.<secret>` included), within the length
# limit. Anything else is refused before a read, so garbage costs the table nothing.
TOKEN_FORM = re.compile(rf"tnr_[owl]_[A-Za-z0-9_.\-]{{4,{MAX_TOKEN_LENGTH - 6}}}")


def could_be_token(raw: str) -> bool:
    return len(raw) <= MAX_TOKEN_LENGTH and TOKEN_FORM.fullmatch(raw) is not None


# What stands in a log line for a token it carried: one form for every kind of token, and
# not itself token-shaped (a redacted line redacts to itself).
REDACTED_TOKEN = "tnr_[redacted]"


def refuse_tokens(document: Any, what: str) -> None:
    """Refuse a document that carries a raw token: it would be stored and shown to others."""
    if TOKEN_SHAPE.search(json.dumps(document)):
        raise ValidationFailed(f"{what} carries a Tenure token; tokens are never stored")


def refuse_token_fields(fields: dict[str, str | None]) -> None:
    """Refuse the first free-text field (by its name) whose value carries a raw token: one
    rule for every text a caller stores and an operator reads back (a name, a reason, a host)."""
    for name, value in fields.items():
        if value and TOKEN_SHAPE.search(value):
            raise ValidationFailed(f"{name}: carries a Tenure token; tokens are never stored")


def redact_tokens(text: str) -> tuple[str, int]:
    """The text with every token-shaped run replaced by REDACTED_TOKEN, and how many were.
    For what a job printed: refusing the line would lose the job's log with the token."""
    # A token never ends with a dot: one the run swallowed (the end of a sentence) is kept.
    return TOKEN_SHAPE.subn(lambda m: REDACTED_TOKEN + m[0][len(m[0].rstrip(".")) :], text)


# The last instant a four-digit year shows, in epoch ms (9999-12-31T23:59:59.999Z).
LAST_SHOWN_MS = 253_402_300_799_999


def shown_ms(ms: int) -> int:
    """`ms` held to the span every answer shows: the epoch to the last four-digit year.
    Requests may name nothing outside it, but a row an earlier release let through must still
    read (a list that failed on it would fail for its whole space), at the span's end."""
    return min(max(ms, 0), LAST_SHOWN_MS)


def utc(ms: int) -> datetime:
    """The instant `ms` (held by `shown_ms`) as a UTC datetime, to the second."""
    return datetime.fromtimestamp(shown_ms(ms) // 1000, tz=UTC)


def iso_ms(ms: int | None) -> str | None:
    """A time as every API answer shows it: ISO 8601, UTC, to the millisecond."""
    if ms is None:
        return None
    shown = min(max(ms, 0), LAST_SHOWN_MS)  # shown_ms, on the path of every answer's times
    stamp = datetime.fromtimestamp(shown // 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{shown % 1000:03d}Z"


def same_hash(stored: str | None, digest: str) -> bool:
    """Whether a stored token hash is this digest, compared in constant time: how long the
    comparison takes tells nothing of how much of a guess was right."""
    return stored is not None and hmac.compare_digest(stored, digest)


def hash_token(raw: str) -> str:
    """Only this digest of a token is ever stored."""
    return hashlib.sha256(raw.encode()).hexdigest()


def mint_lease_token(lease_id: str, secret: str) -> str:
    # The lease id is public; the secret carries the ≥128 bits. Naming the lease in the token
    # lets the authorizer find it with one key read instead of a token index write per claim.
    return f"{TOKEN_PREFIX['lease']}{lease_id}.{secret}"


def lease_id_of_token(raw: str) -> str | None:
    prefix = TOKEN_PREFIX["lease"]
    if not raw.startswith(prefix):
        return None
    lease_id, dot, secret = raw[len(prefix) :].partition(".")
    return lease_id if dot and lease_id and secret else None


def claim_ref(pool: str, claimant: str, worker_id: str, claim_id: str) -> str:
    """What a lease keeps of the claim that took it: a digest of the claim's key (pool,
    worker token id, worker_id, claim_id), 96 bits — short, since every lease write pays for
    its size, and no two of one worker's claims share it."""
    parts = json.dumps([pool, claimant, worker_id, claim_id], separators=(",", ":"))
    return hashlib.sha256(parts.encode()).hexdigest()[:24]


def toleration_ms(lease: Lease, pool: Pool) -> int:
    return 1000 * (lease.lease_seconds or pool.toleration_seconds)


def fresh_deadline(now: int, tol_ms: int) -> int:
    return now + int(tol_ms * (1 + DEADLINE_SLACK))


def deadline_needs_write(lease: Lease, now: int, tol_ms: int) -> bool:
    """True when the stored deadline would fall short of one toleration from now."""
    return lease.deadline is None or lease.deadline < now + tol_ms


def fingerprint(kind: str, body: dict[str, Any]) -> str:
    """Identity of a final report, so the same report sent twice is recognised."""
    material = {k: v for k, v in body.items() if k != "report_id"}
    blob = json.dumps({"kind": kind, "body": material}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
