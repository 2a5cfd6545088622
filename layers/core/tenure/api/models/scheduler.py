"""The scheduler, the backlog, the bulk controls and the inspection of a task."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StringConstraints,
)

from tenure.api.models.fields import Out, Stamp, Strict, TaskId
from tenure.api.models.leases import LeaseOut
from tenure.api.models.tasks import EventOut, TaskOut


class Drain(Strict):
    timeout_seconds: Annotated[float, Field(ge=0, le=20)] = 0


class BulkRelease(Strict):
    lease_ids: Annotated[list[TaskId], Field(min_length=1, max_length=100)]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class BulkFail(Strict):
    lease_ids: Annotated[list[TaskId], Field(min_length=1, max_length=100)]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]


class SchedulerOut(Out):
    paused: bool
    queued_run_count: int
    capacity_waiting_count: int
    starved_run_count: int
    needs_attention_run_count: int


class BacklogLease(LeaseOut):
    effective_paused: bool
    paused_by_task_id: str | None


class Backlog(Out):
    leases: list[BacklogLease]
    next_cursor: str | None


class Drained(Out):
    drained: bool
    active: int


class ForceRowOut(Out):
    lease_id: str
    ok: bool
    code: str | None = None
    message: str | None = None
    lease: LeaseOut | None = None


class ForceResults(Out):
    results: list[ForceRowOut]


class DiagnosticOut(Out):
    code: Literal["stuck", "stale_lease", "orphan", "stranded", "crashed", "mass_expiry_hold"]
    message: str
    since: Stamp


class InspectOut(Out):
    task: TaskOut | None
    current_lease: LeaseOut | None
    recent_leases: list[LeaseOut]
    recent_events: list[EventOut]
    scheduler: dict[str, Any]
    diagnostics: list[DiagnosticOut]
    facts: dict[str, Any]
    next_action: Literal[
        "claim_available",
        "waiting_for_session",
        "stranded",
        "running",
        "recovery_required",
        "terminal",
    ]
    as_of: Stamp
