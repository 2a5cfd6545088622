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
    assert pump.arn is None
    monkeypatch.setattr(pump.streams, "get_records", read)
    calls.clear()
    assert pump.pump_once() == 1
    assert calls["DescribeTable"] == 1 and calls["DescribeStream"] == 1
    assert [r["eventName"] for r in handed] == ["INSERT"]


def test_a_closed_shard_is_followed_at_once(ddb_local: DynamoDBLocal) -> None:
    pump, calls, _ = _pump(ddb_local)
    pump.pump_once()
    # As a shard's last read leaves it: no next iterator.
    pump.iterators = dict.fromkeys(pump.iterators)
    calls.clear()
    pump.pump_once()
    assert calls["DescribeStream"] == 1
