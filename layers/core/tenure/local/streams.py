"""Reads the table's stream on DynamoDB Local and feeds the reactor, like Lambda's trigger."""

from __future__ import annotations

from typing import Any

import boto3

from tenure.core.ports import Store
from tenure.reactor import react


class StreamPump:
    def __init__(self, endpoint: str, table: str, store: Store, region: str = "us-east-1"):
        self.ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
        self.streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=region)
        self.table = table
        self.store = store
        self.iterators: dict[str, str | None] = {}  # shard id -> next iterator (None: closed)

    def _stream_arn(self) -> str:
        return str(self.ddb.describe_table(TableName=self.table)["Table"]["LatestStreamArn"])

    def pump_once(self) -> int:
        """Deliver every record available now; returns how many were read."""
        arn = self._stream_arn()
        shards = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
        for shard in shards:
            sid = shard["ShardId"]
            if sid not in self.iterators:
                self.iterators[sid] = self.streams.get_shard_iterator(
                    StreamArn=arn, ShardId=sid, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
        read = 0
        for sid, iterator in list(self.iterators.items()):
            while iterator:
                out: dict[str, Any] = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                records = out.get("Records", [])
                for record in records:
                    react(self.store, record)
                read += len(records)
                iterator = out.get("NextShardIterator")
                self.iterators[sid] = iterator
                if not records:
                    break
        return read

    def drain(self, quiet_passes: int = 2) -> int:
        """Pump until nothing new arrives `quiet_passes` times in a row (for tests, benches)."""
        total, quiet = 0, 0
        while quiet < quiet_passes:
            got = self.pump_once()
            total += got
            quiet = quiet + 1 if got == 0 else 0
        return total
