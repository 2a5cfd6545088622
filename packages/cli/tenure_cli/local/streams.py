"""Reads the table's stream on DynamoDB Local and feeds the reactor, like Lambda's trigger."""

from __future__ import annotations

import time
from typing import Any

import boto3
from tenure.app.rows import Store
from tenure.config import settings
from tenure.triggers.stream import handle

from tenure_cli.local.filters import Pattern, passes, reactor_patterns

DELIVERY_ATTEMPTS = 5
# How often the pump looks the stream and its shards up again while the shards it reads stay
# open. A shard that closes makes the next pass look at once (its child takes its writes from
# then on), so this bounds only how late a shard opened beside open ones is found. Looked up on
# every pass, DescribeTable and DescribeStream were two of an idle pump's three calls, five
# passes a second.
SHARD_LOOK_SECONDS = 2.0


class StreamPump:
    def __init__(
        self,
        endpoint: str | None,
        table: str,
        store: Store,
        region: str = "us-east-1",
        patterns: tuple[Pattern, ...] | None = None,
        shard_look_seconds: float = SHARD_LOOK_SECONDS,
    ):
        # The reactor trigger's filters, as Lambda applies them before the function runs; by
        # default the template's, under the OutboundEvents setting the reactor publishes by.
        self.patterns = patterns
        self.ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
        self.streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=region)
        self.table = table
        self.store = store
        self.iterators: dict[str, str | None] = {}  # shard id -> next iterator (None: closed)
        self.arn: str | None = None  # the stream the iterators belong to
        self.shard_look_seconds = shard_look_seconds
        self.looked_at: float | None = None  # time.monotonic() of the last look-up; None: now

    def _stream_arn(self) -> str:
        return str(self.ddb.describe_table(TableName=self.table)["Table"]["LatestStreamArn"])

    def pump_once(self) -> int:
        """Deliver every record available now; returns how many were read. After a pass that
        fails the next looks the stream up again; the iterators keep their places (only a
        delivered batch moves one on), unless the table now has another stream, whose shards
        replace the old one's."""
        try:
            arn = self.arn
            if arn is None or self._look_due():
                arn = self._stream_arn()
                if arn != self.arn:
                    self.iterators = {}
                self.arn = arn
                self._open_shards(arn)
                self.looked_at = time.monotonic()
            return self._drain(arn)
        except Exception:
            self.looked_at = None
            raise

    def _look_due(self) -> bool:
        if self.looked_at is None:
            return True
        if not any(self.iterators.values()):
            return True  # nothing open to read: no shard yet, or every one has closed
        return time.monotonic() - self.looked_at >= self.shard_look_seconds

    def _open_shards(self, arn: str) -> None:
        shards = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            sid = shard["ShardId"]
            if sid not in self.iterators:
                self.iterators[sid] = self.streams.get_shard_iterator(
                    StreamArn=arn, ShardId=sid, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]

    def _drain(self, arn: str) -> int:
        read = 0
        patterns = self._patterns()
        for sid, iterator in list(self.iterators.items()):
            while iterator:
                out: dict[str, Any] = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records = out.get("Records", [])
                batch = [_as_lambda_record(r, arn) for r in records]
                batch = [r for r in batch if passes(patterns, r)]
                if batch:
                    # Only a delivered batch moves the iterator on: a failure re-reads it.
                    self._deliver(batch)
                read += len(records)
                iterator = out.get("NextShardIterator")
                self.iterators[sid] = iterator
                if iterator is None:
                    self.looked_at = None  # closed: its child is looked up on the next pass
                if not records:
                    break
        return read

    def _patterns(self) -> tuple[Pattern, ...]:
        """The filter in force: the one given, else the template's for the setting the
        reactor reads now (a bench runs each setting in turn in one process)."""
        if self.patterns is not None:
            return self.patterns
        return reactor_patterns(outbound_events=settings().outbound_events)

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        """Hand a batch to the reactor; retry the records it reports as failed, like Lambda."""
        for attempt in range(DELIVERY_ATTEMPTS):
            answer = handle({"Records": batch}, None, self.store)
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
            if not failed:
                return
            batch = [r for r in batch if r["dynamodb"]["SequenceNumber"] in failed]
            time.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"the reactor failed {len(batch)} stream records {DELIVERY_ATTEMPTS}x")

    def drain(self, quiet_passes: int = 2) -> int:
        """Pump until nothing new arrives `quiet_passes` times in a row (for tests, benches)."""
        total, quiet = 0, 0
        while quiet < quiet_passes:
            got = self.pump_once()
            total += got
            quiet = quiet + 1 if got == 0 else 0
        return total


def _as_lambda_record(record: dict[str, Any], arn: str) -> dict[str, Any]:
    """A streams API record in the shape Lambda's DynamoDB trigger delivers."""
    change = dict(record["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if created is not None and not isinstance(created, int | float):
        change["ApproximateCreationDateTime"] = created.timestamp()
    return {**record, "dynamodb": change, "eventSourceARN": arn}
