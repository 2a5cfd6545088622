"""The local stack's stream pump on DynamoDB Local's own stream: it looks the stream and its
shards up once, reads the open shards on every pass, and looks again only when its period is
out, every shard it reads has closed, or a pass failed."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest
from tenure import wiring
from tenure_cli.local.engines import DynamoDBLocal
from tenure_cli.local.streams import StreamPump

LOOK_UP = {"DescribeTable", "DescribeStream", "GetShardIterator"}


def _pump(ddb_local: DynamoDBLocal) -> tuple[StreamPump, Counter[str], list[dict[str, Any]]]:
    table = f"t{uuid.uuid4().hex[:12]}"
    store = wiring.build_store(ddb_local.endpoint, table)
    store.create_table()
    pump = StreamPump(ddb_local.endpoint, table, store, patterns=(), shard_look_seconds=3600)
    handed: list[dict[str, Any]] = []
    pump._deliver = handed.extend  # type: ignore[method-assign]
    calls: Counter[str] = Counter()
    for client in (pump.ddb, pump.streams):
        client.meta.events.register(
            "before-call.*.*", lambda model, **_: calls.update([model.name])
        )
    return pump, calls, handed


def _write(pump: StreamPump, n: int) -> None:
    schema = pump.ddb.describe_table(TableName=pump.table)["Table"]["KeySchema"]
    item = {key["AttributeName"]: {"S": f"pump-{n}"} for key in schema}
    pump.ddb.put_item(TableName=pump.table, Item=item)


def test_an_idle_pump_reads_its_open_shards_and_looks_nothing_up(
    ddb_local: DynamoDBLocal,
) -> None:
    pump, calls, handed = _pump(ddb_local)
    pump.pump_once()
    assert {"DescribeTable", "DescribeStream", "GetShardIterator"} <= set(calls)
    shards = len(pump.iterators)
    assert shards >= 1

    calls.clear()
    for _ in range(10):
        assert pump.pump_once() == 0
    assert calls == Counter({"GetRecords": 10 * shards}), "idle: one read a shard a pass"

    _write(pump, 1)
    calls.clear()
    assert pump.pump_once() == 1
    assert [r["eventName"] for r in handed] == ["INSERT"]
    assert not LOOK_UP & set(calls), "a record on the open shard needs no look-up"


def test_the_pump_looks_again_when_its_period_is_out(ddb_local: DynamoDBLocal) -> None:
    pump, calls, _ = _pump(ddb_local)
    pump.pump_once()
    assert pump.looked_at is not None
    pump.looked_at -= pump.shard_look_seconds
    calls.clear()
    pump.pump_once()
    assert calls["DescribeTable"] == 1 and calls["DescribeStream"] == 1
    assert calls["GetShardIterator"] == 0, "a shard it already reads is not opened twice"


def test_a_failed_pass_makes_the_next_look_the_stream_up_and_loses_no_record(
    ddb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    pump, calls, handed = _pump(ddb_local)
    pump.pump_once()
    _write(pump, 1)
    read = pump.streams.get_records

    def broken(**_: Any) -> dict[str, Any]:
        raise ConnectionError("the engine went away for a moment")

    monkeypatch.setattr(pump.streams, "get_records", broken)
    with pytest.raises(ConnectionError):
        pump.pump_once()
    assert pump.looked_at is None
    monkeypatch.setattr(pump.streams, "get_records", read)
    calls.clear()
    assert pump.pump_once() == 1
    assert calls["DescribeTable"] == 1 and calls["DescribeStream"] == 1
    assert [r["eventName"] for r in handed] == ["INSERT"]


class _Shards:
    """A stream's shards as the streams API shows them, for what DynamoDB Local will not do
    on demand: close a shard, open its child, make the table's stream anew."""

    def __init__(self) -> None:
        self.arn = "stream-1"
        self.pending: dict[str, list[int]] = {}  # shard -> sequence numbers not yet read
        self.closed: set[str] = set()
        self.calls: Counter[str] = Counter()

    def describe_table(self, **_: Any) -> dict[str, Any]:
        self.calls["DescribeTable"] += 1
        return {"Table": {"LatestStreamArn": self.arn}}

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        self.calls["DescribeStream"] += 1
        return {"StreamDescription": {"Shards": [{"ShardId": s} for s in self.pending]}}

    def get_shard_iterator(self, StreamArn: str, ShardId: str, **_: Any) -> dict[str, Any]:
        self.calls[f"GetShardIterator {ShardId}"] += 1
        return {"ShardIterator": f"{StreamArn}/{ShardId}"}

    def get_records(self, ShardIterator: str, **_: Any) -> dict[str, Any]:
        self.calls["GetRecords"] += 1
        arn, shard = ShardIterator.split("/")
        if arn != self.arn:
            raise LookupError(f"no stream {arn}")
        numbers, self.pending[shard] = self.pending[shard], []
        records = [
            {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(n), "Keys": {}}}
            for n in numbers
        ]
        return {
            "Records": records,
            "NextShardIterator": None if shard in self.closed else ShardIterator,
        }


def _faked(shards: _Shards) -> tuple[StreamPump, list[str]]:
    pump = StreamPump(None, "t", None, patterns=(), shard_look_seconds=3600)  # type: ignore[arg-type]
    pump.ddb = pump.streams = shards  # type: ignore[assignment]
    handed: list[str] = []
    pump._deliver = lambda batch: handed.extend(  # type: ignore[method-assign]
        r["dynamodb"]["SequenceNumber"] for r in batch
    )
    return pump, handed


def test_a_shard_that_closes_beside_an_open_one_has_its_child_read_on_the_next_pass() -> None:
    shards = _Shards()
    shards.pending = {"a": [1], "b": [2]}
    pump, handed = _faked(shards)
    assert pump.pump_once() == 2
    shards.closed.add("b")  # b's last records, then no next iterator; c takes its writes
    shards.pending["b"] = [3]
    shards.pending["c"] = [4]
    assert pump.pump_once() == 1
    assert pump.pump_once() == 1, "the child is found at once, not after the period"
    assert handed == ["1", "2", "3", "4"]
    assert shards.calls["GetShardIterator b"] == 1, "a closed shard is never read again"
    shards.calls.clear()
    shards.pending["a"] = [5]
    assert pump.pump_once() == 1 and handed[-1] == "5"
    assert set(shards.calls) == {"GetRecords"}, "open again: nothing looked up"


def test_a_table_s_new_stream_replaces_the_old_one_s_shards() -> None:
    shards = _Shards()
    shards.pending = {"a": [1]}
    pump, handed = _faked(shards)
    pump.pump_once()
    shards.arn, shards.pending = "stream-2", {"d": [2]}
    with pytest.raises(LookupError):
        pump.pump_once()  # the old stream's iterator is refused
    assert pump.pump_once() == 1
    assert handed == ["1", "2"]
    assert list(pump.iterators) == ["d"], "the old stream's shards are dropped"
