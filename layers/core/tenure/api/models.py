"""Request and response bodies: what every route validates against and the OpenAPI document
shows (the response models describe what api/views.py renders)."""

# No `from __future__ import annotations` here: pydantic would then compile and evaluate some
# 360 annotation strings when the function starts (~20 ms of a cold start); a name defined
# further down is quoted instead.
import json
import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)

from tenure.domain import documents
from tenure.domain.model import (
    DEFAULT_ATTACHMENT_QUOTA_BYTES,
    DEFAULT_MAX_DELEGATED_PER_LEASE,
    DEFAULT_MAX_DELEGATED_PER_TREE,
    DEFAULT_PRIORITY,
    DEFAULT_RETENTION_SECONDS,
    MAX_LEASE_SECONDS,
    MAX_PRIORITY,
    MIN_LEASE_SECONDS,
    MIN_PRIORITY,
)
from tenure.domain.states import EndReason, LeaseState, Revoke, SubjectKind, TaskStatus


def _integral(value: Any) -> Any:
    """JSON Schema counts 40.0 as an integer, so a client's encoder may send it: take it as 40.
    40.5 stays a float and is refused; strings and booleans are untouched and refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Every integer field carries this marker, last: a validator placed before the bounds would
# leave pydantic unable to write the bounds into the JSON Schema as minimum/maximum.
Integral = BeforeValidator(_integral)

SpaceKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")]
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]
WorkerId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]


def _trimmed(value: str) -> str:
    """A title less the blanks around it; all blank is no title. Trimmed after the length is
    checked, so 501 characters stay refused as the document's maxLength says, blanks or not."""
    value = value.strip()
    if not value:
        raise ValueError("must not be blank")
    return value


Title = Annotated[str, StringConstraints(min_length=1, max_length=500), AfterValidator(_trimmed)]
Text = Annotated[str, StringConstraints(max_length=65536)]
ReportId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
LeaseSeconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS), Integral]
Seconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS), Integral]
Positive = Annotated[int, Field(ge=1), Integral]
# Bytes of attachments one lease may add: at least one byte, at most 1 TiB.
AttachmentQuota = Annotated[int, Field(ge=1, le=1024**4), Integral]
Attempts = Annotated[int, Field(ge=1, le=100), Integral]
Fence = Annotated[int, Field(ge=1), Integral]
ClaimId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TaskId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Host = Annotated[str, StringConstraints(max_length=255)]
# Keyed concurrency: 1 to 128 characters, none of them a control character.
ConcurrencyKey = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")
]
# Keyed concurrency and the rate limit: null (or left out) is unlimited.
PerKey = Annotated[int, Field(ge=1, le=10_000), Integral]
PerMinute = Annotated[int, Field(ge=1, le=1_000_000), Integral]
# Delegation's bounds (a null puts the default back): tasks one lease token may file, and
# tasks one tree of delegation may hold.
PerLease = Annotated[int, Field(ge=1, le=10_000), Integral]
PerTree = Annotated[int, Field(ge=1, le=1_000_000), Integral]

# A JSON document a caller may attach (details, result, properties…) stays well inside an item.
MAX_DOCUMENT_BYTES = 32 * 1024


def _bounded(value: Any, field: str) -> Any:
    if value is None:
        return value
    wrong = documents.problem(value)  # first: the size below is measured by recursion
    if wrong:
        raise ValueError(wrong)
    if len(json.dumps(value)) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"is larger than {MAX_DOCUMENT_BYTES} bytes of JSON")
    _storable_numbers(value, field)
    return value


