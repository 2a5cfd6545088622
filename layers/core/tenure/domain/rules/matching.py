"""An inbound rule's ``match`` against an event, and the {subject}/{from} title templating.

Every key given must hold: ``to`` (one address or a list) when one recipient equals one of
them, ignoring case; ``from`` when the sender address equals it or, for a value starting with
``@``, when the sender's domain does; ``subject_contains`` when the subject contains it,
ignoring case. An empty or absent match holds for everything.

A posted event is matched on its ``data`` fields ``from``, ``to``, ``cc`` and ``subject``. An
email is matched differently (``holds_email``): its recipients are the ones SES reports and
the space owns, never the To or Cc headers a sender writes, and its sender counts only when
SES's DMARC verdict is PASS, since the From header is the sender's own claim.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tenure.records import record

MATCH_KEYS = ("to", "from", "subject_contains")
# The longest value that could ever hold: an email's subject is kept to 1,000 characters, and
# no address (SMTP's 64 + "@" + 255) or domain is longer. Past them a rule would never fire.
MAX_MATCH_CHARS = {"subject_contains": 1000, "from": 320}
# Addresses one rule's `to` may list (each is a row in the inbound index).
MAX_TO = 10


class InvalidMatch(ValueError):
    """A ``match`` object the rules API refuses; ``field`` names the offending key."""

    def __init__(self, message: str, *, field: str = "trigger.match") -> None:
        super().__init__(message)
        self.field = field
        self.message = message


PASS = "PASS"


@record
class Match:
    to: tuple[str, ...] | None = None  # lowercased
    sender: str | None = None  # the "from" key
    subject_contains: str | None = None

    def check_bounds(self) -> None:
        """Refuse a value nothing could ever match (InvalidMatch naming it): checked when a
        rule is written, not when a stored one is read, so a rule an earlier release took
        still reads (and never fires, as before)."""
        for key, value in (("from", self.sender), ("subject_contains", self.subject_contains)):
            bound = MAX_MATCH_CHARS[key]
            if value is not None and len(value.encode()) > bound:
                raise InvalidMatch(
                    f"match.{key} is longer than {bound} bytes: nothing could ever match it",
                    field=f"trigger.match.{key}",
                )

    @classmethod
    def from_dict(cls, raw: Any) -> Match:
        """Validate a rule's ``match`` (absent or null = match everything)."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise InvalidMatch("match must be an object")
        unknown = sorted(set(raw) - set(MATCH_KEYS))
        if unknown:
            raise InvalidMatch(f"match has unknown keys: {', '.join(map(str, unknown))}")
        values: dict[str, str | None] = {}
        to = _to_list(raw.get("to"))
        for key in MATCH_KEYS[1:]:
            value = raw.get(key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidMatch(
                    f"match.{key} must be a non-empty string", field=f"trigger.match.{key}"
                )
            values[key] = value.strip() if isinstance(value, str) else None
        if (
            values["from"] is not None
            and values["from"].startswith("@")
            and len(values["from"]) < 2
        ):
            raise InvalidMatch("match.from '@' needs a domain", field="trigger.match.from")
        return cls(to, values["from"], values["subject_contains"])

    def holds(self, data: Mapping[str, Any], recipients: Iterable[str] = ()) -> bool:
        """Whether the event's data satisfies every given key.

        ``recipients`` adds addresses beyond the data's ``to`` and ``cc`` — for email, SES's
        envelope recipients, so a rule on ``to`` also catches a copy sent by Bcc.
        """
        if self.to is not None:
            everyone = [*_strings(data.get("to")), *_strings(data.get("cc")), *recipients]
            if not any(_address(candidate) in self.to for candidate in everyone):
                return False
        if self.sender is not None and not self._sender_holds(data):
            return False
        return self._subject_holds(data)

    def holds_email(
        self, data: Mapping[str, Any], recipients: Iterable[str], dmarc: str | None
    ) -> bool:
        """Whether an email satisfies every given key. `recipients` are the addresses SES
        received it for that the rule's space owns; a rule naming no `to` holds for none."""
        if not self.to or not any(_address(r) in self.to for r in recipients):
            return False
        if self.sender is not None and (dmarc != PASS or not self._sender_holds(data)):
            return False
        return self._subject_holds(data)

    def _sender_holds(self, data: Mapping[str, Any]) -> bool:
        assert self.sender is not None
        sender = _address(data.get("from"))
        pattern = self.sender.lower()
        if pattern.startswith("@"):
            return "@" in sender and sender.rpartition("@")[2] == pattern[1:]
        return sender == pattern

    def _subject_holds(self, data: Mapping[str, Any]) -> bool:
        if self.subject_contains is not None:
            subject = data.get("subject")
            if not isinstance(subject, str):
                return False
            if self.subject_contains.casefold() not in subject.casefold():
                return False
        return True


def match_holds(
    match: Mapping[str, Any] | None, data: Mapping[str, Any], recipients: Iterable[str] = ()
) -> bool:
    """``Match.from_dict(match).holds(data, recipients)``: the one-call form for stored rules."""
    return Match.from_dict(match).holds(data, recipients)


def _to_list(value: Any) -> tuple[str, ...] | None:
    """`to` as one address or a non-empty list of them, lowercased, each once."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or len(items) > MAX_TO:
        raise InvalidMatch(
            f"match.to must be an address or a list of 1-{MAX_TO} addresses",
            field="trigger.match.to",
        )
    out: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidMatch("match.to must be a non-empty string", field="trigger.match.to")
        address = item.strip().lower()
        if address not in out:
            out.append(address)
    return tuple(out)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def _address(value: Any) -> str:
    """The lowercased addr-spec of ``a@b`` or ``Name <a@b>``; "" for anything else."""
    if not isinstance(value, str):
        return ""
    return email.utils.parseaddr(value)[1].strip().lower()


# --- templating -------------------------------------------------------------------------------

# One pass over the template: a substituted subject that itself reads "{from}" stays as is,
# and no other brace is interpreted (this is not str.format: "{0.__class__}" is just text).
_PLACEHOLDER = re.compile(r"\{(subject|from)\}")


def render_template(template: str, *, subject: str, sender: str) -> str:
    """Replace ``{subject}`` and ``{from}``; leave every other character as written."""
    values = {"subject": subject, "from": sender}
    return _PLACEHOLDER.sub(lambda found: values[found.group(1)], template)
