"""What a caller's free-form JSON (properties, details, result, metadata, event data…) must be
before it is stored. DynamoDB refuses an item whose attributes nest deeper than 32 levels, and
such a document is stored a few levels down (a task's properties, a report inside a lease row,
an event's data); and a string must encode as UTF-8 to be sent at all (JSON's `\\ud800` escape
parses into a lone surrogate that does not). Either would reach the table and fail there as a
500, so it is refused up front as the caller's mistake; so is a document larger than an item
should carry, and a number DynamoDB cannot keep."""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

MAX_DEPTH = 16
# A JSON document a caller may attach (details, result, properties…) stays well inside an item.
MAX_DOCUMENT_BYTES = 32 * 1024


class Named(Protocol):
    """Where a document was given: the request field that holds it (pydantic's validation
    info has this shape, so `storable` is a field validator as it stands)."""

    @property
    def field_name(self) -> str | None: ...


def storable(value: Any, where: Named) -> Any:
    """`value`, the document the field `where` names, when it can be stored as it is;
    otherwise ValueError saying why (`unstorable`)."""
    wrong = unstorable(value, where.field_name or "")
    if wrong:
        raise ValueError(wrong)
    return value


def unstorable(value: Any, field: str) -> str | None:
    """Why the document `value` (of the request field `field`) cannot be stored, or None: its
    shape first (`problem`: the size below is measured by recursion), then its size, then its
    numbers."""
    if value is None:
        return None
    wrong = problem(value)
    if wrong:
        return wrong
    if len(json.dumps(value)) > MAX_DOCUMENT_BYTES:
        return f"is larger than {MAX_DOCUMENT_BYTES} bytes of JSON"
    return _unstorable_number(value, field)


def unstorable_at_any_size(value: Any, field: str) -> str | None:
    """`unstorable` for a document whose size its own field bounds: its shape and numbers."""
    return problem(value) or _unstorable_number(value, field)


def problem(value: Any) -> str | None:
    """Why `value` cannot be stored, or None. Walked without recursion, so any document a JSON
    parser returned can be judged (`{}` and `[]` are one level, a scalar none)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if not _encodes(item):
                return "holds a string that is not valid Unicode (a lone surrogate escape)"
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level + 1 > MAX_DEPTH:
            return f"nests deeper than {MAX_DEPTH} levels of objects and arrays"
        stack.extend((child, level + 1) for child in children)
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unstorable_number(value: Any, field: str) -> str | None:
    """DynamoDB keeps numbers to 38 digits and has no NaN or infinity: why a number in
    `value` cannot be stored, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"holds a number that is not finite ({field})"
    if isinstance(value, int | float) and value != 0 and not 1e-129 < abs(value) < 1e125:
        return f"holds a number out of the storable range ({field})"
    if isinstance(value, int) and len(str(abs(value))) > 38:
        return f"holds a number with more than 38 digits ({field})"
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        wrong = _unstorable_number(item, field)
        if wrong:
            return wrong
    return None
