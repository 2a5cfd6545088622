"""One cursor codec for every paged read: opaque base64url JSON, refused when forged."""

from __future__ import annotations

import base64
import binascii
import json
import re

from tenure.domain.errors import ValidationFailed

_FORGED = "cursor: not a cursor this API handed out"


def encode(kind: str, position: str) -> str:
    """A cursor resuming just after `position` (a sort key) in a read of `kind`."""
    blob = json.dumps({kind: position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(blob).decode().rstrip("=")


def decode(cursor: str, kind: str, shape: re.Pattern[str]) -> str:
    """The position a cursor of `kind` names; anything else is refused, never half-read."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        doc = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error) as bad:
        raise ValidationFailed(_FORGED) from bad
    if not isinstance(doc, dict) or list(doc) != [kind]:
        raise ValidationFailed(_FORGED)
    position = doc[kind]
    if not isinstance(position, str) or not shape.fullmatch(position):
        raise ValidationFailed(_FORGED)
    return position


def encode_in(kind: str, scope: str, position: str) -> str:
    """A cursor of a read scoped to `scope` (a space): it resumes only a read of that scope."""
    return encode(kind, f"{scope}/{position}")


def decode_in(cursor: str, kind: str, shape: re.Pattern[str], scope: str) -> str:
    """The position a cursor of `kind` handed out for `scope` names; a cursor of another
    scope is refused as forged (it names a place in another list)."""
    named, _, position = decode(cursor, kind, shape).partition("/")
    if named != scope:
        raise ValidationFailed(_FORGED)
    return position
