"""Outbound events: what the stack's EventBridge bus carries for each lease and task transition.

The detail is built from the row, never from the timeline event's data (which holds the final
report): ids, space, pool, state and outcome only — no token, payload body or result. `id` is
the timeline event's id (`<row>.v<version>`), the same on every redelivery, so a consumer
de-duplicates on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenure.domain.model import Event, Lease, Task, TaskGraph

SOURCE = "tenure"


@dataclass(frozen=True)
class Outbound:
    detail_type: str  # the timeline event's type, e.g. lease.completed
    detail: dict[str, Any]


def lease_outbound(event: Event, lease: Lease) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "lease_id": lease.id,
            "task_id": lease.task_id,
            "task_key": lease.task_key,
            "job_id": lease.job_id,
            "space": lease.space,
            "pool": lease.pool,
            "state": lease.state.value,
            "outcome": lease.outcome,
            "end_reason": lease.end_reason.value if lease.end_reason else None,
            "fence": lease.fence,
            "attempt": lease.attempt,
            "worker_id": lease.worker_id,
        },
    )


def task_outbound(event: Event, task: Task) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "task_id": task.id,
            "task_key": task.key,
            "job_id": task.job_id,
            "space": task.space,
            "pool": task.pool,
            "parent_id": task.parent_id,
            "attention": task.attention,
            "paused": task.paused,
        },
    )


def graph_outbound(event: Event, graph: TaskGraph) -> Outbound:
    return Outbound(
        event.type,
        {
            "id": event.id,
            "type": event.type,
            "at": event.at,
            "task_id": graph.task_id,
            "children": graph.children_total,
        },
    )


def outbound_of(entity: str, row: Any, event: Event) -> Outbound:
    """The bus event of one timeline event derived from `row` (a lease, task or graph row)."""
    if entity == "lease":
        return lease_outbound(event, row)
    if entity == "task":
        return task_outbound(event, row)
    return graph_outbound(event, row)
