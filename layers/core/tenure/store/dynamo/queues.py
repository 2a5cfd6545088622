"""The pending and held leases' indexes, and the ceilings' counters."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import DueEntry
from tenure.store import codec, conditions, expressions, keys
from tenure.store.dynamo.ceilings import ceiling_key
from tenure.store.table import Table


class DynamoQueues:
    """The QueueRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        condition = expressions.queue_condition(due_by=due_by is not None)
        values = {"q": keys.queue_pk(pool, priority)}
        if due_by is not None:
            values["due"] = keys.queue_due_bound(due_by)
        out = self.table.query(
            IndexName=keys.QUEUE_INDEX,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=codec.values(**values),
            Limit=limit,
        )
        return [keys.lease_id_of(codec.load(row)) for row in out.get("Items", [])]

    def queue_expiring(self, pool: str, now: int, limit: int) -> list[str]:
        # The pool's pending leases with a queue timeout sit in the due index under a key of
        # their own, at their expiry: the same read as the sweeper's deadlines.
        return self._due(keys.queue_expiry_pk(pool), now, limit)

    def count_queue(
        self, pool: str, created_before: int | None, at_most: int, priority: int | None = None
    ) -> int:
        out = self.table.query(
            **_queue_request(pool, created_before, priority), Select="COUNT", Limit=at_most
        )
        return int(out.get("Count", 0))

    def queue_page(
        self, pool: str, created_before: int | None, limit: int, priority: int | None = None
    ) -> list[str]:
        out = self.table.query(**_queue_request(pool, created_before, priority), Limit=limit)
        return [keys.lease_id_of(codec.load(row)) for row in out.get("Items", [])]

    def due_leases(self, pool: str, now: int | None, limit: int | None = None) -> list[str]:
        return self._due(keys.due_pk(pool), now, limit)

    def due_page(self, pool: str, after: DueEntry | None, limit: int) -> list[DueEntry]:
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        request: dict[str, Any] = {
            "IndexName": keys.DUE_INDEX,
            "KeyConditionExpression": expressions.DUE_IN,
            "ExpressionAttributeValues": codec.values(p=keys.due_pk(pool)),
            "Limit": limit,
        }
        if after is not None:  # the index's place of that entry, whether it is still there
            start = {keys.DUE_PK: keys.due_pk(pool), keys.DUE_AT: after.due_at}
            request["ExclusiveStartKey"] = codec.dump({**start, **keys.lease_key(after.lease_id)})
        rows = [codec.load(r) for r in self.table.query(**request).get("Items", [])]
        return [DueEntry(int(r[keys.DUE_AT]), keys.lease_id_of(r)) for r in rows]

    def count_held(self, pool: str, at_most: int) -> int:
        """Count a pool's held leases, reading no more than `at_most` index entries."""
        out = self.table.query(
            IndexName=keys.DUE_INDEX,
            KeyConditionExpression=expressions.DUE_IN,
            ExpressionAttributeValues=codec.values(p=keys.due_pk(pool)),
            Select="COUNT",
            Limit=at_most,
        )
        return int(out.get("Count", 0))  # (the meter counted ScannedCount)

    def held_count(self, scope: str, name: str) -> int:
        row = self.table.get(ceiling_key(scope, name), consistent=False)
        return int((row or {}).get(conditions.ACTIVE, 0))

    def _due(self, pk: str, now: int | None, limit: int | None) -> list[str]:
        """The lease ids under `pk` in the due index, due by `now` (all of them when None):
        one page of `limit`, or every page when no limit is given."""
        condition = expressions.DUE_BY if now is not None else expressions.DUE_IN
        values = codec.values(p=pk, **({"now": now} if now is not None else {}))
        request: dict[str, Any] = {
            "IndexName": keys.DUE_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if limit is None:
            rows = self.table.query_all(**request)
        else:
            if limit < 1:
                raise ValueError("a page needs a limit of at least 1")
            rows = [
                codec.load(r) for r in self.table.query(**request, Limit=limit).get("Items", [])
            ]
        return [keys.lease_id_of(r) for r in rows]


def _queue_request(pool: str, created_before: int | None, priority: int | None) -> dict[str, Any]:
    condition = expressions.queue_condition(created_before=created_before is not None)
    values: dict[str, Any] = {"q": keys.queue_pk(pool, priority)}
    if created_before is not None:
        values["before"] = f"{created_before:013d}"
    return {
        "IndexName": keys.QUEUE_INDEX,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": codec.values(**values),
    }