def _storable_numbers(value: Any, field: str) -> None:
    """DynamoDB keeps numbers to 38 digits and has no NaN or infinity: refuse them here."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"holds a number that is not finite ({field})")
    if isinstance(value, int | float) and value != 0 and not 1e-129 < abs(value) < 1e125:
        raise ValueError(f"holds a number out of the storable range ({field})")
    if isinstance(value, int) and len(str(abs(value))) > 38:
        raise ValueError(f"holds a number with more than 38 digits ({field})")
    if isinstance(value, dict):
        for item in value.values():
            _storable_numbers(item, field)
    elif isinstance(value, list):
        for item in value:
            _storable_numbers(item, field)


# Every model here defers building its validator to its first use (pydantic's defer_build):
# one request validates one or two of them, and building all ~90 when the function starts
# cost the API's cold start ~80 ms (`tenure bench coldstart`). Validation is the same.


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class SpaceCreate(Strict):
    key: SpaceKey
    name: Title
    max_active: Positive | None = None


class WorkflowCreate(Strict):
    space: SpaceKey
    slug: Slug
    name: Title
    description: Text | None = None


class AgentSettings(Strict):
    """What an agent pool's version hands its workers."""

    model: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    effort: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None


Expressions = Annotated[
    dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")], Text],
    Field(max_length=100),
]


class ClassifierOutput(Strict):
    """JMESPath expressions over the classifier's reported details, by the name they set."""

    checks: Expressions | None = None
    properties: Expressions | None = None


class ClassifierSettings(Strict):
    """The input document a classifier reads verbatim, and how its answers are rendered."""

    input: dict[str, Any] = Field(default_factory=dict)
    output: ClassifierOutput = Field(default_factory=ClassifierOutput)

    _input = field_validator("input")(lambda v: _bounded(v, "classifier.input"))


class RetryBackoff(Strict):
    initial_seconds: Annotated[int, Field(ge=1, le=86_400), Integral] = 10
    multiplier: Annotated[float, Field(ge=1, le=10)] = 2
    max_seconds: Annotated[int, Field(ge=1, le=86_400), Integral] = 600
    jitter: bool = True

    @model_validator(mode="after")
    def _bounded_by_max(self) -> Self:
        if self.max_seconds < self.initial_seconds:
            raise ValueError("retry.backoff.max_seconds must be at least initial_seconds")
        return self


class RetrySettings(Strict):
    """With on_failure, a failed lease with attempts left gets its next attempt at once,
    claimable after the backoff."""

    on_failure: bool = False
    backoff: RetryBackoff = Field(default_factory=RetryBackoff)


# A run timeout: at most 30 days.
RunSeconds = Annotated[int, Field(ge=1, le=30 * 86_400), Integral]


class PoolCreate(Strict):
    name: Name
    space: SpaceKey
    kind: Literal["agent", "classifier", "command"]
    display_name: Title | None = None
    agent: AgentSettings | None = None
    classifier: ClassifierSettings | None = None
    max_active: Positive | None = None
    renew_seconds: Seconds = 10
    grace_seconds: Seconds = 50
    toleration_seconds: Seconds = 300
    on_expiry: Literal["requeue", "fail"] = "requeue"
    keeps_logs: bool = True
    retention_seconds: Annotated[int, Field(ge=1, le=10 * 365 * 86_400), Integral] = (
        DEFAULT_RETENTION_SECONDS
    )
    attachment_quota_bytes: AttachmentQuota = DEFAULT_ATTACHMENT_QUOTA_BYTES
    # Starvation: queued this long with no reachable worker, a claimable lease is starved;
    # starved this much longer, the sweeper parks its task in needs_attention.
    min_queued_age_seconds: Annotated[int, Field(ge=1, le=31_536_000), Integral] = 600
    starvation_escalation_seconds: Annotated[int, Field(ge=1, le=31_536_000), Integral] = 3600
    # Per-million-token prices: {currency, input_tokens?, output_tokens?, …}.
    rates: dict[str, Any] | None = None
    accepts_delegation_from: Annotated[list[Name], Field(max_length=50)] = Field(
        default_factory=list
    )
    # How many tasks one of this pool's lease tokens may file, and how many a tree of
    # delegation may hold when one of them files.
    max_delegated_per_lease: PerLease = DEFAULT_MAX_DELEGATED_PER_LEASE
    max_delegated_per_tree: PerTree = DEFAULT_MAX_DELEGATED_PER_TREE
    retry: RetrySettings = Field(default_factory=RetrySettings)
    # At most this many held leases per task concurrency_key; at most this many claims in a
    # UTC minute (null: unlimited).
    max_active_per_key: PerKey | None = None
    max_claims_per_minute: PerMinute | None = None
    # Run timeout: a lease held longer is asked to stop and ends timed_out (null: none).
    max_run_seconds: RunSeconds | None = None

    @model_validator(mode="after")
    def _timings_ordered(self) -> Self:
        if self.grace_seconds < self.renew_seconds:
            raise ValueError("grace_seconds must be at least renew_seconds")
        if self.toleration_seconds < self.grace_seconds:
            raise ValueError("toleration_seconds must be at least grace_seconds")
        return self


