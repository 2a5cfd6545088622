"""The task graph's rows read and written outside a commit: graph rows and edges."""

from __future__ import annotations

from typing import Any

from tenure.domain.errors import Conflict
from tenure.domain.model import Task, TaskGraph
from tenure.store import codec, conditions, expressions, items

# `keys` is this module's name for a batch of row keys, so the key builders are `k`.
from tenure.store import keys as k
from tenure.store.table import Table


class DynamoGraph:
    """The GraphRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def get_graph(self, task_id: str) -> TaskGraph:
        row = self.table.get(k.task_graph_key(task_id))
        return items.graph_from(task_id, row or {})

    def get_graphs(self, task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        ids = list(dict.fromkeys(task_ids))
        rows = self.table.batch_get([k.task_graph_key(t) for t in ids], consistent)
        found = {k.task_id_of(r): r for r in rows}
        return {t: items.graph_from(t, found.get(t, {})) for t in ids}

    def graph_edges(
        self, task_id: str, kind: str, limit: int, after: str | None = None
    ) -> list[str]:
        prefix = k.EDGE_PREFIX[kind]
        start = (
            {}
            if after is None
            else {"ExclusiveStartKey": codec.dump(k.task_edge_key(task_id, kind, after))}
        )
        out = self.table.query(
            KeyConditionExpression=expressions.WITH_PREFIX,
            ExpressionAttributeValues=codec.values(pk=k.task_pk(task_id), prefix=prefix),
            Limit=limit,
            **start,
        )
        return [str(codec.load(r)[k.SK]).removeprefix(prefix) for r in out.get("Items", [])]

    def edges_counted(self, task_id: str, kind: str, others: list[str]) -> dict[str, bool]:
        if not others:
            return {}
        keys = [k.task_edge_key(task_id, kind, o) for o in dict.fromkeys(others)]
        rows = self.table.batch_get(keys, True)
        prefix = k.EDGE_PREFIX[kind]
        return {
            str(row[k.SK]).removeprefix(prefix): row.get("counted_at") is not None for row in rows
        }

    def count_edge(self, task_id: str, kind: str, other: str, counter: str, at: int) -> bool:
        target = task_id if kind == "child" else other
        ops = [
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": codec.dump(k.task_edge_key(task_id, kind, other)),
                    "UpdateExpression": expressions.COUNT_EDGE,
                    "ConditionExpression": conditions.EDGE_NOT_COUNTED,
                    "ExpressionAttributeValues": codec.values(at=at),
                }
            },
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": codec.dump(k.task_graph_key(target)),
                    "UpdateExpression": expressions.ADD_ONE,
                    "ExpressionAttributeNames": {"#counter": counter},
                    "ExpressionAttributeValues": codec.values(one=1),
                }
            },
        ]
        try:
            self.table.transact(ops)
        except Conflict:
            return False
        return True

    def in_graph(self, task_id: str) -> bool:
        out = self.table.query(
            KeyConditionExpression=expressions.BETWEEN_FIRST_AND_LAST,
            ExpressionAttributeValues=codec.values(
                pk=k.task_pk(task_id), first=k.LINKED_FROM, last=k.LINKED_TO
            ),
            ConsistentRead=True,
            Limit=1,
        )
        return bool(out.get("Items"))

    def linked_task(self, task_id: str) -> tuple[Task | None, bool]:
        """The task's row and whether it is linked, in one consistent Query: its partition
        from the dependent edges up to the task row, newest first, two rows at most. The
        task row sorts last (DEPENDENT#… < GRAPH < TASK), so the first row is the task's and
        a second is its graph row or a dependent edge. Two reads' worth in one, billed as
        one while the rows stay under 4 KB together."""
        out = self.table.query(
            KeyConditionExpression=expressions.BETWEEN_FIRST_AND_LAST,
            ExpressionAttributeValues=codec.values(
                pk=k.task_pk(task_id), first=k.LINKED_FROM, last=k.TASK_SK
            ),
            ConsistentRead=True,
            ScanIndexForward=False,
            Limit=2,
        )
        rows = [codec.load(r) for r in out.get("Items", [])]
        task: Task | None = None
        linked = False
        for row in rows:
            if row[k.SK] != k.TASK_SK:
                linked = True
            elif row.get("entity") == "task":  # a voided id's row is no task
                task = items.task_from(row)
        return task, linked

    def settle_graph(self, task_id: str, name: str, at: int, lease_id: str | None = None) -> bool:
        if name == "rollup_at":
            expression = expressions.ROLL_UP
            condition, values = conditions.ROLLUP_DUE, codec.values(at=at, zero=0)
        elif lease_id is not None:
            expression = expressions.SUCCEED_NAMING
            condition, values = conditions.SUCCESS_DUE, codec.values(at=at, lease=lease_id)
        else:
            expression, condition, values = (
                expressions.SUCCEED,
                conditions.SUCCESS_DUE,
                codec.values(at=at),
            )
        if self._update_graph(task_id, expression, condition, values):
            return True
        if lease_id is not None and name != "rollup_at":
            # Not due (it succeeded before, or children are outstanding): the lease is
            # still the task's newest success, unless a later one is named already.
            self._update_graph(
                task_id,
                expressions.NAME_SUCCESS,
                conditions.NEWER_SUCCESS,
                codec.values(lease=lease_id),
            )
        return False

    def _update_graph(
        self, task_id: str, expression: str, condition: str, values: dict[str, Any]
    ) -> bool:
        return self.table.update_if(
            "not due",
            Key=codec.dump(k.task_graph_key(task_id)),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
