"""docs/architecture.md's table of extension points is the reader's map of what runs, in
order, at each seam `compose()` fills. It drifted once (rows naming stages that had moved, and
missing the ones added since), so this holds it to the composed service both ways: every row
names an extension point that exists and lists exactly its functions in their order, and every
extension point of the composed service has a row."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from tenure.app.leases.reports import Applies, Stage
from tenure.app.tenure import Tenure

from tests.unit.support import Rig

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
ROW = re.compile(
    r"^\|\s*`(?P<point>[A-Za-z]+\.[a-z_]+(?:\[(?:\"[a-z]+\"|[A-Z][A-Za-z]+)\])?)`\s*\|(?P<rest>.*)\|\s*$"
)
# A function in backticks, and what its stage applies to in parentheses when it is declared
# to apply to less than every report (`Retries.on_failure` (a report that ends the lease failed)).
NAME = re.compile(r"`([A-Za-z_]+\.[a-z_]+)`(?: \(([^)]*)\))?")


def documented() -> dict[str, list[str]]:
    """Each row of the extension-point table: the point, and the functions its second column
    names in backticks, in the order written."""
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text().splitlines():
        match = ROW.match(line)
        if match is None:
            continue
        functions = match["rest"].split("|")[0]
        rows[match["point"]] = [
            f"{name} ({applies})" if applies else name for name, applies in NAME.findall(functions)
        ]
    return rows


def name_of(stage: Callable[..., Any] | Stage[Any]) -> str:
    """How the table names a stage: `Class.method` for a bound method, `module.function` for a
    plain function, and `module.factory` for a closure a factory made; a completion stage
    declared to apply to less than every report, followed by what it applies to."""
    if isinstance(stage, Stage):
        named = name_of(stage.run)
        applies = stage.applies
        return named if applies is Applies.EVERY_REPORT else f"{named} ({applies.value})"
    function = stage
    owner = getattr(function, "__self__", None)
    if owner is not None:
        return f"{type(owner).__name__}.{function.__name__}"
    module = function.__module__.rsplit(".", 1)[-1]
    return f"{module}.{function.__qualname__.split('.<locals>')[0]}"


def use_cases(svc: Tenure) -> Iterator[Any]:
    """Every object the composed service holds, one level down as well (the completion's
    stages live on the reports' `completion`)."""
    seen: set[int] = set()
    for value in vars(svc).values():
        for candidate in (value, *vars(value).values()) if hasattr(value, "__dict__") else ():
            if id(candidate) not in seen and hasattr(candidate, "__dict__"):
                seen.add(id(candidate))
                yield candidate


def is_stage_tuple(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and bool(value)
        and all(callable(v) or isinstance(v, Stage) for v in value)
    )


def composed() -> dict[str, list[str]]:
    """Every extension point of the composed service: a tuple of functions held by a use case,
    or a table of them (`Reactions.table`), named as the doc names it."""
    points: dict[str, list[str]] = {}
    for holder in use_cases(Rig().svc):
        cls = type(holder).__name__
        for attr, value in vars(holder).items():
            if is_stage_tuple(value):
                points[f"{cls}.{attr}"] = [name_of(f) for f in value]
            elif (
                isinstance(value, Mapping)
                and value
                and all(is_stage_tuple(v) for v in value.values())
            ):
                for key, stages in value.items():
                    # A table keyed by event type names the type; by a string, quotes it.
                    named = key.__name__ if isinstance(key, type) else f'"{key}"'
                    points[f"{cls}.{attr}[{named}]"] = [name_of(f) for f in stages]
    return points


def test_the_table_is_read_from_the_doc() -> None:
    rows = documented()
    assert len(rows) >= 10, rows
    assert all(functions for functions in rows.values()), rows


@pytest.mark.parametrize("point", sorted(documented()))
def test_every_documented_point_exists_with_its_stages_in_order(point: str) -> None:
    points = composed()
    assert point in points, f"docs/architecture.md names {point}, which compose() does not fill"
    assert documented()[point] == points[point]


def test_every_extension_point_of_the_service_is_documented() -> None:
    missing = sorted(set(composed()) - set(documented()))
    assert not missing, f"extension points missing from docs/architecture.md: {missing}"


def test_the_check_notices_a_stage_out_of_order() -> None:
    points = composed()
    stages = points["Reactions.table[GraphMoved]"]
    assert len(stages) > 1
    assert list(reversed(stages)) != documented()["Reactions.table[GraphMoved]"]
