"""A Change's graph operations as TransactItems: one builder per typed operation (app/ports.py
says what each one means), chosen by `match`; the fake store matches on the same types."""

from __future__ import annotations

from typing import Any, assert_never

from tenure.app.ports import (
    WORKER_RETENTION_S,
    AddCounts,
    AddUsage,
    Advance,
    CopySuccess,
    Counts,
    Edge,
    GraphOp,
    HoldOp,
    Link,
    Mark,
    MarkHasChildren,
    Reach,
    RequireJobLease,
    RequireLeaseOpen,
    RequireNotSucceeded,
    RequireRun,
    RequireSucceeded,
    SignalBump,
    Unedge,
)
from tenure.domain.model import implied_pair
from tenure.domain.states import TERMINAL
from tenure.store import codec, conditions, expressions, keys


def _graph_key(task_id: str) -> dict[str, Any]:
    return codec.dump(keys.task_graph_key(task_id))


def _counted(counts: Counts) -> tuple[dict[str, str], dict[str, Any]]:
    """Placeholders for the counters' names and their deltas (expressions.add_counters)."""
    names = {f"#c{i}": name for i, (name, _) in enumerate(counts)}
    deltas: dict[str, Any] = {f"c{i}": d for i, (_, d) in enumerate(counts)}
    return names, deltas


def _add(table: str, g: AddCounts) -> dict[str, Any]:
    names, deltas = _counted(g.counts)
    expression = expressions.add_counters(len(g.counts))
    copied = g.mark == "succeeded_at"
    if g.mark:
        expression += expressions.AND_SET_MARK
        names["#mark"] = g.mark
        deltas["at"] = g.at
    if copied:  # a parent's own success, copied from its lease with its first child
        expression += expressions.AND_MARK_COPIED
        deltas["yes"] = True
    added: dict[str, Any] = {
        "TableName": table,
        "Key": _graph_key(g.task_id),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": codec.values(**deltas),
    }
    guards = []
    if any(name == "children_total" and d > 0 for name, d in g.counts):
        guards.append(conditions.NOT_CANCEL_REACHED)
    if copied:
        guards.append(conditions.NOT_SUCCEEDED)
    if guards:
        added["ConditionExpression"] = " AND ".join(f"({guard})" for guard in guards)
    return {"Update": added}


def _reach(table: str, g: Reach) -> dict[str, Any]:
    names, reach = _counted(g.counts)
    expression = expressions.REACH
    condition = conditions.NOT_CANCEL_REACHED
    if g.walked:  # walked at once too: only while it still has no child
        expression += expressions.AND_WALKED
        names["#walked"] = g.walked
        condition += f" AND {conditions.NO_CHILDREN}"
        reach["zero"] = 0
    if len(g.counts):
        expression += " " + expressions.add_counters(len(g.counts))
    update: dict[str, Any] = {
        "TableName": table,
        "Key": _graph_key(g.task_id),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeValues": codec.values(**reach, at=g.at, root=g.root),
    }
    if names:
        update["ExpressionAttributeNames"] = names
    return {"Update": update}


def _usage(table: str, g: AddUsage) -> dict[str, Any]:
    names, adds = _counted(g.counts)
    values = codec.values(**adds)
    values[":keys"] = {"SS": [g.cost_key]}
    names["#keys"] = "usage_cost_keys"
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g.task_id),
            "UpdateExpression": expressions.add_counters(len(g.counts))
            + expressions.AND_ADD_COST_KEY,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def _edge(table: str, g: Edge) -> dict[str, Any]:
    item: dict[str, Any] = {**keys.task_edge_key(g.task_id, g.kind, g.other), "entity": "edge"}
    if g.counted_at is not None:
        item["counted_at"] = g.counted_at
    return {
        "Put": {
            "TableName": table,
            "Item": codec.dump(item),
            "ConditionExpression": conditions.IS_NEW,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _unedge(table: str, g: Unedge) -> dict[str, Any]:
    return {
        "Delete": {
            "TableName": table,
            "Key": codec.dump(keys.task_edge_key(g.task_id, g.kind, g.other)),
            "ConditionExpression": conditions.EDGE_COUNTED
            if g.counted
            else conditions.EDGE_NOT_COUNTED,
        }
    }


def _graph_check(table: str, task_id: str, condition: str) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": _graph_key(task_id),
            "ConditionExpression": condition,
        }
    }


def _copy_success(table: str, g: CopySuccess) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g.task_id),
            "UpdateExpression": expressions.COPY_SUCCESS,
            "ConditionExpression": conditions.SUCCESS_DUE,
            "ExpressionAttributeValues": codec.values(at=g.at, yes=True, lease=g.lease_id),
        }
    }


def _link(table: str, g: Link) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g.task_id),
            "UpdateExpression": expressions.LINK,
            "ConditionExpression": conditions.NOT_SUCCEEDED,
            "ExpressionAttributeValues": codec.values(at=g.at),
        }
    }


