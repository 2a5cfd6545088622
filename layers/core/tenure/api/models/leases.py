"""Leases and the worker's calls on them: claim, heartbeats, reports; how a lease reads,
the claim's answer, the work bundle, and the workers list."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    Field,
    StringConstraints,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    ClaimId,
    Document,
    ErrorDetail,
    ErrorEnvelope,
    Fence,
    Host,
    LeaseSeconds,
    Name,
    ReportId,
    Stamp,
    Strict,
    WorkerId,
    answer,
    open_answer,
)
from tenure.domain.model import (
    DEFAULT_PRIORITY,
)
from tenure.domain.signals import SIGNAL_MAX
from tenure.domain.states import EndReason, LeaseState, Revoke, SubjectKind


class RuntimeState(Strict):
    state: Literal["ok", "refusing"]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class CredentialsState(Strict):
    state: Literal["ok", "unreachable"]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class Claim(Strict):
    worker_id: WorkerId
    worker_version: Annotated[str, StringConstraints(max_length=128)] | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=20)] = 0
    lease_seconds: LeaseSeconds | None = None
    claim_id: ClaimId | None = None
    host: Host | None = None
    # That pending lease or nothing (204); 409 when it is held or has ended.
    lease_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = None
    # The worker starts the job as soon as it has the answer: the lease is claimed running,
    # its first heartbeat with nothing to write. Where the lease's timeline cannot hold both
    # transitions on its row (a lease made before timeline stamps, a workflow's or a space's
    # lease) it is claimed dispatched, as without it, and its first heartbeat starts it.
    start: bool = False


class Heartbeat(Strict):
    lease_seconds: LeaseSeconds | None = None


class LeaseFence(Strict):
    id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    fence: Fence


# The leases one worker heartbeat renews: its own route's body, or a final report's
# `heartbeat` (the worker's other leases, renewed in the report's call).
BeatLeases = Annotated[list[LeaseFence], Field(max_length=100)]


class WorkerHeartbeat(Strict):
    leases: BeatLeases
    # How the worker's runtime and credential source stand, noted for the pools
    # of the leases above and for `pool` (a worker holding nothing names its pool here).
    runtime: RuntimeState | None = None
    credentials: CredentialsState | None = None
    pool: Name | None = None
    # What the last answer's `signal` was ("" before the first): the answer then carries the
    # next one, and the leases it vouches for are not read while nothing happened to them.
    # Left out, every lease is read (and the answer carries no signal).
    signal: Annotated[str, StringConstraints(max_length=SIGNAL_MAX)] | None = None


class NextClaim(Strict):
    """The claim a final report may carry (a request saved): the next lease of the same pool, for
    the same worker, claimed in the same call. It is acted on only when the report is sent with
    the worker token that claimed the lease (`worker_id` the one it claimed with), and the claim
    runs as that token; sent with the lease token, which the job holds too, the report claims
    nothing and answers `next: null`. `claim_id` is required: a report resent because its
    answer was lost carries the same claim and gets the same next lease back; a resend with
    another `claim_id` claims nothing."""

    worker_id: WorkerId
    claim_id: ClaimId
    worker_version: Annotated[str, StringConstraints(max_length=128)] | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=20)] = 0
    lease_seconds: LeaseSeconds | None = None
    host: Host | None = None
    start: bool = False  # as the claim's own `start`


class Complete(Strict):
    outcome: Literal["success", "failure"] = "success"
    details: Annotated[dict[str, Any] | None, Document] = None
    result: Annotated[Any, Document] = None
    usage: Annotated[dict[str, Any] | None, Document] = None
    created_task_ids: Annotated[list[str], Field(max_length=100)] | None = None
    report_id: ReportId | None = None
    fence: Fence | None = None
    next: NextClaim | None = None  # claim the worker's next lease in the same call
    # With `next` (the worker token): the worker's other leases, renewed after the report as
    # its worker heartbeat renews them; a lease token may not send it.
    heartbeat: BeatLeases | None = None


class Fail(Strict):
    error: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    metadata: Annotated[dict[str, Any] | None, Document] = None
    usage: Annotated[dict[str, Any] | None, Document] = None  # what it used, as on complete
    report_id: ReportId | None = None
    fence: Fence | None = None
    next: NextClaim | None = None  # claim the worker's next lease in the same call
    heartbeat: BeatLeases | None = None  # as on complete
    # False: the failure is final, even where the pool retries failures.
    retryable: bool | None = None


class Release(Strict):
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None
    report_id: ReportId | None = None
    fence: Fence | None = None


@answer
class TaskRef(TypedDict):
    id: str
    key: str | None


@answer
class WorkflowRef(TypedDict):
    slug: str


@answer
class LeaseTiming(TypedDict):
    created_at: Stamp
    claimed_at: Stamp
    started_at: Stamp
    last_heartbeat_at: Annotated[
        Stamp,
        Field(
            description="The last heartbeat that moved the deadline (deadline writes are up to "
            "half a toleration apart, so it may lag the latest heartbeat by that much)."
        ),
    ]
    deadline: Stamp
    not_before: Stamp
    ended_at: Stamp
    renew_seconds: int | None
    lease_seconds: int | None
    # Its queue timeout: pending past this instant, it ends queue_timeout (null: none).
    queue_expires_at: NotRequired[Annotated[Stamp, Field(default=None)]]
    # Its run timeout runs out at this instant (null: none, or not claimed yet).
    run_deadline: NotRequired[Annotated[Stamp, Field(default=None)]]


QueuedCode = Literal[
    "pool_paused",
    "space_archived",
    "runtime_refusing",
    "token_pool_unreachable",
    "waiting_until",
    "instance_full",
    "space_full",
    "pool_full",
    "key_full",
    "rate_limited",
    "starting",
    "awaiting_agent",
]
FailureKind = Literal["operator_forced"]


@answer
class QueuedConditionOut(TypedDict):
    code: QueuedCode
    label: str
    needs_person: bool


@answer
class LeaseOut(TypedDict):
    id: str
    state: LeaseState
    attempt: int
    fence: int
    space: str
    pool: str
    subject_kind: SubjectKind
    task: TaskRef | None
    workflow: WorkflowRef | None
    job_id: str
    # Claim order, 0-9: higher first, oldest first within a priority.
    priority: NotRequired[Annotated[int, Field(default=DEFAULT_PRIORITY)]]
    # Its run timeout: once claimed, the smaller of its run's and its pool's (null: none).
    max_run_seconds: NotRequired[Annotated[int | None, Field(default=None)]]
    worker_id: str | None
    worker_version: str | None
    queued_condition: QueuedConditionOut | None
    revoke: Revoke | None
    end_reason: EndReason | None
    outcome: str | None
    # Once ended, as the final report said (null before): result and details of a
    # completion, the error of a failure.
    result: NotRequired[Annotated[Any, Field(default=None)]]
    details: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]
    error: NotRequired[Annotated[str | None, Field(default=None)]]
    claim_token_hash_truncated: str | None
    timing: LeaseTiming
    # Its logs and attachments were reclaimed after the pool's retention (deleted by the
    # sweeper, or, for a lease that had neither, by derivation: its end plus the retention).
    reclaimed: bool
    reclaimed_at: Stamp
    previous_lease_id: NotRequired[Annotated[str | None, Field(default=None)]]
    retry_depth: NotRequired[Annotated[int, Field(default=0)]]
    failure_kind: NotRequired[Annotated[FailureKind | None, Field(default=None)]]
    usage: NotRequired[
        Annotated[dict[str, Any] | None, Field(default=None)]
    ]  # what its completion reported, cost resolved
    concurrency_key: NotRequired[Annotated[str | None, Field(default=None)]]


@answer
class LeaseAnswer(TypedDict):
    lease: LeaseOut


@answer
class ReportAnswer(TypedDict):
    """A final report's answer: `next` only when the report carried a claim (null: nothing
    was claimable once its wait_seconds had passed); `heartbeat` only when it carried one:
    one item per lease as the worker heartbeat answers them, or `{error}` when the heartbeat
    as a whole was refused (the report stands either way)."""

    lease: LeaseOut
    next: NotRequired[Annotated["Claimed | None", Field(default=None)]]
    heartbeat: NotRequired[Annotated["list[BeatRow] | ErrorEnvelope", Field(default=None)]]


@answer
class LeasePage(TypedDict):
    leases: list[LeaseOut]
    next_cursor: str | None


@answer
class Claimed(TypedDict):
    lease: LeaseOut
    token: str
    fence: int
    claim_token_hash: str | None
    renew_seconds: int
    keeps_logs: bool  # whether the worker should ship the job's output
    # The work bundle as GET /leases/{id}/payload answers it, so a worker needs no
    # second request; null when it could not be read at claim time (then GET it).
    payload: NotRequired[Annotated["Payload | None", Field(default=None)]]


@answer
class Beat(TypedDict):
    state: LeaseState
    deadline: Stamp
    revoke: Revoke | None


@answer
class BeatRow(TypedDict):
    """One lease of a worker's heartbeat: its beat, or the error that lease alone met."""

    id: str
    fence: int
    state: NotRequired[Annotated[LeaseState | None, Field(default=None)]]
    deadline: NotRequired[Annotated[Stamp, Field(default=None)]]
    revoke: NotRequired[Annotated[Revoke | None, Field(default=None)]]
    error: NotRequired[Annotated[ErrorDetail | None, Field(default=None)]]


@answer
class WorkerBeat(TypedDict):
    leases: list[BeatRow]
    signal: NotRequired[str]  # only when the heartbeat sent one: echo it in the next


@answer
class HeldLease(TypedDict):
    id: str
    state: LeaseState
    fence: int
    deadline: Stamp


@answer
class WorkerOut(TypedDict):
    worker_id: str
    worker_version: str | None
    pool: str
    last_seen: Stamp
    status: Literal["reachable", "unreachable"]
    leases: list[HeldLease]
    runtime: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]
    credentials: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]


@answer
class Workers(TypedDict):
    workers: list[WorkerOut]
    next_cursor: str | None  # null on the last page


@open_answer
class Payload(TypedDict):
    """The work bundle: open, since each subject kind brings fields of its own."""

    lease: LeaseOut
    subject: dict[str, Any]
    kind: str


@answer
class ExecTarget(TypedDict):
    """Where a lease runs; never its payload, environment, token or token hash."""

    lease_id: str
    state: LeaseState
    pool: str
    kind: Literal["agent", "classifier", "command"]
    worker_id: str | None
    worker_version: str | None
    claimed_at: Stamp
    host: str | None
