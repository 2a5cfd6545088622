"""The reactor's event source lets through exactly the stream records it has work for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from tenure.triggers.stream import rows_of

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _patterns() -> list[dict[str, Any]]:
    template = yaml.load(TEMPLATE.read_text(), Loader=_Loader)
    stream = template["Resources"]["ReactorFunction"]["Properties"]["Events"]["TableStream"]
    return [json.loads(f["Pattern"]) for f in stream["Properties"]["FilterCriteria"]["Filters"]]


def _matches(pattern: Any, value: Any) -> bool:
    """Lambda's event filtering for the subset the template uses: nested keys, value lists."""
    if isinstance(pattern, list):
        return value in pattern
    return isinstance(value, dict) and all(
        key in value and _matches(sub, value[key]) for key, sub in pattern.items()
    )


def _record(image: dict[str, Any] | None) -> dict[str, Any]:
    change = {} if image is None else {"NewImage": {k: {"S": v} for k, v in image.items()}}
    return {"eventName": "MODIFY" if image else "REMOVE", "dynamodb": change}


ROWS = {
    "lease": {"PK": "LEASE#l1", "SK": "LEASE", "entity": "lease"},
    "task": {"PK": "TASK#t1", "SK": "TASK", "entity": "task"},
    "graph": {"PK": "TASK#t1", "SK": "GRAPH"},
    "timeline event": {"PK": "SUBJECT#task#t1", "SK": "EV#1", "entity": "event"},
    "edge": {"PK": "TASK#t1", "SK": "EDGE#child#t2"},
    "worker": {"PK": "POOL#p", "SK": "WORKER#w1", "entity": "worker"},
    "claim record": {"PK": "CLAIM#x", "SK": "CLAIM", "entity": "claim"},
}


def test_the_filter_passes_every_row_the_reactor_decodes_and_nothing_else() -> None:
    patterns = _patterns()
    for name, image in ROWS.items():
        record = _record(image)
        passes = any(_matches(p, record) for p in patterns)
        decoded = _decodable(record)
        assert passes == decoded, f"{name}: filter {passes}, reactor decodes it {decoded}"


def test_a_delete_record_is_filtered_out() -> None:
    assert not any(_matches(p, _record(None)) for p in _patterns())


def _decodable(record: dict[str, Any]) -> bool:
    try:
        return rows_of(record) is not None
    except (KeyError, TypeError, ValueError):
        return True  # it tried to decode the row: the reactor has work for it
