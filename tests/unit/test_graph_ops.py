"""The typed graph operations: every one of them is a write or check the adapter builds and the
fake applies (both match on the types; mypy's assert_never holds each match exhaustive)."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from tenure.app.ports import GraphOp, Reach
from tenure.store.dynamo.graph_ops import graph_op

from tests.unit.fake_store import FakeStore, _graph_target

_SAMPLE: dict[str, object] = {
    "task_id": "task_1",
    "counts": (("children_total", 1),),
    "mark": "",
    "at": 5,
    "cost_key": "USD|actual|x",
    "kind": "dependent",
    "other": "task_2",
    "counted_at": None,
    "counted": False,
    "lease_id": "lease_1",
    "job_id": "job_1",
    "name": "auto_enqueued_at",
    "to": "task_3",
    "root": "task_1",
    "walked": "",
}
_OPS = typing.get_args(GraphOp)


def _sample(op: type) -> GraphOp:
    fields = {f.name: _SAMPLE[f.name] for f in dataclasses.fields(op)}
    return typing.cast(GraphOp, op(**fields))


def test_the_union_names_each_operation_once() -> None:
    assert len(_OPS) == len(set(_OPS)) == 15


@pytest.mark.parametrize("op", _OPS, ids=lambda op: op.__name__)
def test_the_adapter_builds_one_transaction_item_for_each_operation(op: type) -> None:
    item = graph_op("t", _sample(op))
    assert len(item) == 1
    ((kind, body),) = item.items()
    assert kind in ("Put", "Update", "Delete", "ConditionCheck")
    assert body["TableName"] == "t"


@pytest.mark.parametrize("op", _OPS, ids=lambda op: op.__name__)
def test_the_fake_judges_and_applies_each_operation(op: type) -> None:
    store = FakeStore()
    g = _sample(op)
    assert isinstance(store._graph_holds(g), bool)
    assert _graph_target(g)[0] in ("edge", "task", "lease", "job", "graph")


def test_an_operation_that_is_no_graph_op_is_refused_by_the_adapter() -> None:
    with pytest.raises(AssertionError):
        graph_op("t", typing.cast(GraphOp, "reach"))
    assert graph_op("t", Reach("task_1", root="task_1", at=1))["Update"]["Key"]
