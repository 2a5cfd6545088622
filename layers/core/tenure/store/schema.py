"""The DynamoDB side of `tenure admin migrate`: the schema meta row, and the reads and writes
the migrations make. The Scan here runs only from that operator command, never on a request
path."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tenure.app.schema_versions import SchemaState
from tenure.domain.errors import AlreadyExists, Conflict
from tenure.domain.model import Instance, Lease, Pool, Space, Task, Token
from tenure.store import codec, conditions, expressions, items

# `keys` is this module's name for a batch of row keys, so the key builders are `k`.
from tenure.store import keys as k
from tenure.store.dynamo.pools import write_gates
from tenure.store.table import Table


class SchemaRows:
    """The migration's rows, on the table's metered, retried primitives."""

    def __init__(self, rows: Table) -> None:
        self.rows = rows

    def schema_state(self) -> SchemaState:
        row = self.rows.get(k.SCHEMA_KEY)
        if row is None:
            return SchemaState()
        return SchemaState(
            version=int(row.get("version", 0)),
            migration=row.get("migration"),
            cursor=row.get("cursor"),
            step=int(row.get("step", 0)),
        )

    def save_schema(self, expect: SchemaState, new: SchemaState) -> bool:
        row: dict[str, Any] = {**k.SCHEMA_KEY, "entity": "schema", "version": new.version}
        row["step"] = expect.step + 1
        if new.migration is not None:
            row["migration"] = new.migration
        if new.cursor is not None:
            row["cursor"] = new.cursor
        request: dict[str, Any] = {"TableName": self.rows.name, "Item": codec.dump(row)}
        if expect.step == 0:
            request["ConditionExpression"] = conditions.IS_NEW
        else:
            request["ConditionExpression"] = conditions.SCHEMA_STEP_IS
            request["ExpressionAttributeValues"] = codec.values(step=expect.step)
        try:
            self.rows.write("put", Conflict("the schema row moved"), **request)
        except Conflict:
            return False
        return True

    def scan_tokens(self, cursor: str | None, limit: int) -> tuple[list[Token], str | None]:
        request: dict[str, Any] = {
            "TableName": self.rows.name,
            "Limit": limit,
            "FilterExpression": "#entity = :token AND #sk = :sk",
            "ExpressionAttributeNames": {"#entity": "entity", "#sk": k.SK},
            "ExpressionAttributeValues": codec.values(token="token", sk="TOKEN"),
            # Consistent: a token made just before the migrate is seen by it.
            "ConsistentRead": True,
        }
        if cursor:
            request["ExclusiveStartKey"] = codec.dump(json.loads(cursor))
        out = self.rows.call("scan", self.rows.client.scan, **request)
        tokens = [items.token_from(codec.load(r)) for r in out.get("Items", [])]
        last = out.get("LastEvaluatedKey")
        return tokens, json.dumps(codec.load(last), sort_keys=True) if last else None

    def listed_token_ids(self, token_ids: list[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(token_ids), 100):  # BatchGetItem takes 100 keys a call
            keys = [k.token_id_key(i) for i in token_ids[start : start + 100]]
            found.update(k.listed_token_id(r) for r in self.rows.batch_get(keys))
        return found

    def list_token(self, token: Token) -> bool:
        row = {**k.token_id_key(token.id), **items.token_item(replace(token, revoked_at=None))}
        try:
            self.rows.write(
                "put",
                Conflict("the token is listed already"),
                TableName=self.rows.name,
                Item=codec.dump(row),
                ConditionExpression=conditions.IS_NEW,
            )
        except Conflict:
            return False
        return True

    def scan_spaces(self, cursor: str | None, limit: int) -> tuple[list[Space], str | None]:
        request: dict[str, Any] = {
            "TableName": self.rows.name,
            "Limit": limit,
            "FilterExpression": "#entity = :space AND #sk = :sk",
            "ExpressionAttributeNames": {"#entity": "entity", "#sk": k.SK},
            "ExpressionAttributeValues": codec.values(space="space", sk="SPACE"),
            # Consistent: a space made just before the migrate is seen by it.
            "ConsistentRead": True,
        }
        if cursor:
            request["ExclusiveStartKey"] = codec.dump(json.loads(cursor))
        out = self.rows.call("scan", self.rows.client.scan, **request)
        spaces = [items.space_from(codec.load(r)) for r in out.get("Items", [])]
        last = out.get("LastEvaluatedKey")
        return spaces, json.dumps(codec.load(last), sort_keys=True) if last else None

    def listed_space_keys(self, keys: list[str]) -> set[str]:
        found = self.rows.batch_get([k.listed_space_key(key) for key in keys])
        return {k.listed_space_of(r) for r in found}

    def list_space(self, space: Space) -> bool:
        try:
            self.rows.put_new(
                {**k.listed_space_key(space.key), "entity": "space_listed"}, "the list row"
            )
        except AlreadyExists:
            return False
        return True

    def scan_tasks(self, cursor: str | None, limit: int) -> tuple[list[Task], str | None]:
        request: dict[str, Any] = {
            "TableName": self.rows.name,
            "Limit": limit,
            "FilterExpression": "#entity = :task AND #sk = :sk",
            "ExpressionAttributeNames": {"#entity": "entity", "#sk": k.SK},
            "ExpressionAttributeValues": codec.values(task="task", sk="TASK"),
            "ConsistentRead": True,
        }
        if cursor:
            request["ExclusiveStartKey"] = codec.dump(json.loads(cursor))
        out = self.rows.call("scan", self.rows.client.scan, **request)
        tasks = [items.task_from(codec.load(r)) for r in out.get("Items", [])]
        last = out.get("LastEvaluatedKey")
        return tasks, json.dumps(codec.load(last), sort_keys=True) if last else None

    def keyed_tasks(self, keys: list[str]) -> set[str]:
        found = self.rows.batch_get([k.task_key_row(key) for key in keys])
        return {k.task_key_of(r) for r in found}

    def key_task(self, task: Task) -> bool:
        row = {**k.task_key_row(task.key), "entity": "task_key", "task_id": task.id}
        try:
            self.rows.put_new(row, "the key row")
        except AlreadyExists:
            return False
        return True

    def children_marked(self, task_ids: list[str]) -> set[str]:
        found = self.rows.batch_get([k.task_key(t) for t in task_ids])
        return {k.task_id_of(r) for r in found if r.get("has_children")}

    def mark_children(self, task_id: str) -> bool:
        try:
            self.rows.write(
                "update",
                Conflict("marked already, or gone"),
                TableName=self.rows.name,
                Key=codec.dump(k.task_key(task_id)),
                UpdateExpression=expressions.SET_HAS_CHILDREN,
                ConditionExpression=conditions.CHILDREN_UNMARKED,
                ExpressionAttributeValues=codec.values(yes=True),
            )
        except Conflict:
            return False
        return True

    def scan_held_leases(self, cursor: str | None, limit: int) -> tuple[list[Lease], str | None]:
        # The due index holds every held lease (its pool's due partition) and the pending
        # ones with a queue timeout (another partition, filtered out); it keeps keys only, so
        # the rows are read after, consistently.
        request: dict[str, Any] = {
            "TableName": self.rows.name,
            "IndexName": k.DUE_INDEX,
            "Limit": limit,
            "FilterExpression": "begins_with(#due, :held)",
            "ExpressionAttributeNames": {"#due": k.DUE_PK},
            "ExpressionAttributeValues": codec.values(held=k.due_pk("")),
        }
        if cursor:
            request["ExclusiveStartKey"] = codec.dump(json.loads(cursor))
        out = self.rows.call("scan", self.rows.client.scan, **request)
        ids = [k.lease_id_of(codec.load(r)) for r in out.get("Items", [])]
        rows = self.rows.batch_get([k.lease_key(i) for i in ids]) if ids else []
        leases = sorted((items.lease_from(r) for r in rows), key=lambda lease: lease.id)
        last = out.get("LastEvaluatedKey")
        return leases, json.dumps(codec.load(last), sort_keys=True) if last else None

    def scan_pools(self, cursor: str | None, limit: int) -> tuple[list[Pool], str | None]:
        request: dict[str, Any] = {
            "Limit": limit,
            "KeyConditionExpression": expressions.IN_PARTITION,
            "ExpressionAttributeValues": codec.values(pk=k.POOLS_PK),
            "ConsistentRead": True,
        }
        if cursor:
            request["ExclusiveStartKey"] = codec.dump(json.loads(cursor))
        out = self.rows.query(**request)
        pools = [items.pool_from(codec.load(r)) for r in out.get("Items", [])]
        last = out.get("LastEvaluatedKey")
        return pools, json.dumps(codec.load(last), sort_keys=True) if last else None

    def gate_sources(self, space_keys: list[str]) -> tuple[dict[str, Space], Instance]:
        found = self.rows.batch_get([k.space_key(key) for key in space_keys])
        spaces = {space.key: space for space in (items.space_from(r) for r in found)}
        row = self.rows.get(k.INSTANCE_KEY)
        return spaces, items.instance_from(row) if row else Instance()

    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        return write_gates(self.rows, pool, gates)
