"""Inbound addresses: each belongs to one space, and only its space's rules receive its mail."""

from __future__ import annotations

import email.utils
import re
from typing import Any

from tenure.domain.errors import ValidationFailed
from tenure.records import record

# A space holds at most this many addresses: listing them is one bounded Query.
MAX_ADDRESSES_PER_SPACE = 100
# An addr-spec as SES receives it: no display name, no spaces, one "@", a dotted domain.
ADDRESS = re.compile(
    r"^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$"
)
MAX_ADDRESS = 254
# Addresses looked up in the inbound index per event (SES delivers to at most 50 recipients).
MAX_RECIPIENTS = 100


@record
class Address:
    address: str  # lowercased: SES reports recipients as written, matching ignores case
    space: str
    created_at: int


def check_address(value: Any, field: str = "address") -> str:
    """The address lowercased, or 422 naming `field`."""
    if not isinstance(value, str):
        raise ValidationFailed(f"{field}: must be an email address")
    address = value.strip().lower()
    if len(address) > MAX_ADDRESS or not ADDRESS.match(address):
        raise ValidationFailed(f"{field}: {value[:80]!r} is not an email address (local@domain)")
    return address


def addresses_named(data: dict[str, Any], extra: list[str]) -> list[str]:
    """Every address an event names (to, cc, envelope recipients), lowercased, bounded."""
    found: list[str] = []
    for value in (data.get("to"), data.get("cc"), extra):
        items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in items:
            if isinstance(item, str):
                address = email.utils.parseaddr(item)[1].strip().lower()
                if address and address not in found:
                    found.append(address)
    return found[:MAX_RECIPIENTS]
