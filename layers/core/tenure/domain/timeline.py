"""Timeline events derived from row changes (the reactor's pure half)."""

from __future__ import annotations

from typing import Any

from tenure.domain.model import Event, Lease, Task, TaskGraph
from tenure.domain.states import SubjectKind


def lease_event(old: Lease | None, new: Lease) -> Event | None:
    """The event a lease row change stands for, or None when it was no transition."""
    if new.event_type is None or (old is not None and old.version == new.version):
        return None
    data: dict[str, Any] = dict(new.event_data or {})
    if new.state.terminal:
        data.update(
            {
                "state": new.state.value,
                "end_reason": new.end_reason.value if new.end_reason else None,
                "outcome": new.outcome,
                **(new.report or {}),
            }
        )
    return Event(
        # One id per (lease, version), zero-padded so events of one millisecond keep their
        # order: a stream record delivered twice writes one event.
        id=f"{new.id}.v{new.version:06d}",
        subject_kind=new.subject_kind,
        subject_id=new.subject_id,
        type=new.event_type,
        at=new.updated_at or new.created_at,
        lease_id=new.id,
        fence=new.fence,
        data=data,
    )


def task_event(old: Task | None, new: Task) -> Event | None:
    if new.event_type is None or (old is not None and old.version == new.version):
        return None
    return Event(
        id=f"{new.id}.v{new.version:06d}",
        subject_kind=SubjectKind.TASK,
        subject_id=new.id,
        type=new.event_type,
        at=new.updated_at or new.created_at,
        data=dict(new.event_data or {}),
    )


def task_side_events(old: Task | None, new: Task) -> list[Event]:
    """The further events one task row change stands for, beyond task_event's: a block
    that released the caller's run and escalated in one write is both transitions, so the
    release is an event of its own (its id derived from the same row version, so a replayed
    record writes it once)."""
    if new.event_type != "task.escalated" or (old is not None and old.version == new.version):
        return []
    data = dict(new.event_data or {})
    if "released_lease_id" not in data:
        return []
    data.pop("block_recurrence_limit", None)
    return [
        Event(
            id=f"{new.id}.v{new.version:06d}.released",
            subject_kind=SubjectKind.TASK,
            subject_id=new.id,
            type="task.run_released",
            at=new.updated_at or new.created_at,
            data=data,
        )
    ]


def graph_event(old: TaskGraph | None, new: TaskGraph) -> Event | None:
    """A parent rolled up by its last child's success: one event, whatever replays."""
    if new.rollup_at is None or (old is not None and old.rollup_at is not None):
        return None
    return Event(
        id=f"{new.task_id}.rollup",
        subject_kind=SubjectKind.TASK,
        subject_id=new.task_id,
        type="task.rollup_completed",
        at=new.rollup_at,
        data={"children": new.children_total},
    )
