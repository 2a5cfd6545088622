"""Idempotency records of requests sent with a key."""

from __future__ import annotations

import dataclasses

from tenure.app.ports import Filed
from tenure.domain.errors import Conflict
from tenure.store import codec, conditions, expressions, keys
from tenure.store.table import Table


class DynamoRequests:
    """The RequestRecords port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def take_request(self, record: Filed, now_ms: int) -> Filed | None:
        key = keys.request_key(record.key)
        row = {**key, "entity": "request", **dataclasses.asdict(record)}
        put = self.table.put_op(
            {k2: v for k2, v in row.items() if v is not None},
            conditions.TAKE_REQUEST,
            values=codec.values(now_s=now_ms // 1000, now_ms=now_ms),
        )
        try:
            self.table.put_one(put["Put"])
            return None
        except Conflict:
            held = self.table.get(key)
        if held is None:  # dropped between the write and the read: the caller tries again
            raise Conflict("the idempotency record moved")
        return Filed(
            key=record.key,
            body_hash=str(held["body_hash"]),
            expires_at=int(held[keys.TTL_ATTRIBUTE]),
            locked_until=int(held["locked_until"]),
            status=int(held["status"]) if "status" in held else None,
            answer=str(held["answer"]) if "answer" in held else None,
        )

    def finish_request(self, key: str, status: int, answer: str) -> None:
        self.table.write(
            "update",
            Conflict("the request's record is gone"),
            TableName=self.table.name,
            Key=codec.dump(keys.request_key(key)),
            UpdateExpression=expressions.FINISH_REQUEST,
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=codec.values(status=status, answer=answer),
        )

    def drop_request(self, key: str) -> None:
        self.table.write(
            "delete",
            Conflict("unreachable: the delete is unconditional"),
            TableName=self.table.name,
            Key=codec.dump(keys.request_key(key)),
        )
