"""Pool rows, their superseded versions and queue marks, and the instance settings."""

from __future__ import annotations

import contextlib
from typing import Any

from tenure.app.ports import POOL_CAP, Settings
from tenure.domain.errors import Conflict, NotFound
from tenure.domain.model import Instance, Pool, PoolVersion
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.dynamo.settings import settings_update, update_row
from tenure.store.table import Table


class DynamoPools:
    """The PoolRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def put_pool(self, pool: Pool) -> None:
        self.table.put_new(
            {**keys.pool_key(pool.name), **items.pool_item(pool)}, f"pool {pool.name}"
        )

    def get_pool(self, name: str) -> Pool | None:
        # Consistent: a pool is used right after it is created (1 read unit, and the service
        # caches pools, so this is paid once per pool per process).
        row = self.table.get(keys.pool_key(name))
        return items.pool_from(row) if row else None

    def list_pools(self, consistent: bool = False) -> list[Pool]:
        rows = self.table.partition(keys.POOLS_PK, POOL_CAP, consistent=consistent)
        return [items.pool_from(r) for r in rows]

    def update_pool(
        self,
        name: str,
        settings: Settings,
        expect_version: int | None = None,
        superseded: PoolVersion | None = None,
    ) -> Pool:
        missing = NotFound(f"pool {name!r} does not exist")
        if expect_version is None:
            return items.pool_from(update_row(self.table, keys.pool_key(name), settings, missing))
        if superseded is None:
            raise ValueError("a version change keeps the version it supersedes")
        expression, names, values = settings_update(settings)
        row = {
            **keys.pool_version_key(name, superseded.version),
            **items.pool_version_item(superseded),
        }
        ops = [
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": codec.dump(keys.pool_key(name)),
                    "UpdateExpression": expression,
                    "ConditionExpression": conditions.POOL_VERSION_IS,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": codec.values(
                        **values, expect_version=expect_version
                    ),
                }
            },
            self.table.put_op(row, conditions.IS_NEW),
        ]
        self.table.transact(ops)
        pool = self.get_pool(name)
        if pool is None:
            raise missing
        return pool

    def get_pool_version(self, pool: str, version: int) -> PoolVersion | None:
        # Eventually consistent: a superseded version never changes once written.
        row = self.table.get(keys.pool_version_key(pool, version), consistent=False)
        return items.pool_version_from(row) if row else None

    def mark_queue(self, pool: str, mark: str, now: int) -> None:
        # A map attribute's entry can only be set once the map exists: set the entry, or
        # (the first mark) the whole map, each conditioned so neither overwrites the other.
        key = codec.dump(keys.pool_key(pool))
        for _ in range(3):
            with contextlib.suppress(Conflict):
                self.table.write(
                    "update",
                    Conflict("no marks yet"),
                    TableName=self.table.name,
                    Key=key,
                    UpdateExpression=expressions.SET_QUEUE_MARK,
                    ConditionExpression=conditions.QUEUE_MARKS_EXIST,
                    ExpressionAttributeNames={"#p": mark},
                    ExpressionAttributeValues=codec.values(now=now),
                )
                return
            with contextlib.suppress(Conflict):
                self.table.write(
                    "update",
                    Conflict("marked meanwhile"),
                    TableName=self.table.name,
                    Key=key,
                    UpdateExpression=expressions.FIRST_QUEUE_MARKS,
                    ConditionExpression=conditions.FIRST_QUEUE_MARK,
                    ExpressionAttributeValues=codec.values(marks={mark: now}),
                )
                return
        raise Conflict(f"pool {pool!r} could not be marked {mark!r}")

    def unmark_queue(self, pool: str, mark: str, marked_before: int) -> bool:
        return self.table.update_if(
            "marked since",
            Key=codec.dump(keys.pool_key(pool)),
            UpdateExpression=expressions.DROP_QUEUE_MARK,
            ConditionExpression=conditions.QUEUE_MARK_OLDER,
            ExpressionAttributeNames={"#p": mark},
            ExpressionAttributeValues=codec.values(before=marked_before),
        )

    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        return write_gates(self.table, pool, gates)

    def get_instance(self) -> Instance:
        row = self.table.get(keys.INSTANCE_KEY)
        return items.instance_from(row) if row else Instance()

    def update_instance(self, settings: Settings) -> Instance:
        # The row is made by its first update (no condition): it always exists in effect.
        expression, names, values = settings_update(settings)
        out = self.table.write(
            "update",
            Conflict("the instance settings could not be written"),
            TableName=self.table.name,
            Key=codec.dump(keys.INSTANCE_KEY),
            UpdateExpression=expression,
            **({"ExpressionAttributeNames": names} if names else {}),
            **({"ExpressionAttributeValues": codec.values(**values)} if values else {}),
            ReturnValues="ALL_NEW",
        )
        return items.instance_from(codec.load(dict(out.get("Attributes", {}))))


def gate_write_ops(table_name: str, pool: Pool, gates: dict[str, bool]) -> list[dict[str, Any]]:
    """The transaction that writes `gates` on the pool's row (only if it exists), with a check
    on each row they copy that it still says so (conditions.SPACE_ARCHIVED, HAS_CEILING)."""
    expression, names, values = settings_update(Settings(set=dict(gates)))
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": codec.dump(keys.pool_key(pool.name)),
        "UpdateExpression": expression,
        "ConditionExpression": conditions.EXISTS,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": codec.values(**values),
    }
    ops: list[dict[str, Any]] = [{"Update": update}]
    space: list[str] = []
    if "space_archived" in gates:
        space.append(
            conditions.SPACE_ARCHIVED if gates["space_archived"] else conditions.SPACE_NOT_ARCHIVED
        )
    if "space_ceiling" in gates:
        space.append(
            conditions.HAS_CEILING if gates["space_ceiling"] else conditions.HAS_NO_CEILING
        )
    if space:
        check: dict[str, Any] = {
            "TableName": table_name,
            "Key": codec.dump(keys.space_key(pool.space)),
            "ConditionExpression": " AND ".join(f"({c})" for c in space),
        }
        wanted = {
            name: value
            for name, value in (("yes", True), ("no", False))
            if f":{name}" in check["ConditionExpression"]
        }
        if wanted:
            check["ExpressionAttributeValues"] = codec.values(**wanted)
        ops.append({"ConditionCheck": check})
    if "instance_ceiling" in gates:
        ceiling = gates["instance_ceiling"]
        ops.append(
            {
                "ConditionCheck": {
                    "TableName": table_name,
                    "Key": codec.dump(keys.INSTANCE_KEY),
                    "ConditionExpression": (
                        conditions.HAS_CEILING if ceiling else conditions.HAS_NO_CEILING
                    ),
                }
            }
        )
    return ops


def write_gates(table: Table, pool: Pool, gates: dict[str, bool]) -> bool:
    """Write `gates_write_ops`' transaction: False when the pool is gone or a row it copies
    moved meanwhile (the write that moved it copies its own value)."""
    try:
        table.transact(gate_write_ops(table.name, pool, gates))
    except Conflict:
        return False
    return True