class PoolPatch(Strict):
    """Only the fields sent change; a null resets that setting to its default (max_active:
    unlimited, display_name: the pool's name, agent/classifier: none)."""

    display_name: Title | None = None
    max_active: Positive | None = None
    renew_seconds: Seconds | None = None
    grace_seconds: Seconds | None = None
    toleration_seconds: Seconds | None = None
    on_expiry: Literal["requeue", "fail"] | None = None
    keeps_logs: bool | None = None
    retention_seconds: Annotated[int, Field(ge=1, le=10 * 365 * 86_400), Integral] | None = None
    attachment_quota_bytes: AttachmentQuota | None = None
    agent: AgentSettings | None = None
    classifier: ClassifierSettings | None = None
    rates: dict[str, Any] | None = None
    accepts_delegation_from: Annotated[list[Name], Field(max_length=50)] | None = None
    max_delegated_per_lease: PerLease | None = None
    max_delegated_per_tree: PerTree | None = None
    retry: RetrySettings | None = None
    max_active_per_key: PerKey | None = None
    max_claims_per_minute: PerMinute | None = None
    max_run_seconds: RunSeconds | None = None


class InstancePatch(Strict):
    """Only the fields sent change; a null max_active is unlimited, other nulls the default."""

    max_active: Positive | None = None
    # The breaker: the block that brings its kind's count on a task to this escalates the
    # task to needs_attention; 0 turns it off.
    block_recurrence_limit: Annotated[int, Field(ge=0, le=100), Integral] | None = None
    allow_agent_force: bool | None = None
    retry_chain_cap: Annotated[int, Field(ge=1, le=100), Integral] | None = None
    # How long an event is kept to clear blocks placed after it arrived: up to 30 days.
    event_ttl_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None


class RuntimeState(Strict):
    state: Literal["ok", "refusing"]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class CredentialsState(Strict):
    state: Literal["ok", "unreachable"]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class TokenCreate(Strict):
    name: Name
    kind: Literal["operator", "worker"]
    role: Literal["read", "member", "admin"] | None = None
    spaces: Annotated[list[SpaceKey], Field(min_length=1, max_length=100)] | None = None
    pools: Annotated[list[Name], Field(min_length=1, max_length=100)] | None = None
    # At most ten years; none: the token lasts until it is revoked.
    expires_in_seconds: Annotated[int, Field(ge=1, le=10 * 366 * 24 * 3600), Integral] | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> Self:
        if self.kind == "worker" and (self.role is not None or self.spaces is not None):
            raise ValueError("role and spaces are for operator tokens; a worker token has pools")
        if self.kind == "operator" and self.pools is not None:
            raise ValueError("pools are for worker tokens; an operator token has spaces")
        return self


def _instant(value: str | None) -> str | None:
    """An ISO-8601 time with its offset (`Z` or `+hh:mm`), as `not_before` takes it."""
    if value is None:
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO-8601 time such as 2026-12-01T09:00:00Z") from None
    if parsed.tzinfo is None:
        raise ValueError("must carry its offset (Z or +hh:mm)")
    return value


def instant_ms(value: str) -> int:
    return int(datetime.fromisoformat(value).timestamp() * 1000)


