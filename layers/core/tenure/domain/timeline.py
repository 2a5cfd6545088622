"""Timeline events derived from row changes (the reactor's pure half)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tenure.domain.events import (
    LEASE_CLAIMED,
    LEASE_COMPLETED,
    LEASE_CREATED,
    LEASE_RECLAIMED,
    LEASE_STARTED,
    TASK_ESCALATED,
    TASK_ROLLUP_COMPLETED,
    TASK_RUN_RELEASED,
)
from tenure.domain.model import Event, Lease, Task, TaskGraph
from tenure.domain.states import SubjectKind

# The routine transitions of a task's lease whose timeline entries are the lease row itself:
# the write that makes one stamps its version on the row (`Lease.tl`, write-once), the
# reactor writes no timeline row for it, and a timeline read tells it from the row
# (`stamped_events`). Stamped only when the row alone gives back the very event the reactor
# would have written (same id, time, data); anything else stays a row of its own. A task's
# leases follow one another (one run at a time, one lease of a run at a time), which is what
# lets a timeline page find every lease whose stamps fall inside it (store/reads.py).
STAMPED = {LEASE_CLAIMED: "c", LEASE_STARTED: "s", LEASE_COMPLETED: "e"}
# A task's first lease, made with the task, is a stamp from its first write (`tl["n"]`, its
# version): its `lease.created` says only which pool it was filed in, which the row keeps, and
# its id is derived from the task's (first_lease_id), so a timeline read finds it without an
# anchor row. Every later lease of a task is found by its anchor (its first event, a row).
CREATED_STAMP = "n"


def first_lease_id(task_id: str) -> str:
    """The id of a task's first lease when it was made with the task (the task id's own
    unique part under the lease prefix): a timeline read reads it by key."""
    return "lease_" + task_id.partition("_")[2]


def first_lease_stamps(task_id: str, lease_id: str, pool: str, data: dict[str, Any]) -> bool:
    """Whether a new lease can be its task's first lease stamped as created: its id is the
    task's first lease id and its `lease.created` says no more than its pool."""
    return lease_id == first_lease_id(task_id) and data == {"pool": pool}


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
    if new.event_type != TASK_ESCALATED or (old is not None and old.version == new.version):
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
            type=TASK_RUN_RELEASED,
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
        type=TASK_ROLLUP_COMPLETED,
        at=new.rollup_at,
        data={"children": new.children_total},
    )


def first_stamps(subject_kind: str) -> dict[str, Any] | None:
    """A new lease's stamps: none yet on a task's lease; None (every event a row) elsewhere."""
    return {} if subject_kind == SubjectKind.TASK else None


def with_stamp(seen: Lease | None, new: Lease) -> Lease:
    """`new` as it should be written over `seen` (the row as read): the routine transition it
    names stamped when the row alone tells its event, unstamped when it no longer does (the
    write's event was changed after it was stamped). Idempotent."""
    key = STAMPED.get(new.event_type or "")
    if seen is None or key is None or new.tl is None or new.version <= seen.version:
        return new
    if (seen.tl or {}).get(key) is not None:
        return new  # stamped by an earlier write: stamps are written once
    bare = {k: v for k, v in new.tl.items() if k != key and not (key == "s" and k == "b")}
    marks: dict[str, Any] = {**bare, key: new.version}
    if key == "s":
        marks["b"] = (new.event_data or {}).get("by")
    marked = replace(new, tl=marks)
    event = lease_event(seen, new)
    told = [e for e in stamped_events(marked) if event is not None and e.id == event.id]
    return marked if told == [event] else replace(new, tl=bare)


def lease_events(old: Lease | None, new: Lease) -> list[Event]:
    """Every event one lease row change stands for, oldest first: its own (lease_event), after
    any transition an earlier version of the same write made and the row holds as a stamp (a
    claim that also starts the lease is claimed at one version and started at the next)."""
    last = lease_event(old, new)
    if last is None:
        return []
    if old is None:
        return [last]
    passed = [e for v, e in _stamped(new) if old.version < v < new.version]
    return [*passed, last]


def stamped_events(lease: Lease) -> list[Event]:
    """The timeline events a lease row holds as stamps (oldest first)."""
    return [event for _, event in _stamped(lease)]


def _stamped(lease: Lease) -> list[tuple[int, Event]]:
    marks = lease.tl or {}
    found: list[tuple[int, Event]] = []

    def told(key: str, type_: str, at: int | None, data: dict[str, Any]) -> None:
        version = marks.get(key)
        if version is None or at is None:
            return
        found.append(
            (
                int(version),
                Event(
                    id=f"{lease.id}.v{int(version):06d}",
                    subject_kind=lease.subject_kind,
                    subject_id=lease.subject_id,
                    type=type_,
                    at=at,
                    lease_id=lease.id,
                    fence=lease.fence,
                    data=data,
                ),
            )
        )

    if lease.task_id is not None and lease.id == first_lease_id(lease.task_id):
        told(CREATED_STAMP, LEASE_CREATED, lease.created_at, {"pool": lease.pool})
    told(
        "c",
        LEASE_CLAIMED,
        lease.claimed_at,
        {"worker_id": lease.worker_id, "worker_version": lease.worker_version},
    )
    told("s", LEASE_STARTED, lease.started_at, {"by": marks.get("b")})
    ended: dict[str, Any] = {"report": lease.report_kind.value if lease.report_kind else None}
    ended.update(
        {
            "state": lease.state.value,
            "end_reason": lease.end_reason.value if lease.end_reason else None,
            "outcome": lease.outcome,
            **(lease.report or {}),
        }
    )
    told("e", LEASE_COMPLETED, lease.ended_at, ended)
    return found


def derived_reclaim(lease: Lease, at: int | None) -> Event | None:
    """The `lease.reclaimed` of a lease that ended with nothing to delete (no logs, no
    attachments), once its pool's retention has passed (`at`, app/kernel.py reclaimed_at): no
    row holds it and no bus entry told it; it reads as the event the sweeper's mark would have
    been (the next version of the row, the ending's data). None for any other lease."""
    if at is None or lease.reclaimed_at is not None or lease.keeps_detail:
        return None
    ended = lease_event(None, replace(lease, event_type=LEASE_RECLAIMED, event_data={}))
    if ended is None:
        return None
    return replace(ended, id=f"{lease.id}.v{lease.version + 1:06d}", at=at)


def is_stamped(lease: Lease, event: Event) -> bool:
    """Whether the row holds `event` as a stamp (the reactor then writes no row for it)."""
    return any(e.id == event.id for e in stamped_events(lease))
