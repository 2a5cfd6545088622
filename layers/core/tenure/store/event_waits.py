"""The rows of event waits: one row per block waiting for a (space, name, key), in that
signal's own partition, and the last event of each signal, kept with a TTL."""

from __future__ import annotations

import json
from typing import Any

from tenure.domain.errors import Conflict
from tenure.domain.model import KeptEvent
from tenure.store import codec, expressions, keys
from tenure.store.table import Table


class EventWaitRows:
    def __init__(self, rows: Table) -> None:
        self.rows = rows

    def put_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        item = {**keys.event_wait_key(space, name, key, task_id, block_id), "entity": "event_wait"}
        self.rows.write(
            "put",
            Conflict("the wait could not be written"),
            TableName=self.rows.name,
            Item=codec.dump(item),
        )

    def event_waits(self, space: str, name: str, key: str, limit: int) -> list[tuple[str, str]]:
        """The first `limit` (task id, block id) waiting, read consistently: a wait written
        before this read began is in it."""
        out = self.rows.query(
            KeyConditionExpression=expressions.IN_PARTITION,
            ExpressionAttributeValues=codec.values(pk=keys.event_wait_pk(space, name, key)),
            ConsistentRead=True,
            Limit=limit,
        )
        waits: list[tuple[str, str]] = []
        for row in out.get("Items", []):
            task_id, _, block_id = str(codec.load(row)[keys.SK]).partition("#")
            waits.append((task_id, block_id))
        return waits

    def drop_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        self.rows.write(
            "delete",
            Conflict("the wait could not be deleted"),
            TableName=self.rows.name,
            Key=codec.dump(keys.event_wait_key(space, name, key, task_id, block_id)),
        )

    def put_kept_event(self, event: KeptEvent) -> None:
        item: dict[str, Any] = {
            **keys.kept_event_key(event.space, event.name, event.key),
            "entity": "kept_event",
            "space": event.space,
            "name": event.name,
            "key": event.key,
            "at": event.at,
            # The table's TTL attribute is in epoch seconds.
            keys.TTL_ATTRIBUTE: event.expires_at // 1000,
            "expires_ms": event.expires_at,
            "data": json.dumps(event.data, separators=(",", ":")),
        }
        if event.by:
            item["by"] = event.by
        self.rows.write(
            "put",
            Conflict("the event could not be kept"),
            TableName=self.rows.name,
            Item=codec.dump(item),
        )

    def kept_event(self, space: str, name: str, key: str) -> KeptEvent | None:
        row = self.rows.get(keys.kept_event_key(space, name, key))
        if row is None:
            return None
        return KeptEvent(
            space=str(row["space"]),
            name=str(row["name"]),
            key=str(row["key"]),
            at=int(row["at"]),
            expires_at=int(row["expires_ms"]),
            data=json.loads(str(row["data"])),
            by=str(row["by"]) if row.get("by") else None,
        )
