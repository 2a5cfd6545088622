"""The table's metered, retried primitives: one get, write, query or batch read each, every
call retried within the store's one bound (store.calls) and counted on the meter the benches
read. The store's aggregates (store.dynamo, one class per port) stand on these."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from tenure.domain.errors import AlreadyExists, Conflict, TenureError
from tenure.store import codec, conditions, expressions

# `keys` is this module's name for a batch of row keys, so the key builders are `k`.
from tenure.store import keys as k
from tenure.store.calls import Retry, translate
from tenure.store.codec import Meter

_READS = {"get", "query", "batch_get", "scan"}  # safe to send again whatever became of the first


def _lost(err: ClientError, failed: TenureError) -> Exception:
    """The domain error a failed write is (store.calls has the one table of codes). Each write
    names what a lost condition means for it: AlreadyExists for a create, NotFound for a
    counter on a missing row, Conflict for a fenced lease write."""
    out = translate(err, failed)
    if out is failed and err.response.get("CancellationReasons"):
        failed.details["old"] = [
            codec.load(dict(r["Item"])) if r.get("Item") else None
            for r in err.response["CancellationReasons"]
        ]
    return out


class Table:
    """One DynamoDB table as the store reads and writes it."""

    def __init__(self, client: Any, name: str, retry: Retry | None = None) -> None:
        self.client = client
        self.name = name
        self.meter = Meter()
        self.retry = retry or Retry()

    def call(self, op: str, fn: Any, **request: Any) -> dict[str, Any]:
        """One metered read, re-sent on a throttle; a malformed request is StoreRejected."""
        try:
            out = self.retry.call(
                op, fn, {**request, "ReturnConsumedCapacity": "INDEXES"}, read=op in _READS
            )
        except ClientError as err:
            raise translate(err, None) from err
        noted = self.meter.writes is not None and op not in _READS
        self.meter.add(op, out.get("ConsumedCapacity"), _rows_written(request) if noted else None)
        return out

    # ------------------------------------------------------------------ primitives

    def get(self, key: dict[str, str], consistent: bool = True) -> dict[str, Any] | None:
        out = self.call(
            "get",
            self.client.get_item,
            TableName=self.name,
            Key=codec.dump(key),
            ConsistentRead=consistent,
        )
        if "Item" not in out:
            return None
        self.meter.items_read += 1
        return codec.load(out["Item"])

    def write(self, op: str, failed: TenureError, **request: Any) -> dict[str, Any]:
        """One write call: metered, and a failed condition raised as `failed`."""
        call = {
            "put": self.client.put_item,
            "update": self.client.update_item,
            "transact": self.client.transact_write_items,
            "delete": self.client.delete_item,
        }[op]
        try:
            out = self.retry.call(op, call, {**request, "ReturnConsumedCapacity": "INDEXES"})
        except ClientError as err:
            raise _lost(err, failed) from err
        rows = _rows_written(request) if self.meter.writes is not None else None
        self.meter.add(op, out.get("ConsumedCapacity"), rows)
        return out

    def put_new(self, item: dict[str, Any], what: str) -> None:
        self.write(
            "put",
            AlreadyExists(f"{what} already exists"),
            TableName=self.name,
            Item=codec.dump(item),
            ConditionExpression=conditions.IS_NEW,
        )

    def transact(self, ops: list[dict[str, Any]]) -> None:
        self.write("transact", Conflict("a conditional write lost"), TransactItems=ops)

    def put_op(
        self,
        item: dict[str, Any],
        condition: str,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A conditional put, alone (`put_one`) or as one item of a transaction; a lost
        condition hands back the row as it was."""
        put: dict[str, Any] = {
            "TableName": self.name,
            "Item": codec.dump(item),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if names:
            put["ExpressionAttributeNames"] = names
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def put_one(self, put: dict[str, Any]) -> None:
        """One put of `put_op`'s body on its own: Conflict when its condition loses."""
        self.write("put", Conflict("a conditional write lost"), **put)

    def query(self, **kwargs: Any) -> dict[str, Any]:
        out = self.call("query", self.client.query, TableName=self.name, **kwargs)
        # Items the query read (a filter drops some after reading them: still paid for).
        self.meter.items_read += int(out.get("ScannedCount", len(out.get("Items", []))))
        return out

    def query_all(self, cap: int | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        """Every row a query matches, page after page; no more than `cap` rows when set."""
        rows: list[dict[str, Any]] = []
        while True:
            if cap is not None:
                kwargs["Limit"] = cap - len(rows)
            out = self.query(**kwargs)
            rows.extend(codec.load(r) for r in out.get("Items", []))
            if not out.get("LastEvaluatedKey") or (cap is not None and len(rows) >= cap):
                return rows
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def partition(self, pk: str, cap: int, consistent: bool = False) -> list[dict[str, Any]]:
        return self.query_all(
            cap,
            KeyConditionExpression=expressions.IN_PARTITION,
            ExpressionAttributeValues=codec.values(pk=pk),
            **({"ConsistentRead": True} if consistent else {}),
        )

    def batch_get(
        self, item_keys: list[dict[str, str]], consistent: bool = True
    ) -> list[dict[str, Any]]:
        """The rows of these keys. Keys DynamoDB leaves unprocessed (throttled) are asked for
        again with the same bounded backoff as a throttled call; still unprocessed after
        `retry.tries` rounds, the read gives up as Unavailable rather than answer partly.
        (A round whose call is throttled outright is itself re-sent within its own bound:
        at most tries x tries calls per 100 keys, in practice the first or second.)"""
        found: list[dict[str, Any]] = []
        pending = [codec.dump(key) for key in item_keys]
        while pending:
            chunk, pending = pending[:100], pending[100:]
            request: dict[str, Any] = {self.name: {"Keys": chunk, "ConsistentRead": consistent}}
            for attempt in range(1, self.retry.tries + 1):
                out = self.call("batch_get", self.client.batch_get_item, RequestItems=request)
                rows = out.get("Responses", {}).get(self.name, [])
                self.meter.items_read += len(rows)
                found.extend(codec.load(r) for r in rows)
                request = out.get("UnprocessedKeys") or {}
                if not request:
                    break
                self.retry.throttled("batch_get (unprocessed keys)", attempt)
        return found

    def in_order(
        self, item_keys: list[dict[str, str]], consistent: bool = True
    ) -> list[dict[str, Any]]:
        """The rows of these keys that exist, in the keys' order (what an index Query found,
        read whole): one batched read, none for no keys."""
        if not item_keys:
            return []
        found = {(r[k.PK], r[k.SK]): r for r in self.batch_get(item_keys, consistent)}
        wanted = ((key[k.PK], key[k.SK]) for key in item_keys)
        return [found[key] for key in wanted if key in found]

    def update_if(self, lost: str, **request: Any) -> bool:
        """One conditional update of this table: False, and nothing written, when its
        condition lost (`lost` says what that means, for the logs of a retried call)."""
        try:
            self.write("update", Conflict(lost), TableName=self.name, **request)
        except Conflict:
            return False
        return True


def _rows_written(request: dict[str, Any]) -> list[str]:
    """The kinds of row a write touched (the first part of each key), for the bench's lines."""
    keys = [
        body.get("Item") or body.get("Key") or {}
        for entry in request.get("TransactItems", [])
        for body in entry.values()
    ] or [request.get("Item") or request.get("Key") or {}]
    return [str(codec.load(key).get(k.PK, "?")).split("#")[0] for key in keys]
