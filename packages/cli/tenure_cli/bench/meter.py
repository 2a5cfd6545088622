"""Counts every AWS request the process makes, and what DynamoDB says each consumed.

A botocore `after-call` hook on boto3's default session sees every call of every client made
after `AwsMeter.install()` (the store's tables, S3, SQS, SNS, Logs, EventBridge), errors
included, so a lost conditional write is counted even though the store raises it. Each call
is booked to the function running at the time (`AwsMeter.acting`): a Lambda function's name,
or a name for what AWS itself does (SES delivering mail, Lambda's pollers).

The hooks run inside the function they meter, and pricing a write reads its item before and
after it: two more round trips to the engine that no function makes on AWS. The meter keeps
its own wall and CPU time per thread (`own_time`), so an invocation's billed time leaves it out.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

from .billing import Bill, Index, failed_write, item_write

# DynamoDB's data-plane calls: billed in capacity units. Every other DynamoDB call (describe,
# create, the streams API that Lambda's trigger reads for free) is not billed per request.
DYNAMODB_DATA = {
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactWriteItems",
    "TransactGetItems",
}
LOST = {"ConditionalCheckFailedException", "TransactionCanceledException"}
# The pseudo-operation counting PutEvents entries (each one a billed event).
EVENT_ENTRY = "PutEventsEntry"
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
SINGLE_ITEM_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


@dataclass
class Usage:
    """What one actor (a function, or AWS on its behalf) made AWS do."""

    read_units: float = 0.0
    write_units: float = 0.0
    lost_writes: int = 0  # failed conditions and cancelled transactions
    lost_write_units: float = 0.0  # what those cost at least (not reported by DynamoDB)
    requests: Counter[str] = field(default_factory=Counter)  # "service:Operation" -> n
    # The same writes priced by AWS's rules (bench/billing.py), lost ones included, and how
    # the model compared with DynamoDB Local on the single-item writes Local reports faithfully.
    billed_write_units: float = 0.0
    billed_by_index: Counter[str] = field(default_factory=Counter)
    model_agreed: int = 0
    model_disagreed: int = 0

    def add(self, other: Usage) -> None:
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.lost_writes += other.lost_writes
        self.lost_write_units += other.lost_write_units
        self.requests.update(other.requests)
        self.billed_write_units += other.billed_write_units
        self.billed_by_index.update(other.billed_by_index)
        self.model_agreed += other.model_agreed
        self.model_disagreed += other.model_disagreed

    def less(self, other: Usage, times: float) -> Usage:
        """This usage without `times` x `other` (what that many passes cost anyway), never
        below nothing; the billing model's check counts are kept whole."""
        out = Usage()
        out.read_units = max(0.0, self.read_units - times * other.read_units)
        out.write_units = max(0.0, self.write_units - times * other.write_units)
        out.lost_writes = max(0, self.lost_writes - round(times * other.lost_writes))
        out.lost_write_units = max(0.0, self.lost_write_units - times * other.lost_write_units)
        out.billed_write_units = max(
            0.0, self.billed_write_units - times * other.billed_write_units
        )
        for key, n in self.requests.items():
            left = n - round(times * other.requests[key])
            if left > 0:
                out.requests[key] = left
        for key, units in self.billed_by_index.items():
            left_units = units - times * other.billed_by_index[key]
            if left_units > 1e-9:
                out.billed_by_index[key] = left_units  # type: ignore[assignment]  # units, not counts
        out.model_agreed, out.model_disagreed = self.model_agreed, self.model_disagreed
        return out

    def count(self, service: str, operations: set[str] | None = None) -> int:
        return sum(
            n
            for key, n in self.requests.items()
            if key.split(":")[0] == service
            and (operations is None or key.split(":")[1] in operations)
        )


