"""The scheduler, the backlog, the bulk controls and the inspection of a task."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    Field,
    StringConstraints,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    Stamp,
    Strict,
    TaskId,
    answer,
)
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


@answer
class SchedulerOut(TypedDict):
    paused: bool
    queued_run_count: int
    capacity_waiting_count: int
    starved_run_count: int
    needs_attention_run_count: int


@answer
class BacklogLease(LeaseOut):
    effective_paused: bool
    paused_by_task_id: str | None


@answer
class Backlog(TypedDict):
    leases: list[BacklogLease]
    next_cursor: str | None


@answer
class Drained(TypedDict):
    drained: bool
    active: int


@answer
class ForceRowOut(TypedDict):
    lease_id: str
    ok: bool
    code: NotRequired[Annotated[str | None, Field(default=None)]]
    message: NotRequired[Annotated[str | None, Field(default=None)]]
    lease: NotRequired[Annotated[LeaseOut | None, Field(default=None)]]


@answer
class ForceResults(TypedDict):
    results: list[ForceRowOut]


DiagnosticCode = Literal[
    "stuck", "stale_lease", "orphan", "stranded", "crashed", "mass_expiry_hold"
]


@answer
class DiagnosticOut(TypedDict):
    code: DiagnosticCode
    message: str
    since: Stamp


@answer
class InspectOut(TypedDict):
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
