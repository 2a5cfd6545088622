"""The workers heard from, per pool (TTL rows)."""

from __future__ import annotations

from tenure.app.ports import WORKER_RETENTION_S, WORKERS_CAP, WorkerPage
from tenure.domain.model import Worker
from tenure.store import codec, items, keys
from tenure.store.reads import PagedReads
from tenure.store.table import Table


class DynamoWorkers:
    """The WorkerRows port on one table."""

    def __init__(self, table: Table, reads: PagedReads) -> None:
        self.table = table
        self.reads = reads

    def put_worker(self, worker: Worker) -> None:
        item = {
            **keys.worker_key(worker.pool, worker.worker_id),
            **items.worker_item(worker),
            keys.TTL_ATTRIBUTE: worker.last_seen // 1000 + WORKER_RETENTION_S,
        }
        self.table.call(
            "put", self.table.client.put_item, TableName=self.table.name, Item=codec.dump(item)
        )

    def get_worker(self, pool: str, worker_id: str) -> Worker | None:
        row = self.table.get(keys.worker_key(pool, worker_id), consistent=False)
        return items.worker_from(row) if row else None

    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        return self.reads.list_workers(pool, limit, now_ms)

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        return self.reads.worker_page(pool, limit, cursor, now_ms)