class Pricer:
    """Prices DynamoDB writes by AWS's rules: reads each written item just before and just
    after the call (with a client of its own, so its reads are never metered) and hands the
    images to bench/billing.py. Writes to one item racing from several threads may see each
    other's images; the lifecycle and cost benches write one item at a time."""

    def __init__(self, endpoint: str | None, region: str) -> None:
        self.client = boto3.session.Session().client(
            "dynamodb", endpoint_url=endpoint, region_name=region
        )
        self.schemas: dict[str, tuple[tuple[str, ...], tuple[Index, ...]]] = {}
        self.pending = threading.local()

    def schema(self, table: str) -> tuple[tuple[str, ...], tuple[Index, ...]]:
        if table not in self.schemas:
            described = self.client.describe_table(TableName=table)["Table"]
            keys = tuple(k["AttributeName"] for k in described["KeySchema"])
            indexes = tuple(
                Index(
                    name=ix["IndexName"],
                    keys=tuple(k["AttributeName"] for k in ix["KeySchema"]),
                    projection=ix["Projection"]["ProjectionType"],
                    included=tuple(ix["Projection"].get("NonKeyAttributes", ())),
                )
                for ix in [
                    *described.get("GlobalSecondaryIndexes", []),
                    *described.get("LocalSecondaryIndexes", []),
                ]
            )
            self.schemas[table] = (keys, indexes)
        return self.schemas[table]

    def targets(self, op: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(table, key) of every item the call writes or checks."""
        if op in SINGLE_ITEM_WRITES:
            table = params["TableName"]
            keys, _ = self.schema(table)
            key = params.get("Key") or {k: params["Item"][k] for k in keys}
            return [(table, key)]
        found: list[tuple[str, dict[str, Any]]] = []
        if op == "TransactWriteItems":
            for entry in params.get("TransactItems", []):
                ((_, spec),) = entry.items()
                table = spec["TableName"]
                keys, _ = self.schema(table)
                found.append((table, spec.get("Key") or {k: spec["Item"][k] for k in keys}))
        elif op == "BatchWriteItem":
            for table, requests in params.get("RequestItems", {}).items():
                keys, _ = self.schema(table)
                for request in requests:
                    put = request.get("PutRequest")
                    key = (
                        {k: put["Item"][k] for k in keys}
                        if put
                        else request["DeleteRequest"]["Key"]
                    )
                    found.append((table, key))
        return found

    def image(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        out = self.client.get_item(TableName=table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = out.get("Item")
        return item

    def before(self, op: str, params: dict[str, Any]) -> None:
        targets = self.targets(op, params)
        self.pending.call = (op, targets, [self.image(t, k) for t, k in targets])

    def bill(self, op: str, failed: bool) -> Bill | None:
        pending = getattr(self.pending, "call", None)
        self.pending.call = None
        if pending is None or pending[0] != op:
            return None
        _, targets, befores = pending
        transactional = op == "TransactWriteItems"
        bill = Bill()
        for (table, key), before in zip(targets, befores, strict=True):
            keys, indexes = self.schema(table)
            if failed:
                bill.add(failed_write(before, transactional))
            else:
                bill.add(item_write(before, self.image(table, key), indexes, keys, transactional))
        return bill


class AwsMeter:
    def __init__(self) -> None:
        self.by_actor: dict[str, Usage] = {}
        self.actor = "unattributed"
        self.lock = threading.Lock()  # claimers call from many threads
        self.pricer: Pricer | None = None
        self.spent = threading.local()  # this thread's time in the hooks: .wall, .cpu (s)
        self.query = threading.local()  # .consistent: whether this thread's Query was

    def install(self) -> AwsMeter:
        """A fresh default session with the hooks; clients made from now on are metered."""
        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("after-call", self._after_call)
        boto3.DEFAULT_SESSION.events.register("before-parameter-build.dynamodb", self._before_call)
        return self

    def price_writes(self, endpoint: str | None, region: str) -> None:
        """From now on, price every DynamoDB write by AWS's rules as well."""
        self.pricer = Pricer(endpoint, region)

    def own_time(self) -> tuple[float, float]:
        """Wall and CPU seconds this thread has spent in the meter's hooks so far."""
        return getattr(self.spent, "wall", 0.0), getattr(self.spent, "cpu", 0.0)

    @contextlib.contextmanager
    def _own(self) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            spent_wall, spent_cpu = self.own_time()
            self.spent.wall = spent_wall + time.perf_counter() - wall
            self.spent.cpu = spent_cpu + time.thread_time() - cpu

    def _before_call(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            self.query.consistent = bool(params.get("ConsistentRead"))
        if self.pricer is not None and model.name in WRITES:
            with self._own():
                self.pricer.before(model.name, params)

    @contextlib.contextmanager
    def acting(self, actor: str) -> Iterator[None]:
        before, self.actor = self.actor, actor
        try:
            yield
        finally:
            self.actor = before

    def usage(self, actor: str) -> Usage:
        return self.by_actor.setdefault(actor, Usage())

    def total(self, actors: list[str] | None = None) -> Usage:
        out = Usage()
        for name, used in self.by_actor.items():
            if actors is None or name in actors:
                out.add(used)
        return out

    def snapshot(self) -> dict[str, Usage]:
        copied: dict[str, Usage] = {}
        for name, used in self.by_actor.items():
            one = Usage()
            one.add(used)
            copied[name] = one
        return copied

    def reset(self) -> None:
        self.by_actor.clear()

    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        with self._own(), self.lock:
            self._book(http_response, parsed, model)

    def _book(self, http_response: Any, parsed: dict[str, Any], model: Any) -> None:
        service = model.service_model.service_name
        op = model.name
        used = self.usage(self.actor)
        if service == "dynamodb" and op not in DYNAMODB_DATA:
            return
        used.requests[f"{service}:{op}"] += 1
        if service == "events" and op == "PutEvents":
            # EventBridge bills each entry, and the reactor sends up to ten a call.
            used.requests[f"{service}:{EVENT_ENTRY}"] += len(parsed.get("Entries") or [])
        if service != "dynamodb":
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        for entry in entries:
            reads = entry.get("ReadCapacityUnits")
            writes = entry.get("WriteCapacityUnits")
            if reads is None and writes is None:
                units = float(entry.get("CapacityUnits", 0) or 0)
                if op in ("GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"):
                    used.read_units += units
                else:
                    used.write_units += units
            else:
                used.read_units += float(reads or 0)
                used.write_units += float(writes or 0)
        if op == "Query" and http_response.status_code < 300:
            reported = sum(float(e.get("CapacityUnits", 0) or 0) for e in entries)
            if reported == 0:
                # A Query that finds nothing still bills the least read of its kind: half a
                # unit, a whole one when consistent. DynamoDB Local reports none for it.
                used.read_units += 1.0 if getattr(self.query, "consistent", False) else 0.5
        code = (parsed.get("Error") or {}).get("Code", "")
        lost = http_response.status_code >= 300 and code in LOST
        if self.pricer is not None and op in WRITES:
            bill = self.pricer.bill(op, failed=lost)
            if bill is not None and (lost or http_response.status_code < 300):
                used.billed_write_units += bill.total
                used.billed_by_index.update({"table": bill.table, **bill.indexes})
                if op in SINGLE_ITEM_WRITES and not lost and entries:
                    reported = sum(float(e.get("CapacityUnits", 0) or 0) for e in entries)
                    if abs(reported - bill.total) < 1e-9:
                        used.model_agreed += 1
                    else:
                        used.model_disagreed += 1
        if lost:
            used.lost_writes += 1
            # DynamoDB bills a failed conditional write at least 1 unit, and reports none of
            # it; a cancelled transaction at least 2 per item it carried (a transactional
            # write of up to 1 KB).
            reasons = parsed.get("CancellationReasons")
            used.lost_write_units += 2.0 * len(reasons) if reasons else 1.0