# The longest ttl_seconds a delegated task may ask for (a week).
MAX_TTL_SECONDS = 7 * 86_400


# Claim priority: higher first; a lease filed without one is at the default.
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY), Integral]
# Queue timeout: a pending lease not claimed this many seconds after it became claimable
# ends cancelled (queue_timeout). At most a year.
MAX_QUEUE_TIMEOUT_SECONDS = 366 * 86_400
ExpiresIn = Annotated[int, Field(ge=1, le=MAX_QUEUE_TIMEOUT_SECONDS), Integral]


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
    depends_on: Annotated[list[TaskId], Field(max_length=50)] = Field(default_factory=list)
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


class WorkerHeartbeat(Strict):
    leases: Annotated[list[LeaseFence], Field(max_length=100)]
    # How the worker's runtime and credential source stand, noted for the pools
    # of the leases above and for `pool` (a worker holding nothing names its pool here).
    runtime: RuntimeState | None = None
    credentials: CredentialsState | None = None
    pool: Name | None = None


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
    details: dict[str, Any] | None = None
    result: Any = None
    usage: dict[str, Any] | None = None
    created_task_ids: Annotated[list[str], Field(max_length=100)] | None = None
    report_id: ReportId | None = None
    fence: Fence | None = None
    next: NextClaim | None = None  # claim the worker's next lease in the same call

    _docs = field_validator("details", "result", "usage")(
        lambda v, info: _bounded(v, info.field_name)
    )


class Fail(Strict):
    error: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    metadata: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None  # what the failed work used, as on complete
    report_id: ReportId | None = None
    fence: Fence | None = None
    next: NextClaim | None = None  # claim the worker's next lease in the same call
    # False: the failure is final, even where the pool retries failures.
    retryable: bool | None = None

    _docs = field_validator("metadata", "usage")(lambda v, info: _bounded(v, info.field_name))


class Release(Strict):
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None
    report_id: ReportId | None = None
    fence: Fence | None = None


# -------------------------------------------------------------------------- responses
# What api/views.py renders, for the OpenAPI document. Closed (no unknown fields), so a view
# that grows a field without its model fails the schema tests instead of drifting.


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


Stamp = str | None  # an ISO 8601 UTC time with milliseconds, or null


class ErrorDetail(Out):
    code: str
    message: str


class ErrorEnvelope(Out):
    """Every error, whatever its status."""

    error: ErrorDetail


class Health(Out):
    status: Literal["ok"]


