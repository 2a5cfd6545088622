"""A payload's `inputs`: what the tasks around this one produced — each task it depends on,
then each direct child (newest first) — with the result of each one's last successful
completion, bounded in count and in bytes so a payload stays small whatever the graph holds.

The last success is the lease the task's graph row names (`succeeded_lease`, written with
the success itself), so a task run again after it succeeded still hands on that run's result
whatever its newer run does; only such a task costs a read more (its named lease). A row
written before it named the lease falls back to the newest lease, when that one succeeded."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tenure.app.rows import LeaseRows, TaskRows
from tenure.domain.model import Lease, Task

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.ports import TaskEntry
    from tenure.app.tasks.graph import Graph

MAX_INPUTS = 50
MAX_INPUT_BYTES = 256 * 1024


class Inputs:
    def __init__(self, kernel: Kernel, graph: Graph, *, leases: LeaseRows, tasks: TaskRows) -> None:
        self.kernel = kernel
        self.leases = leases
        self.tasks = tasks
        self.graph = graph

    def of(self, task: Task) -> tuple[dict[str, Any], dict[str, Task]]:
        """`{inputs: [...]}`, with `inputs_truncated: true` when some were left out, and the
        tasks read for it by id (the payload's `dependencies` come from the same read). A task
        with no dependency and no child reads nothing: its row says so."""
        depends = list(task.depends_on or ())
        ids = depends[: MAX_INPUTS + 1]
        if task.has_children and len(ids) <= MAX_INPUTS:
            # One more than fits, to know whether any were left out.
            ids += self.tasks.newest_children(task.id, MAX_INPUTS + 1 - len(ids))
        truncated = len(ids) > MAX_INPUTS
        ids = list(dict.fromkeys(ids[:MAX_INPUTS]))
        if not ids:
            return {"inputs": []}, {}
        found = self.tasks.task_entries(ids)
        # The named successes that are not the newest lease read already (re-run tasks).
        named = {e.graph.succeeded_lease for e in found.values() if e.graph.succeeded_lease}
        older = named - {e.lease.id for e in found.values() if e.lease is not None}
        earlier = self.leases.get_leases(sorted(older), consistent=False) if older else {}
        inputs: list[dict[str, Any]] = []
        size = 2  # the list's brackets
        for task_id in ids:
            entry = found.get(task_id)
            if entry is None:
                continue  # gone (retention): nothing to hand on
            shown = self._input(entry, earlier)
            cost = len(json.dumps(shown, default=str).encode()) + 1
            if size + cost > MAX_INPUT_BYTES:
                truncated = True
                break
            size += cost
            inputs.append(shown)
        tasks = {task_id: entry.task for task_id, entry in found.items()}
        return {"inputs": inputs, **({"inputs_truncated": True} if truncated else {})}, tasks

    def _input(self, entry: TaskEntry, earlier: dict[str, Lease]) -> dict[str, Any]:
        task, lease = entry.task, entry.lease
        status = self.graph.view(task, lease, entry.graph, None, []).status
        success = lease
        if entry.graph.succeeded_lease is not None:
            named = entry.graph.succeeded_lease
            success = lease if lease is not None and lease.id == named else earlier.get(named)
        succeeded = success is not None and success.state.terminal and success.outcome == "success"
        result = (success.report or {}).get("result") if succeeded and success else None
        return {
            "task_id": task.id,
            "key": task.key,
            "title": task.title,
            "status": status.value,
            "result": result,
        }
