"""A payload's `inputs`: what the tasks around this one produced — each task it depends on,
then each direct child (newest first) — with the result of each one's successful completion,
bounded in count and in bytes so a payload stays small whatever the graph holds."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tenure.domain.model import Task

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.ports import TaskEntry
    from tenure.app.tasks.graph import Graph

MAX_INPUTS = 50
MAX_INPUT_BYTES = 256 * 1024


class Inputs:
    def __init__(self, kernel: Kernel, graph: Graph) -> None:
        self.kernel = kernel
        self.graph = graph

    def of(self, task: Task) -> tuple[dict[str, Any], dict[str, Task]]:
        """`{inputs: [...]}`, with `inputs_truncated: true` when some were left out, and the
        tasks read for it by id (the payload's `dependencies` come from the same read). A task
        with no dependency and no child reads nothing: its row says so."""
        depends = list(task.depends_on or ())
        ids = depends[: MAX_INPUTS + 1]
        if task.has_children and len(ids) <= MAX_INPUTS:
            # One more than fits, to know whether any were left out.
            ids += self.kernel.store.newest_children(task.id, MAX_INPUTS + 1 - len(ids))
        truncated = len(ids) > MAX_INPUTS
        ids = list(dict.fromkeys(ids[:MAX_INPUTS]))
        if not ids:
            return {"inputs": []}, {}
        found = self.kernel.store.task_entries(ids)
        inputs: list[dict[str, Any]] = []
        size = 2  # the list's brackets
        for task_id in ids:
            entry = found.get(task_id)
            if entry is None:
                continue  # gone (retention): nothing to hand on
            shown = self._input(entry)
            cost = len(json.dumps(shown, default=str).encode()) + 1
            if size + cost > MAX_INPUT_BYTES:
                truncated = True
                break
            size += cost
            inputs.append(shown)
        tasks = {task_id: entry.task for task_id, entry in found.items()}
        return {"inputs": inputs, **({"inputs_truncated": True} if truncated else {})}, tasks

    def _input(self, entry: TaskEntry) -> dict[str, Any]:
        task, lease = entry.task, entry.lease
        status = self.graph.view(task, lease, entry.graph, None, []).status
        succeeded = lease is not None and lease.state.terminal and lease.outcome == "success"
        result = (lease.report or {}).get("result") if succeeded and lease else None
        return {
            "task_id": task.id,
            "key": task.key,
            "title": task.title,
            "status": status.value,
            "result": result,
        }
