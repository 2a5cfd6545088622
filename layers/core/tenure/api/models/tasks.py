"""Tasks: filing, enqueueing, the graph's patch, approval and cancel bodies; how a task and
its timeline read."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal, NotRequired, Self

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    MAX_TTL_SECONDS,
    Attempts,
    ConcurrencyKey,
    ExpiresIn,
    Integral,
    Name,
    Priority,
    RunSeconds,
    Slug,
    SpaceKey,
    Stamp,
    Strict,
    TaskId,
    Text,
    Title,
    _bounded,
    _instant,
    answer,
)
from tenure.api.models.leases import LeaseOut, WorkflowRef
from tenure.domain.model import (
    DEFAULT_PRIORITY,
    MAX_DEPENDS_ON,
)
from tenure.domain.states import TaskStatus


class TaskCreate(Strict):
    # Required of operators; a lease token's task lands in its lease's space.
    space: SpaceKey | None = None
    title: Title
    workflow: Slug | None = None
    body: Text | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    pool: Name | None = None
    max_attempts: Attempts | None = None
    # Deferred: the lease is pending and not claimable before this instant.
    not_before: Annotated[str, StringConstraints(max_length=64)] | None = None
    # The task graph: a parent, the blockers whose success it waits for, and whether the
    # last of them enqueues it on `pool`.
    parent_id: TaskId | None = None
    depends_on: Annotated[list[TaskId], Field(max_length=MAX_DEPENDS_ON)] = Field(
        default_factory=list
    )
    auto_enqueue_on_ready: bool = False
    # Filed with a lease token, its endings wake that lease (default true).
    wake_creator: bool | None = None
    # Held for a member's approval (POST /tasks/{id}/approve) before any run.
    requires_approval: bool = False
    # Filed with a lease token: its open runs end (ttl_expired) this long after filing.
    ttl_seconds: Annotated[int, Field(ge=1, le=MAX_TTL_SECONDS), Integral] | None = None
    # Its runs count against their pool's max_active_per_key under this key.
    concurrency_key: ConcurrencyKey | None = None
    # Scheduling controls its runs take (an enqueue may name its own for that run).
    priority: Priority | None = None
    expires_in_seconds: ExpiresIn | None = None
    # Run timeout of its runs; the pool's, if smaller, wins.
    max_run_seconds: RunSeconds | None = None

    _properties = field_validator("properties")(lambda v: _bounded(v, "properties"))
    _not_before = field_validator("not_before")(_instant)

    @model_validator(mode="after")
    def _enqueue_needs_a_pool(self) -> Self:
        if self.auto_enqueue_on_ready and self.pool is None:
            raise ValueError("auto_enqueue_on_ready needs a pool to enqueue on (pool)")
        return self


class Enqueue(Strict):
    pool: Name
    not_before: Annotated[str, StringConstraints(max_length=64)] | None = None
    # Becomes the task's concurrency key (this run and later ones); left out: the task's own.
    concurrency_key: ConcurrencyKey | None = None
    # This run's controls; left out, the task's own (what it was filed with).
    priority: Priority | None = None
    expires_in_seconds: ExpiresIn | None = None
    max_run_seconds: RunSeconds | None = None

    _not_before = field_validator("not_before")(_instant)


@answer
class TaskOut(TypedDict):
    id: str
    key: str
    space: str
    title: str
    body: str | None
    properties: dict[str, Any]
    workflow: WorkflowRef | None
    max_attempts: int
    status: TaskStatus
    blocked_reasons: list["BlockedReason"]
    created_at: Stamp
    checks: NotRequired[Annotated[dict[str, Any], Field(default_factory=dict)]]
    # The scheduling controls its runs take unless an enqueue names its own.
    priority: NotRequired[Annotated[int, Field(default=DEFAULT_PRIORITY)]]
    expires_in_seconds: NotRequired[Annotated[int | None, Field(default=None)]]
    max_run_seconds: NotRequired[Annotated[int | None, Field(default=None)]]
    parent_id: NotRequired[Annotated[str | None, Field(default=None)]]
    depends_on: NotRequired[Annotated[list[str], Field(default=[])]]
    auto_enqueue_on_ready: NotRequired[Annotated[bool, Field(default=False)]]
    pool: NotRequired[Annotated[str | None, Field(default=None)]]
    paused: NotRequired[Annotated[bool, Field(default=False)]]
    effective_paused: NotRequired[Annotated[bool, Field(default=False)]]
    paused_by_task_id: NotRequired[Annotated[str | None, Field(default=None)]]
    children: NotRequired[Annotated["Children | None", Field(default=None)]]
    # Usage summed over its leases; the lease that filed it, and whether its
    # endings wake that lease.
    usage: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]
    created_by_lease_id: NotRequired[Annotated[str | None, Field(default=None)]]
    wake_creator: NotRequired[Annotated[bool, Field(default=False)]]
    approval: NotRequired[Annotated["ApprovalOut | None", Field(default=None)]]
    concurrency_key: NotRequired[Annotated[str | None, Field(default=None)]]


@answer
class ApprovalOut(TypedDict):
    state: Literal["requested", "approved", "rejected"]
    requested_at: Stamp
    pool: NotRequired[Annotated[str | None, Field(default=None)]]
    by: NotRequired[Annotated[str | None, Field(default=None)]]
    at: NotRequired[Annotated[Stamp, Field(default=None)]]
    note: NotRequired[Annotated[str | None, Field(default=None)]]


# TaskOut names BlockedReason, Children and ApprovalOut: a deferred model resolves such names
# from its module when it is first built, so no model_rebuild() is called here (it would build
# them at import, deferred or not).


@answer
class TaskAnswer(TypedDict):
    task: TaskOut
    lease: LeaseOut | None


@answer
class TaskList(TypedDict):
    """A page of a space's tasks, newest first; each with its open lease, or else its newest
    (an ended one), or null when it never had one."""

    tasks: list[TaskAnswer]
    next_cursor: str | None


@answer
class EventOut(TypedDict):
    type: str
    at: Stamp
    lease_id: str | None
    fence: int | None
    data: dict[str, Any]


@answer
class Activity(TypedDict):
    events: list[EventOut]
    next_cursor: str | None


class TaskPatch(Strict):
    auto_enqueue_on_ready: bool | None = None
    pool: Name | None = None
    # Replaces the task's blockers with these ([] removes them all).
    depends_on: Annotated[list[TaskId], Field(max_length=MAX_DEPENDS_ON)] | None = None

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.auto_enqueue_on_ready is None and self.pool is None and self.depends_on is None:
            raise ValueError(
                "name auto_enqueue_on_ready, pool or depends_on (auto_enqueue_on_ready)"
            )
        return self


@answer
class BlockedReason(TypedDict):
    source: Literal["dependency", "approval", "paused", "block"]
    depends_on_task_ids: NotRequired[Annotated[list[str] | None, Field(default=None)]]
    requested_at: NotRequired[Annotated[Stamp, Field(default=None)]]
    paused_by_task_id: NotRequired[Annotated[str | None, Field(default=None)]]
    block_id: NotRequired[Annotated[str | None, Field(default=None)]]
    kind: NotRequired[Annotated[str | None, Field(default=None)]]
    reason: NotRequired[Annotated[str | None, Field(default=None)]]


@answer
class Children(TypedDict):
    total: int
    completed: int


class TaskApprove(Strict):
    note: str | None = Field(default=None, max_length=2000)


class TaskReject(Strict):
    # Required: why the work is not to be done.
    note: str = Field(min_length=1, max_length=2000)


class TaskCancel(Strict):
    # Required: why the work is to stop; recorded on each task the cancel reaches.
    reason: str = Field(min_length=1, max_length=500)
    subtree: bool = False


@answer
class TaskCancelled(TypedDict):
    """What one cancel request did: the tasks it ended itself (the task, and with `subtree`
    the descendants it reached), and the descendants it knows of that the background walk
    still has to reach."""

    cancelled: int
    remaining: int
