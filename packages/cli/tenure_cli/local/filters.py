"""Lambda's event filtering for the table's stream, as the template sets it on the reactor.

On AWS a stream record that matches none of the event source mapping's filter patterns never
reaches the function and is not billed as an invocation. The local stack and the benches feed
the reactor themselves (local/streams.py), so they apply the same patterns, read from
infra/template.yaml as the stack's OutboundEvents setting picks them (the template chooses
between two sets with a condition on that parameter): a batch left empty is not delivered at
all, as on AWS.

Only the pattern syntax the template uses is understood — nested objects, lists of values,
`exists`, `prefix` and `anything-but` — and anything else is refused when the patterns are
read, so a pattern the local stack cannot judge is never silently passed or dropped."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from tenure_cli.local.provision import load_template

REACTOR = "ReactorFunction"
PARAMETER = "OutboundEvents"  # the one parameter the filter's condition may read
OPERATORS = frozenset({"exists", "prefix", "anything-but"})

Pattern = dict[str, Any]


def reactor_patterns(
    template: dict[str, Any] | None = None, outbound_events: str | None = None
) -> tuple[Pattern, ...]:
    """The filter patterns of the reactor's stream trigger under the OutboundEvents setting
    `outbound_events` (None: the parameter's default); empty when it sets none (every record
    is delivered). The template's are read once a process and setting (parsing it takes
    ~80 ms, and every stream pump asks)."""
    if template is not None:
        return _patterns_of(template, outbound_events)
    return _shipped_patterns(outbound_events)


@functools.cache
def _shipped_patterns(outbound_events: str | None) -> tuple[Pattern, ...]:
    return _patterns_of(load_template(), outbound_events)


def _patterns_of(template: dict[str, Any], outbound_events: str | None) -> tuple[Pattern, ...]:
    resources = template["Resources"]
    events = resources[REACTOR]["Properties"].get("Events", {})
    patterns: list[Pattern] = []
    for event in events.values():
        if event.get("Type") != "DynamoDB":
            continue
        criteria = _chosen(template, event["Properties"].get("FilterCriteria"), outbound_events)
        for entry in (criteria or {}).get("Filters", []):
            pattern = json.loads(entry["Pattern"])
            _check(pattern)
            patterns.append(pattern)
    return tuple(patterns)


def _chosen(template: dict[str, Any], criteria: Any, outbound_events: str | None) -> Any:
    """The filter criteria a deploy gets: as written, or the branch of an `Fn::If` whose
    condition compares OutboundEvents with a value. Any other condition is refused, so a
    filter the local stack cannot resolve is never silently passed or dropped."""
    if not (isinstance(criteria, dict) and set(criteria) == {"Fn::If"}):
        return criteria
    name, then, otherwise = criteria["Fn::If"]
    test = template.get("Conditions", {}).get(name)
    compared = test.get("Fn::Equals") if isinstance(test, dict) and len(test) == 1 else None
    if not (isinstance(compared, list) and compared[:1] == [{"Ref": PARAMETER}]):
        raise ValueError(f"a filter condition the local stack cannot judge: {name}: {test!r}")
    setting = outbound_events or template["Parameters"][PARAMETER]["Default"]
    return then if setting == compared[1] else otherwise


def passes(patterns: Sequence[Pattern], record: dict[str, Any]) -> bool:
    """Whether Lambda would hand `record` (the shape its DynamoDB trigger delivers) to the
    function: no patterns, or at least one that matches."""
    return not patterns or any(_matches(p, record) for p in patterns)


def _check(pattern: Any) -> None:
    if not isinstance(pattern, dict):
        raise ValueError(f"a filter pattern must be an object, not {pattern!r}")
    for value in pattern.values():
        if isinstance(value, dict):
            _check(value)
        elif isinstance(value, list):
            for choice in value:
                _check_choice(choice)
        else:
            raise ValueError(f"a filter pattern's leaf must be a list of values, not {value!r}")


def _check_choice(choice: Any) -> None:
    if not isinstance(choice, dict):
        if isinstance(choice, list):
            raise ValueError(f"a filter the local stack cannot judge: {choice!r}")
        return
    if len(choice) != 1 or not set(choice) <= OPERATORS:
        raise ValueError(f"a filter the local stack cannot judge: {choice}")
    ((operator, argument),) = choice.items()
    judged = {
        "exists": isinstance(argument, bool),
        "prefix": isinstance(argument, str),
        # Only values: `anything-but` with a prefix or a nested operator is not judged here.
        "anything-but": _is_value(argument)
        or (isinstance(argument, list) and all(_is_value(v) for v in argument)),
    }[operator]
    if not judged:
        raise ValueError(f"a filter the local stack cannot judge: {choice}")


def _is_value(argument: Any) -> bool:
    return argument is None or (
        isinstance(argument, (str, int, float)) and not isinstance(argument, bool)
    )


def _matches(pattern: Pattern, data: Any) -> bool:
    """Lambda matches a pattern's leaves against the record's leaf paths: a path under an
    object the record does not have is absent like any other, so only `exists: false` holds
    there (a record with no `tl` map has no `tl.M.c.N`)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return False
    for key, want in pattern.items():
        if isinstance(want, dict):
            if not _matches(want, data.get(key)):
                return False
        elif not any(_choice(choice, key in data, data.get(key)) for choice in want):
            return False
    return True


def _choice(choice: Any, present: bool, value: Any) -> bool:
    """One entry of a leaf's list against the record's value there. As in EventBridge's
    matching: `exists: true` wants a leaf there (an object, or an empty list, is not one) and
    `exists: false` wants the key absent; a list value matches when any of its elements does;
    a value is never an object."""
    if isinstance(choice, dict) and "exists" in choice:
        if choice["exists"]:
            return present and not isinstance(value, dict) and value != []
        return not present
    if not present or isinstance(value, dict):
        return False
    values = value if isinstance(value, list) else [value]
    return any(_one(choice, v) for v in values if not isinstance(v, (dict, list)))


def _one(choice: Any, value: Any) -> bool:
    if not isinstance(choice, dict):
        if isinstance(choice, bool) or isinstance(value, bool):
            return value is choice  # true is not 1
        return value == choice
    if "prefix" in choice:
        return isinstance(value, str) and value.startswith(choice["prefix"])
    refused = choice["anything-but"]
    return value not in (refused if isinstance(refused, list) else [refused])