class OpenAPIDocument(BaseModel):
    """This document (OpenAPI 3.1)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


class TaskRef(Out):
    id: str
    key: str | None


class WorkflowRef(Out):
    slug: str


class LeaseTiming(Out):
    created_at: Stamp
    claimed_at: Stamp
    started_at: Stamp
    last_heartbeat_at: Stamp = Field(
        description="The last heartbeat that moved the deadline (deadline writes are up to "
        "half a toleration apart, so it may lag the latest heartbeat by that much)."
    )
    deadline: Stamp
    not_before: Stamp
    ended_at: Stamp
    renew_seconds: int | None
    lease_seconds: int | None
    # Its queue timeout: pending past this instant, it ends queue_timeout (null: none).
    queue_expires_at: Stamp = None
    # Its run timeout runs out at this instant (null: none, or not claimed yet).
    run_deadline: Stamp = None


class QueuedConditionOut(Out):
    code: Literal[
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
    label: str
    needs_person: bool


class LeaseOut(Out):
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
    priority: int = DEFAULT_PRIORITY
    # Its run timeout: once claimed, the smaller of its run's and its pool's (null: none).
    max_run_seconds: int | None = None
    worker_id: str | None
    worker_version: str | None
    queued_condition: QueuedConditionOut | None
    revoke: Revoke | None
    end_reason: EndReason | None
    outcome: str | None
    # Once ended, as the final report said (null before): result and details of a
    # completion, the error of a failure.
    result: Any = None
    details: dict[str, Any] | None = None
    error: str | None = None
    claim_token_hash_truncated: str | None
    timing: LeaseTiming
    # Its logs and attachments were reclaimed after the pool's retention (deleted by the
    # sweeper, or, for a lease that had neither, by derivation: its end plus the retention).
    reclaimed: bool
    reclaimed_at: Stamp
    previous_lease_id: str | None = None
    retry_depth: int = 0
    failure_kind: Literal["operator_forced"] | None = None
    usage: dict[str, Any] | None = None  # what its completion reported, cost resolved
    concurrency_key: str | None = None


class LeaseAnswer(Out):
    lease: LeaseOut


class ReportAnswer(Out):
    """A final report's answer: `next` only when the report carried a claim (null: nothing
    was claimable once its wait_seconds had passed)."""

    lease: LeaseOut
    next: "Claimed | None" = None


class LeasePage(Out):
    leases: list[LeaseOut]
    next_cursor: str | None


class TaskOut(Out):
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
    checks: dict[str, Any] = Field(default_factory=dict)
    # The scheduling controls its runs take unless an enqueue names its own.
    priority: int = DEFAULT_PRIORITY
    expires_in_seconds: int | None = None
    max_run_seconds: int | None = None
    parent_id: str | None = None
    depends_on: list[str] = []
    auto_enqueue_on_ready: bool = False
    pool: str | None = None
    paused: bool = False
    effective_paused: bool = False
    paused_by_task_id: str | None = None
    children: "Children | None" = None
    # Usage summed over its leases; the lease that filed it, and whether its
    # endings wake that lease.
    usage: dict[str, Any] | None = None
    created_by_lease_id: str | None = None
    wake_creator: bool = False
    approval: "ApprovalOut | None" = None
    concurrency_key: str | None = None


class ApprovalOut(Out):
    state: Literal["requested", "approved", "rejected"]
    requested_at: Stamp
    pool: str | None = None
    by: str | None = None
    at: Stamp = None
    note: str | None = None


class TaskAnswer(Out):
    task: TaskOut
    lease: LeaseOut | None


class TaskList(Out):
    """A page of a space's tasks, newest first; each with its open lease, or else its newest
    (an ended one), or null when it never had one."""

    tasks: list[TaskAnswer]
    next_cursor: str | None


class EventOut(Out):
    type: str
    at: Stamp
    lease_id: str | None
    fence: int | None
    data: dict[str, Any]


class Activity(Out):
    events: list[EventOut]
    next_cursor: str | None


class SpaceOut(Out):
    key: str
    name: str
    max_active: int | None
    archived: bool
    created_at: Stamp


class SpaceList(Out):
    spaces: list[SpaceOut]  # by key
    next_cursor: str | None  # null on the last page


class WorkflowOut(Out):
    space: str
    slug: str
    name: str
    description: str | None
    created_at: Stamp


class PoolOut(Out):
    name: str
    space: str
    kind: Literal["agent", "classifier", "command"]
    display_name: str
    version: int
    agent: dict[str, Any] | None
    classifier: dict[str, Any] | None
    active: int | None
    max_active: int | None
    renew_seconds: int
    grace_seconds: int
    toleration_seconds: int
    on_expiry: Literal["requeue", "fail"]
    keeps_logs: bool
    paused: bool
    created_at: Stamp
    retention_seconds: int
    attachment_quota_bytes: int
    min_queued_age_seconds: int = 600
    starvation_escalation_seconds: int = 3600
    rates: dict[str, Any] | None = None
    accepts_delegation_from: list[str] = []
    max_delegated_per_lease: int = DEFAULT_MAX_DELEGATED_PER_LEASE
    max_delegated_per_tree: int = DEFAULT_MAX_DELEGATED_PER_TREE
    retry: RetrySettings = Field(default_factory=RetrySettings)
    max_active_per_key: int | None = None
    max_claims_per_minute: int | None = None
    max_run_seconds: int | None = None


class PoolAnswer(Out):
    pool: PoolOut


class Pools(Out):
    pools: list[PoolOut]
    next_cursor: None = None  # always null: a space has at most the instance's pool cap


class SpaceAnswer(Out):
    space: SpaceOut


class InstanceOut(Out):
    max_active: int | None
    block_recurrence_limit: int
    allow_agent_force: bool
    retry_chain_cap: int
    event_ttl_seconds: int
    active: int


class TokenOut(Out):
    """The token itself is shown here once, and never again."""

    id: str
    name: str
    kind: Literal["operator", "worker"]
    role: Literal["read", "member", "admin"] | None
    spaces: list[str] | None
    pools: list[str] | None
    created_at: Stamp
    expires_at: Stamp
    token: str


class TokenInfo(Out):
    """A token as the list shows it: never the token, never its hash."""

    id: str
    name: str
    kind: Literal["operator", "worker"]
    role: Literal["read", "member", "admin"] | None
    spaces: list[str] | None
    pools: list[str] | None
    created_at: Stamp
    expires_at: Stamp
    last_used_at: Stamp  # may lag by up to a minute
    revoked_at: Stamp


class TokenList(Out):
    tokens: list[TokenInfo]
    next_cursor: str | None  # null on the last page


class Claimed(Out):
    lease: LeaseOut
    token: str
    fence: int
    claim_token_hash: str | None
    renew_seconds: int
    keeps_logs: bool  # whether the worker should ship the job's output
    # The work bundle as GET /leases/{id}/payload answers it, so a worker needs no
    # second request; null when it could not be read at claim time (then GET it).
    payload: "Payload | None" = None


class Beat(Out):
    state: LeaseState
    deadline: Stamp
    revoke: Revoke | None


class BeatRow(Out):
    """One lease of a worker's heartbeat: its beat, or the error that lease alone met."""

    id: str
    fence: int
    state: LeaseState | None = None
    deadline: Stamp = None
    revoke: Revoke | None = None
    error: ErrorDetail | None = None


