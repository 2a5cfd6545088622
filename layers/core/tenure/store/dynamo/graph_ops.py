"""A Change's graph operations as TransactItems: one builder per operation, each the write
or check the operation names (app/ports.py has what each one means)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenure.app.ports import GraphOp, HoldOp
from tenure.domain.model import implied_pair
from tenure.domain.states import TERMINAL
from tenure.store import keys as k
from tenure.store.codec import dump as _dump
from tenure.store.codec import values as _values


def _graph_key(g: GraphOp) -> dict[str, Any]:
    return _dump(k.task_graph_key(g.task_id))


def _counted(g: GraphOp) -> tuple[dict[str, str], str]:
    """Placeholders for `g.counts`' names and the ADD clause's terms."""
    names = {f"#c{i}": name for i, (name, _) in enumerate(g.counts)}
    return names, ", ".join(f"#c{i} :c{i}" for i in range(len(names)))


def _add(table: str, g: GraphOp) -> dict[str, Any]:
    names, terms = _counted(g)
    deltas: dict[str, int | None] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
    expression = "ADD " + terms
    copied = g.name == "succeeded_at"
    if g.name:
        expression += " SET #mark = :at"
        names["#mark"] = g.name
        deltas["at"] = g.at
    if copied:  # a parent's own success, copied from its lease with its first child
        expression += ", success_copied = :yes"
        deltas["yes"] = True
    added: dict[str, Any] = {
        "TableName": table,
        "Key": _graph_key(g),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": _values(**deltas),
    }
    conditions = []
    if any(name == "children_total" and d > 0 for name, d in g.counts):
        conditions.append(k.NOT_CANCEL_REACHED)
    if copied:
        conditions.append(k.NOT_SUCCEEDED)
    if conditions:
        added["ConditionExpression"] = " AND ".join(f"({c})" for c in conditions)
    return {"Update": added}


def _reach(table: str, g: GraphOp) -> dict[str, Any]:
    names, terms = _counted(g)
    reach: dict[str, Any] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
    expression = "SET cancel_reached_at = :at, cancel_root = :root"
    condition = k.NOT_CANCEL_REACHED
    if g.name:  # walked at once too: only while it still has no child
        expression += ", #walked = :at"
        names["#walked"] = g.name
        condition += f" AND {k.NO_CHILDREN}"
        reach["zero"] = 0
    if len(g.counts):
        expression += " ADD " + terms
    update: dict[str, Any] = {
        "TableName": table,
        "Key": _graph_key(g),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeValues": _values(**reach, at=g.at, root=g.other),
    }
    if names:
        update["ExpressionAttributeNames"] = names
    return {"Update": update}


def _usage(table: str, g: GraphOp) -> dict[str, Any]:
    names, terms = _counted(g)
    adds: dict[str, Any] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
    values = _values(**adds)
    values[":keys"] = {"SS": [g.name]}
    names["#keys"] = "usage_cost_keys"
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g),
            "UpdateExpression": "ADD " + terms + ", #keys :keys",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def _edge(table: str, g: GraphOp) -> dict[str, Any]:
    item: dict[str, Any] = {**k.task_edge_key(g.task_id, g.name, g.other), "entity": "edge"}
    if g.at is not None:
        item["counted_at"] = g.at
    return {
        "Put": {
            "TableName": table,
            "Item": _dump(item),
            "ConditionExpression": k.IS_NEW,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _unedge(table: str, g: GraphOp) -> dict[str, Any]:
    return {
        "Delete": {
            "TableName": table,
            "Key": _dump(k.task_edge_key(g.task_id, g.name, g.other)),
            "ConditionExpression": k.EDGE_COUNTED if g.at is not None else k.EDGE_NOT_COUNTED,
        }
    }


def _met(table: str, g: GraphOp) -> dict[str, Any]:
    condition = k.HAS_SUCCEEDED if g.op == "met" else k.NOT_SUCCEEDED
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": _graph_key(g),
            "ConditionExpression": condition,
        }
    }


def _succeeded(table: str, g: GraphOp) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g),
            "UpdateExpression": (
                "SET succeeded_at = :at, success_copied = :yes, succeeded_lease = :lease"
            ),
            "ConditionExpression": k.SUCCESS_DUE,
            "ExpressionAttributeValues": _values(at=g.at, yes=True, lease=g.other),
        }
    }


def _link(table: str, g: GraphOp) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g),
            "UpdateExpression": "SET linked_at = if_not_exists(linked_at, :at)",
            "ConditionExpression": k.NOT_SUCCEEDED,
            "ExpressionAttributeValues": _values(at=g.at),
        }
    }


def _lease_open(table: str, g: GraphOp) -> dict[str, Any]:
    ended = {state.value: state.value for state in TERMINAL}
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": _dump(k.lease_key(g.other)),
            "ConditionExpression": k.LEASE_OPEN,
            "ExpressionAttributeNames": k.STATE_NAMES,
            "ExpressionAttributeValues": _values(**ended),
        }
    }


def _run_is(table: str, g: GraphOp) -> dict[str, Any]:
    check: dict[str, Any] = {
        "TableName": table,
        "Key": _dump(k.task_key(g.task_id)),
        "ConditionExpression": k.TASK_JOB_IS if g.other else k.TASK_HAS_NO_JOB,
    }
    if g.other:
        check["ExpressionAttributeValues"] = _values(expect_job=g.other)
    return {"ConditionCheck": check}


def job_check(table: str, job_id: str, lease_id: str) -> dict[str, Any]:
    """Require job `job_id` to point at lease `lease_id` (a first job with no row is on its
    first lease)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": _dump(k.job_key(job_id)),
            "ConditionExpression": (
                k.IMPLIED_JOB_LEASE_IS if implied_pair(job_id, lease_id) else k.JOB_LEASE_IS
            ),
            "ExpressionAttributeValues": _values(expect_lease=lease_id),
        }
    }


