"""The reactor's event source lets through only the stream records it may have work for: lease,
task and graph rows (and, unless every transition is published, only those of them that need
a timeline row, a reaction or a bus entry: tests/infra/test_template_outbound_events.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure.triggers.stream import rows_of
from tenure_cli.local.filters import passes, reactor_patterns
from tenure_cli.local.streams import StreamPump

PATTERNS = reactor_patterns(outbound_events="all")
SETTINGS = ("endings", "all", "none")


def _record(image: dict[str, Any] | None) -> dict[str, Any]:
    change = {} if image is None else {"NewImage": {k: {"S": v} for k, v in image.items()}}
    return {"eventName": "MODIFY" if image else "REMOVE", "dynamodb": change}


ROWS = {
    "lease": {"PK": "LEASE#l1", "SK": "LEASE", "entity": "lease", "event_type": "lease.failed"},
    "task": {"PK": "TASK#t1", "SK": "TASK", "entity": "task", "event_type": "task.blocked"},
    "graph": {"PK": "TASK#t1", "SK": "GRAPH"},
    "timeline event": {"PK": "SUBJECT#task#t1", "SK": "EV#1", "entity": "event"},
    "edge": {"PK": "TASK#t1", "SK": "EDGE#child#t2"},
    "worker": {"PK": "POOL#p", "SK": "WORKER#w1", "entity": "worker"},
    "claim record": {"PK": "CLAIM#x", "SK": "CLAIM", "entity": "claim"},
}


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_filter_passes_every_row_the_reactor_decodes_and_nothing_else(setting: str) -> None:
    patterns = reactor_patterns(outbound_events=setting)
    assert patterns, "the reactor's trigger sets no filter"
    for name, image in ROWS.items():
        record = _record(image)
        let_through = passes(patterns, record)
        decoded = _decodable(record)
        assert let_through == decoded, f"{name}: filter {let_through}, reactor decodes it {decoded}"


@pytest.mark.parametrize("setting", SETTINGS)
def test_a_delete_record_is_filtered_out(setting: str) -> None:
    assert not passes(reactor_patterns(outbound_events=setting), _record(None))


def test_the_matcher_knows_exists_prefix_and_anything_but() -> None:
    record = _record({"PK": "LEASE#l1", "entity": "lease"})
    image = {"dynamodb": {"NewImage": {"PK": {"S": [{"prefix": "LEASE#"}]}}}}
    assert passes([image], record)
    assert not passes([{"dynamodb": {"NewImage": {"PK": {"S": [{"prefix": "TASK#"}]}}}}], record)
    assert passes([{"dynamodb": {"NewImage": {"gone": [{"exists": False}]}}}], record)
    assert not passes([{"dynamodb": {"NewImage": {"entity": [{"exists": False}]}}}], record)
    entity = {"dynamodb": {"NewImage": {"entity": {"S": [{"anything-but": ["task"]}]}}}}
    assert passes([entity], record)
    assert not passes(
        [{"dynamodb": {"NewImage": {"entity": {"S": [{"anything-but": "lease"}]}}}}], record
    )
    assert passes([], record), "no filter at all lets every record through"


def test_a_pattern_the_local_stack_cannot_judge_is_refused_when_read() -> None:
    numeric = '{"dynamodb": {"Keys": [{"numeric": [">", 1]}]}}'
    trigger = {
        "Type": "DynamoDB",
        "Properties": {"FilterCriteria": {"Filters": [{"Pattern": numeric}]}},
    }
    template = {
        "Resources": {"ReactorFunction": {"Properties": {"Events": {"TableStream": trigger}}}}
    }
    with pytest.raises(ValueError, match="cannot judge"):
        reactor_patterns(template)


class _Stream:
    """One shard's records, handed out once, in the streams API's shape."""

    def __init__(self, images: list[dict[str, Any] | None]) -> None:
        self.records = [
            {
                "eventID": str(n),
                **_record(image),
                "dynamodb": {**_record(image)["dynamodb"], "SequenceNumber": str(n)},
            }
            for n, image in enumerate(images)
        ]

    def get_records(self, **_: Any) -> dict[str, Any]:
        out, self.records = self.records, []
        return {"Records": out, "NextShardIterator": "next" if out else None}


def test_the_local_pump_hands_the_reactor_only_what_lambda_would() -> None:
    pump = StreamPump(None, "filtered", store=None, patterns=PATTERNS)  # type: ignore[arg-type]
    delivered: list[list[dict[str, Any]]] = []
    pump._deliver = delivered.append  # type: ignore[method-assign]
    pump.streams = _Stream(
        [ROWS["worker"], ROWS["lease"], ROWS["claim record"], None, ROWS["graph"]]
    )
    pump.iterators = {"shard": "first"}
    assert pump._drain("arn") == 5, "every record is read (the iterator moves past all of them)"
    assert [[r["dynamodb"]["SequenceNumber"] for r in batch] for batch in delivered] == [["1", "4"]]

    pump.streams = _Stream([ROWS["worker"], ROWS["claim record"]])
    pump.iterators = {"shard": "again"}
    delivered.clear()
    assert pump._drain("arn") == 2
    assert delivered == [], "a batch the filter empties never invokes the reactor"


def _decodable(record: dict[str, Any]) -> bool:
    try:
        return rows_of(record) is not None
    except (KeyError, TypeError, ValueError):
        return True  # it tried to decode the row: the reactor has work for it


def test_the_matcher_judges_objects_and_lists_as_eventbridge_does() -> None:
    nested = {"dynamodb": {"NewImage": {"M": {"S": "x"}}}}
    assert not passes([{"dynamodb": {"NewImage": {"M": [{"exists": True}]}}}], nested), (
        "exists sees only leaves, and an object is not one"
    )
    assert not passes([{"dynamodb": {"NewImage": {"M": [{"exists": False}]}}}], nested)
    assert not passes([{"dynamodb": {"NewImage": {"M": [{"anything-but": "x"}]}}}], nested)
    listed = {"dynamodb": {"NewImage": {"tags": ["a", "b"], "none": []}}}
    assert passes([{"dynamodb": {"NewImage": {"tags": ["b"]}}}], listed), "any element matches"
    assert not passes([{"dynamodb": {"NewImage": {"tags": ["c"]}}}], listed)
    assert passes([{"dynamodb": {"NewImage": {"tags": [{"prefix": "a"}]}}}], listed)
    assert not passes([{"dynamodb": {"NewImage": {"none": [{"exists": True}]}}}], listed)
    # A leaf path under a map the record lacks is absent: only `exists: false` holds there.
    deep = {"tl": {"M": {"c": {"N": [{"exists": False}]}}}}
    assert passes([{"dynamodb": {"NewImage": deep}}], listed)
    assert passes([{"dynamodb": {"NewImage": deep}}], {"dynamodb": {"NewImage": {"tl": {"M": {}}}}})
    stamped = {"dynamodb": {"NewImage": {"tl": {"M": {"c": {"N": "3"}}}}}}
    assert not passes([{"dynamodb": {"NewImage": deep}}], stamped)
    assert not passes([{"dynamodb": {"NewImage": {"tl": {"M": {"c": {"N": ["3"]}}}}}}], listed)
    flag = {"dynamodb": {"NewImage": {"f": {"BOOL": True}, "n": {"N": 1}}}}
    assert passes([{"dynamodb": {"NewImage": {"f": {"BOOL": [True]}}}}], flag)
    assert not passes([{"dynamodb": {"NewImage": {"n": {"N": [True]}}}}], flag), "true is not 1"


@pytest.mark.parametrize(
    "choice",
    [
        {"anything-but": {"prefix": "LEASE#"}},
        {"anything-but": [{"prefix": "LEASE#"}]},
        {"prefix": "A", "exists": True},
        {"exists": "yes"},
        {"prefix": 3},
        ["nested", "list"],
    ],
)
def test_an_operator_form_the_matcher_does_not_judge_is_refused(choice: object) -> None:
    pattern = json.dumps({"dynamodb": {"NewImage": {"PK": {"S": [choice]}}}})
    trigger = {
        "Type": "DynamoDB",
        "Properties": {"FilterCriteria": {"Filters": [{"Pattern": pattern}]}},
    }
    template = {
        "Resources": {"ReactorFunction": {"Properties": {"Events": {"TableStream": trigger}}}}
    }
    with pytest.raises(ValueError, match="cannot judge"):
        reactor_patterns(template)