class WorkerBeat(Out):
    leases: list[BeatRow]


class HeldLease(Out):
    id: str
    state: LeaseState
    fence: int
    deadline: Stamp


class WorkerOut(Out):
    worker_id: str
    worker_version: str | None
    pool: str
    last_seen: Stamp
    status: Literal["reachable", "unreachable"]
    leases: list[HeldLease]
    runtime: dict[str, Any] | None = None
    credentials: dict[str, Any] | None = None


class Workers(Out):
    workers: list[WorkerOut]
    next_cursor: str | None  # null on the last page


class Payload(BaseModel):
    """The work bundle: open, since each subject kind brings fields of its own."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    lease: LeaseOut
    subject: dict[str, Any]
    kind: str


# ------------------------------------------------------ logs, attachments, coordinates

Container = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
MAX_LOG_EVENTS = 1000
MAX_LOG_BYTES = 256 * 1024
# Each container is a log stream: one batch makes at most this many (app/artifacts/logs.py).
MAX_BATCH_CONTAINERS = 8


class LogEventIn(Strict):
    # ISO 8601 (as the logs read back) or epoch milliseconds; absent: when it arrived.
    timestamp: str | Annotated[int, Field(ge=0, le=10**14), Integral] | None = None
    container: Container = "main"
    stream: Literal["stdout", "stderr"]
    message: Annotated[str, StringConstraints(max_length=MAX_LOG_BYTES)]

    @field_validator("timestamp")
    @classmethod
    def _as_ms(cls, value: Any) -> Any:
        if isinstance(value, str):
            ms = parse_time(value)
            if ms is None:
                raise ValueError("is not an ISO 8601 time (or epoch milliseconds)")
            return ms
        return value


class LogBatch(Strict):
    events: Annotated[list[LogEventIn], Field(min_length=1, max_length=MAX_LOG_EVENTS)]

    @model_validator(mode="after")
    def _bounded_bytes(self) -> Self:
        size = sum(len(e.message.encode()) for e in self.events)
        if size > MAX_LOG_BYTES:
            raise ValueError(
                f"events: the messages hold {size} bytes, more than the {MAX_LOG_BYTES} "
                "(256 KB) one batch may carry"
            )
        containers = {e.container for e in self.events}
        if len(containers) > MAX_BATCH_CONTAINERS:
            raise ValueError(
                f"events: name {len(containers)} containers; one batch may name at most "
                f"{MAX_BATCH_CONTAINERS}"
            )
        return self


def parse_time(text: str) -> int | None:
    """Epoch ms of an ISO 8601 time (a time without a zone is UTC), or None."""
    try:
        stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)


class AttachmentCreate(Strict):
    filename: Annotated[
        str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f/\\]+$")
    ]
    content_type: Annotated[
        str,
        StringConstraints(
            max_length=255, pattern=r"^[A-Za-z0-9][\w.+-]*/[\w.+-]+(;[ \w.+=\"-]*)*$"
        ),
    ]
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")] = "file"
    byte_size: Annotated[int, Field(ge=0), Integral] | None = None
    # Small files inline (at most 1 MiB once decoded); leave out for an upload URL.
    content_base64: str | None = None


class LogEventOut(Out):
    timestamp: Stamp
    container: str
    stream: Literal["stdout", "stderr"]
    message: str


class Logs(Out):
    events: list[LogEventOut]
    truncated: bool
    next_cursor: str | None


class LogsAccepted(Out):
    accepted: int


class AttachmentOut(Out):
    id: str
    kind: str
    filename: str
    content_type: str
    byte_size: int
    created_at: Stamp


class UploadOut(Out):
    """A presigned S3 PUT: send exactly `headers` and the declared bytes, within 15 minutes."""

    url: str
    method: Literal["PUT"]
    headers: dict[str, str]


class AttachmentAnswer(Out):
    attachment: AttachmentOut
    upload: UploadOut | None = None  # absent when the bytes came inline


class Attachments(Out):
    attachments: list[AttachmentOut]
    next_cursor: None = None  # always null: a lease's attachments are capped


class ExecTarget(Out):
    """Where a lease runs; never its payload, environment, token or token hash."""

    lease_id: str
    state: LeaseState
    pool: str
    kind: Literal["agent", "classifier", "command"]
    worker_id: str | None
    worker_version: str | None
    claimed_at: Stamp
    host: str | None


# ------------------------------------------------ the task graph, the scheduler, recovery


class TaskPatch(Strict):
    auto_enqueue_on_ready: bool | None = None
    pool: Name | None = None
    # Replaces the task's blockers with these ([] removes them all).
    depends_on: Annotated[list[TaskId], Field(max_length=50)] | None = None

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.auto_enqueue_on_ready is None and self.pool is None and self.depends_on is None:
            raise ValueError(
                "name auto_enqueue_on_ready, pool or depends_on (auto_enqueue_on_ready)"
            )
        return self


class Drain(Strict):
    timeout_seconds: Annotated[float, Field(ge=0, le=20)] = 0


class BulkRelease(Strict):
    lease_ids: Annotated[list[TaskId], Field(min_length=1, max_length=100)]
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None


class BulkFail(Strict):
    lease_ids: Annotated[list[TaskId], Field(min_length=1, max_length=100)]
    reason: Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]


class BlockedReason(Out):
    source: Literal["dependency", "approval", "paused", "block"]
    depends_on_task_ids: list[str] | None = None
    requested_at: Stamp = None
    paused_by_task_id: str | None = None
    block_id: str | None = None
    kind: str | None = None
    reason: str | None = None


class Children(Out):
    total: int
    completed: int


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


# TaskOut names BlockedReason and Children, defined further down: a deferred model resolves
# such names from this module when it is first built, so no model_rebuild() is called here
# (it would build these five at import, deferred or not).


# ---------------------------------------------------------------------------- typed blocks


class BlockCreate(Strict):
    kind: Literal["transient", "dependency_external", "needs_input", "error", "event"]
    # Required but for an `event` block, whose reason says what it waits for by default.
    reason: str | None = Field(default=None, min_length=1, max_length=2000)
    expires_in_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None
    # An `event` block waits for this event name and key (each 1-128 characters).
    event: str | None = Field(default=None, min_length=1, max_length=128)
    key: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _kind_fields(self) -> Self:
        if self.kind == "event":
            if self.event is None or self.key is None:
                raise ValueError("an event block names its event and key")
            if self.expires_in_seconds is not None:
                raise ValueError("expires_in_seconds: only a transient block expires")
        elif self.event is not None or self.key is not None:
            raise ValueError("event and key: only an event block waits for an event")
        elif self.reason is None:
            raise ValueError("reason: required")
        return self


class TypedBlockCreate(Strict):
    """`POST /tasks/{id}/blocks` for a typed block: why, in words."""

    kind: Literal["transient", "dependency_external", "needs_input", "error"]
    reason: str = Field(min_length=1, max_length=2000)
    expires_in_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None


class EventBlockCreate(Strict):
    """`POST /tasks/{id}/blocks` for a block that waits for an event's name and key."""

    kind: Literal["event"]
    event: str = Field(min_length=1, max_length=128)
    key: str = Field(min_length=1, max_length=128)
    reason: str | None = Field(default=None, min_length=1, max_length=2000)


