"""What a caller's free-form JSON (properties, details, result, metadata, event data…) must be
before it is stored. DynamoDB refuses an item whose attributes nest deeper than 32 levels, and
such a document is stored a few levels down (a task's properties, a report inside a lease row,
an event's data); and a string must encode as UTF-8 to be sent at all (JSON's `\\ud800` escape
parses into a lone surrogate that does not). Either would reach the table and fail there as a
500, so it is refused up front as the caller's mistake."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 16


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
