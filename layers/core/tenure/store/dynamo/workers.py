"""The workers heard from, per pool (TTL rows)."""

from __future__ import annotations

from collections.abc import Collection

from tenure.app.ports import WORKER_RETENTION_S, WORKER_SAYS, WORKERS_CAP, WorkerPage
from tenure.domain.errors import Conflict
from tenure.domain.model import Worker
from tenure.domain.transitions import SignalKey
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.reads import PagedReads
from tenure.store.table import Table


class DynamoWorkers:
    """The WorkerRows port on one table."""

    def __init__(self, table: Table, reads: PagedReads) -> None:
        self.table = table
        self.reads = reads

    def note_worker(self, worker: Worker, heard: Collection[str] = WORKER_SAYS) -> None:
        """One UpdateItem: last_seen and the row's own attributes set, each field `heard` set
        (or removed, when None), anything else kept as stored."""
        item = {
            **items.worker_item(worker),
            keys.TTL_ATTRIBUTE: worker.last_seen // 1000 + WORKER_RETENTION_S,
        }
        names = [name for name in item if name not in WORKER_SAYS or name in heard]
        removed = sorted(name for name in heard if name not in item)
        self.table.call(
            "update",
            self.table.client.update_item,
            TableName=self.table.name,
            Key=codec.dump(keys.worker_key(worker.pool, worker.worker_id)),
            UpdateExpression=expressions.set_keeping_others(len(names), len(removed)),
            ExpressionAttributeNames={
                **{f"#s{i}": name for i, name in enumerate(names)},
                **{f"#r{i}": name for i, name in enumerate(removed)},
            },
            ExpressionAttributeValues=codec.values(
                **{f"s{i}": item[name] for i, name in enumerate(names)}
            ),
        )

    def get_worker(self, pool: str, worker_id: str) -> Worker | None:
        row = self.table.get(keys.worker_key(pool, worker_id), consistent=False)
        return items.worker_from(row) if row else None

    def signal_epoch(self, key: SignalKey) -> int:
        row = self.table.get(keys.signal_key(key.claimant, key.worker_id), consistent=False)
        return int(row.get(keys.SIGNAL_EPOCH, 0)) if row else 0

    def signal_secret(self) -> str | None:
        row = self.table.get(keys.SIGNAL_SECRET_KEY)
        return str(row[keys.SIGNAL_SECRET]) if row else None

    def keep_signal_secret(self, secret: str) -> str:
        put = self.table.put_op(
            {**keys.SIGNAL_SECRET_KEY, keys.SIGNAL_SECRET: secret}, conditions.IS_NEW
        )
        try:
            self.table.put_one(put["Put"])
        except Conflict:
            kept = self.signal_secret()  # another process's came first: that one stands
            if kept is None:
                raise
            return kept
        return secret

    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        return self.reads.list_workers(pool, limit, now_ms)

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        return self.reads.worker_page(pool, limit, cursor, now_ms)
