"""Counts every AWS request the process makes, and what DynamoDB says each consumed.

A botocore `after-call` hook on boto3's default session sees every call of every client made
after `AwsMeter.install()` (the store's tables, S3, SQS, SNS, Logs, EventBridge), errors
included, so a lost conditional write is counted even though the store raises it. Each call
is booked to the function running at the time (`AwsMeter.acting`): a Lambda function's name,
or a name for what AWS itself does (SES delivering mail, Lambda's pollers).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

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


@dataclass
class Usage:
    """What one actor (a function, or AWS on its behalf) made AWS do."""

    read_units: float = 0.0
    write_units: float = 0.0
    lost_writes: int = 0  # failed conditions and cancelled transactions
    lost_write_units: float = 0.0  # what those cost at least (not reported by DynamoDB)
    requests: Counter[str] = field(default_factory=Counter)  # "service:Operation" -> n

    def add(self, other: Usage) -> None:
        self.read_units += other.read_units
        self.write_units += other.write_units
        self.lost_writes += other.lost_writes
        self.lost_write_units += other.lost_write_units
        self.requests.update(other.requests)

    def count(self, service: str, operations: set[str] | None = None) -> int:
        return sum(
            n
            for key, n in self.requests.items()
            if key.split(":")[0] == service
            and (operations is None or key.split(":")[1] in operations)
        )


class AwsMeter:
    def __init__(self) -> None:
        self.by_actor: dict[str, Usage] = {}
        self.actor = "unattributed"
        self.lock = threading.Lock()  # claimers call from many threads

    def install(self) -> AwsMeter:
        """A fresh default session with the hook; clients made from now on are metered."""
        boto3.setup_default_session()
        assert boto3.DEFAULT_SESSION is not None
        boto3.DEFAULT_SESSION.events.register("after-call", self._after_call)
        return self

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
        with self.lock:
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
        code = (parsed.get("Error") or {}).get("Code", "")
        if http_response.status_code >= 300 and code in LOST:
            used.lost_writes += 1
            # DynamoDB bills a failed conditional write at least 1 unit, and reports none of
            # it; a cancelled transaction at least 2 per item it carried (a transactional
            # write of up to 1 KB).
            reasons = parsed.get("CancellationReasons")
            used.lost_write_units += 2.0 * len(reasons) if reasons else 1.0