def _job_is(table: str, g: GraphOp) -> dict[str, Any]:
    return job_check(table, g.name, g.other)


def _mark(table: str, g: GraphOp) -> dict[str, Any]:
    condition = k.AUTO_ENQUEUE_DUE if g.name == "auto_enqueued_at" else k.NOT_MARKED
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g),
            "UpdateExpression": "SET #mark = :at",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#mark": g.name},
            "ExpressionAttributeValues": _values(at=g.at),
        }
    }


def _advance(table: str, g: GraphOp) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g),
            "UpdateExpression": "SET #mark = :to",
            "ConditionExpression": k.ADVANCES,
            "ExpressionAttributeNames": {"#mark": g.name},
            "ExpressionAttributeValues": _values(to=g.other),
        }
    }


def _has_children(table: str, g: GraphOp) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _dump(k.task_key(g.task_id)),
            "UpdateExpression": "SET has_children = :yes",
            "ConditionExpression": k.EXISTS,
            "ExpressionAttributeValues": _values(yes=True),
        }
    }


_BUILDERS: dict[str, Callable[[str, GraphOp], dict[str, Any]]] = {
    "add": _add,
    "reach": _reach,
    "usage": _usage,
    "edge": _edge,
    "unedge": _unedge,
    "met": _met,
    "unmet": _met,
    "succeeded": _succeeded,
    "link": _link,
    "lease_open": _lease_open,
    "run_is": _run_is,
    "job_is": _job_is,
    "mark": _mark,
    "advance": _advance,
    "has_children": _has_children,
}


def graph_op(table: str, g: GraphOp) -> dict[str, Any]:
    """The TransactItem of one graph operation."""
    build = _BUILDERS.get(g.op)
    if build is None:
        raise ValueError(f"unknown graph op {g.op!r}")
    return build(table, g)


def hold_op(table: str, h: HoldOp) -> dict[str, Any]:
    """Add or remove a task id in one of the scheduler row's sets."""
    return {
        "Update": {
            "TableName": table,
            "Key": _dump(k.SCHEDULER_KEY),
            "UpdateExpression": f"{'ADD' if h.add else 'DELETE'} #set :ids",
            "ExpressionAttributeNames": {"#set": k.HOLD_SETS[h.set_name]},
            "ExpressionAttributeValues": {":ids": {"SS": [h.task_id]}},
        }
    }