def _block_kind(body: Any) -> str:
    return (
        "event_block" if isinstance(body, dict) and body.get("kind") == "event" else "typed_block"
    )


# The route's body: one shape per kind, so the document says exactly what each requires.
BlockBody = Annotated[
    Annotated[TypedBlockCreate, Tag("typed_block")]
    | Annotated[EventBlockCreate, Tag("event_block")],
    Discriminator(_block_kind),
]


class EventSignal(Strict):
    """`POST /events` with `name`: the event blocks of `kind: "event"` wait for."""

    space: SpaceKey
    name: str = Field(min_length=1, max_length=128)
    key: str = Field(min_length=1, max_length=128)
    data: Any = None  # any JSON, at most 65,536 bytes

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, body: Any) -> Any:
        if isinstance(body, dict) and "topic" in body and "name" in body:
            raise ValueError(
                "send topic (an event for rules) or name (an event blocks wait for), not both"
            )
        return body


class SignalAnswer(Out):
    cleared: int  # the blocks this request cleared


class BlockClear(Strict):
    note: str | None = Field(default=None, max_length=2000)


class TaskApprove(Strict):
    note: str | None = Field(default=None, max_length=2000)


class TaskReject(Strict):
    # Required: why the work is not to be done.
    note: str = Field(min_length=1, max_length=2000)


