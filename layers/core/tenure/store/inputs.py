"""The reads a payload's `inputs` make: a task's newest children (one bounded Query of its
child edges) and a few tasks by id, each with its graph row and the newest lease of its latest
run (three batched rounds by key, eventually consistent)."""

from __future__ import annotations

from tenure.app.ports import TaskEntry
from tenure.domain.model import first_job_id
from tenure.domain.timeline import first_lease_id
from tenure.store import codec, expressions, items, keys
from tenure.store.table import Table


class InputReads:
    def __init__(self, rows: Table) -> None:
        self.rows = rows

    def newest_children(self, task_id: str, limit: int) -> list[str]:
        """Up to `limit` child ids, newest first: ids are time-ordered, so the edges read
        backwards are the newest children."""
        prefix = keys.EDGE_PREFIX["child"]
        out = self.rows.query(
            KeyConditionExpression=expressions.WITH_PREFIX,
            ExpressionAttributeValues=codec.values(pk=keys.task_pk(task_id), prefix=prefix),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [str(codec.load(r)[keys.SK]).removeprefix(prefix) for r in out.get("Items", [])]

    def task_entries(self, task_ids: list[str]) -> dict[str, TaskEntry]:
        """These tasks (those that exist), each with its graph row and newest lease."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            return {}
        rows = self.rows.batch_get(
            [key for t in ids for key in (keys.task_key(t), keys.task_graph_key(t))], False
        )
        graphs = {keys.task_id_of(r): r for r in rows if r[keys.SK] == keys.GRAPH_SK}
        tasks = {
            keys.task_id_of(r): items.task_from(r) for r in rows if r[keys.SK] != keys.GRAPH_SK
        }
        job_ids = [t.job_id for t in tasks.values() if t.job_id]
        jobs = {
            str(r["id"]): str(r["lease_id"])
            for r in self.rows.batch_get([keys.job_key(j) for j in job_ids], False)
        }
        # A task's first job may have no row yet: its lease is the task's first.
        for task in tasks.values():
            if task.job_id and task.job_id not in jobs and task.job_id == first_job_id(task.id):
                jobs[task.job_id] = first_lease_id(task.id)
        leases = {
            lease.id: lease
            for lease in map(
                items.lease_from,
                self.rows.batch_get([keys.lease_key(x) for x in jobs.values()], False),
            )
        }
        return {
            task_id: TaskEntry(
                task=task,
                graph=items.graph_from(task_id, graphs.get(task_id, {})),
                lease=leases.get(jobs.get(task.job_id or "", "")),
                cursor="",
            )
            for task_id, task in tasks.items()
        }
