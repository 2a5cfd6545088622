"""An inbound rule's ``match`` against an event, and the {subject}/{from} title templating.

Every key given must hold: ``to`` when one recipient equals it, ignoring case; ``from`` when
the sender address equals it or, for a value starting with ``@``, when the sender's domain
does; ``subject_contains`` when the subject contains it, ignoring case. An empty or absent
match holds for everything. The same match applies to any topic: it reads the event's
``data`` fields ``from``, ``to``, ``cc`` and ``subject``, which is the shape of an email's
trigger data.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MATCH_KEYS = ("to", "from", "subject_contains")


class InvalidMatch(ValueError):
    """A ``match`` object the rules API refuses; ``field`` names the offending key."""

    def __init__(self, message: str, *, field: str = "trigger.match") -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Match:
    to: str | None = None
    sender: str | None = None  # the "from" key
    subject_contains: str | None = None

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
        for key in MATCH_KEYS:
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
        return cls(values["to"], values["from"], values["subject_contains"])

    def holds(self, data: Mapping[str, Any], recipients: Iterable[str] = ()) -> bool:
        """Whether the event's data satisfies every given key.

        ``recipients`` adds addresses beyond the data's ``to`` and ``cc`` — for email, SES's
        envelope recipients, so a rule on ``to`` also catches a copy sent by Bcc.
        """
        if self.to is not None:
            wanted = self.to.lower()
            everyone = [*_strings(data.get("to")), *_strings(data.get("cc")), *recipients]
            if not any(_address(candidate) == wanted for candidate in everyone):
                return False
        if self.sender is not None:
            sender = _address(data.get("from"))
            pattern = self.sender.lower()
            if pattern.startswith("@"):
                if sender.rpartition("@")[2] != pattern[1:] or "@" not in sender:
                    return False
            elif sender != pattern:
                return False
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