class TaskCancel(Strict):
    # Required: why the work is to stop; recorded on each task the cancel reaches.
    reason: str = Field(min_length=1, max_length=500)
    subtree: bool = False


class TaskCancelled(Out):
    """What one cancel request did: the tasks it ended itself (the task, and with `subtree`
    the descendants it reached), and the descendants it knows of that the background walk
    still has to reach."""

    cancelled: int
    remaining: int


class TaskRecover(Strict):
    # Required, where a clear's note is optional: why it is safe to go on now.
    note: str = Field(min_length=1, max_length=2000)


class BlockOut(Out):
    model_config = ConfigDict(extra="allow")
    id: str
    task_id: str
    kind: str
    reason: str
    state: Literal["open", "cleared", "expired"]
    created_at: str  # ISO 8601, as every time the API shows
    placed_by: "PlacedBy"
    expires_at: Stamp = None
    closed_at: Stamp = None
    closed_by: str | None = None


class PlacedBy(Out):
    """Who placed a block: an operator (its token id) or a lease (its id)."""

    kind: Literal["operator", "lease"]
    id: str


class BlockAnswer(Out):
    block: BlockOut


class BlocksAnswer(Out):
    blocks: list[BlockOut]
    next_cursor: None = None  # always null: a task's blocks live on its one row
