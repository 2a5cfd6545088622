"""A task row's next version: the one way a write names the transition it is.

Each row a transaction writes names its own transition (`event_type`, `event_data`), and
the table's stream turns that into the timeline event, so the stream is the outbox. A task
write that bumped its version without naming its event, or named one without bumping,
would be lost or told twice: every task write builds its row here, as a lease's builds its
own with `moved`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tenure.domain.model import Task


def next_version(task: Task, event: str, data: dict[str, Any], now: int, **changes: Any) -> Task:
    """`task` with `changes` applied as its next version, naming `event` (with `data`) for
    its timeline, at `now`."""
    return replace(
        task,
        **changes,
        version=task.version + 1,
        event_type=event,
        event_data=data,
        updated_at=now,
    )