def _lease_open(table: str, g: RequireLeaseOpen) -> dict[str, Any]:
    ended = {state.value: state.value for state in TERMINAL}
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": codec.dump(keys.lease_key(g.lease_id)),
            "ConditionExpression": conditions.LEASE_OPEN,
            "ExpressionAttributeNames": conditions.STATE_NAMES,
            "ExpressionAttributeValues": codec.values(**ended),
        }
    }


def _run_is(table: str, g: RequireRun) -> dict[str, Any]:
    check: dict[str, Any] = {
        "TableName": table,
        "Key": codec.dump(keys.task_key(g.task_id)),
        "ConditionExpression": conditions.TASK_JOB_IS if g.job_id else conditions.TASK_HAS_NO_JOB,
    }
    if g.job_id:
        check["ExpressionAttributeValues"] = codec.values(expect_job=g.job_id)
    return {"ConditionCheck": check}


def job_check(table: str, job_id: str, lease_id: str) -> dict[str, Any]:
    """Require job `job_id` to point at lease `lease_id` (a first job with no row is on its
    first lease)."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": codec.dump(keys.job_key(job_id)),
            "ConditionExpression": (
                conditions.IMPLIED_JOB_LEASE_IS
                if implied_pair(job_id, lease_id)
                else conditions.JOB_LEASE_IS
            ),
            "ExpressionAttributeValues": codec.values(expect_lease=lease_id),
        }
    }


def _mark(table: str, g: Mark) -> dict[str, Any]:
    condition = (
        conditions.AUTO_ENQUEUE_DUE if g.name == "auto_enqueued_at" else conditions.NOT_MARKED
    )
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g.task_id),
            "UpdateExpression": expressions.SET_MARK,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#mark": g.name},
            "ExpressionAttributeValues": codec.values(at=g.at),
        }
    }


def _advance(table: str, g: Advance) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _graph_key(g.task_id),
            "UpdateExpression": expressions.ADVANCE_MARK,
            "ConditionExpression": conditions.ADVANCES,
            "ExpressionAttributeNames": {"#mark": g.name},
            "ExpressionAttributeValues": codec.values(to=g.to),
        }
    }


def _has_children(table: str, g: MarkHasChildren) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": codec.dump(keys.task_key(g.task_id)),
            "UpdateExpression": expressions.SET_HAS_CHILDREN,
            "ConditionExpression": conditions.EXISTS,
            "ExpressionAttributeValues": codec.values(yes=True),
        }
    }


def graph_op(table: str, g: GraphOp) -> dict[str, Any]:
    """The TransactItem of one graph operation."""
    match g:
        case AddCounts():
            return _add(table, g)
        case Reach():
            return _reach(table, g)
        case AddUsage():
            return _usage(table, g)
        case Edge():
            return _edge(table, g)
        case Unedge():
            return _unedge(table, g)
        case RequireSucceeded(task_id):
            return _graph_check(table, task_id, conditions.HAS_SUCCEEDED)
        case RequireNotSucceeded(task_id):
            return _graph_check(table, task_id, conditions.NOT_SUCCEEDED)
        case CopySuccess():
            return _copy_success(table, g)
        case Link():
            return _link(table, g)
        case RequireLeaseOpen():
            return _lease_open(table, g)
        case RequireRun():
            return _run_is(table, g)
        case RequireJobLease(job_id=job_id, lease_id=lease_id):
            return job_check(table, job_id, lease_id)
        case Mark():
            return _mark(table, g)
        case Advance():
            return _advance(table, g)
        case MarkHasChildren():
            return _has_children(table, g)
    assert_never(g)


def hold_op(table: str, h: HoldOp) -> dict[str, Any]:
    """Add or remove a task id in one of the scheduler row's sets."""
    return {
        "Update": {
            "TableName": table,
            "Key": codec.dump(keys.SCHEDULER_KEY),
            "UpdateExpression": expressions.ADD_HOLD if h.add else expressions.DROP_HOLD,
            "ExpressionAttributeNames": {"#set": keys.HOLD_SETS[h.set_name]},
            "ExpressionAttributeValues": {":ids": {"SS": [h.task_id]}},
        }
    }


def signal_op(table: str, bump: SignalBump) -> dict[str, Any]:
    """Raise a worker's signal epoch (domain/signals.py), in the transaction of the lease write
    its heartbeat must hear of."""
    return {
        "Update": {
            "TableName": table,
            "Key": codec.dump(keys.signal_key(bump.key.claimant, bump.key.worker_id)),
            "UpdateExpression": expressions.RAISE_SIGNAL,
            "ExpressionAttributeNames": {"#epoch": keys.SIGNAL_EPOCH, "#ttl": keys.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": codec.values(
                one=1, ttl=bump.at // 1000 + WORKER_RETENTION_S
            ),
        }
    }
