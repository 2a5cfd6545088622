"""Domain entities: frozen, built from and turned into store rows by the store alone."""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from tenure.domain.states import (
    EndReason,
    LeaseState,
    OnExpiry,
    PoolKind,
    ReportKind,
    Revoke,
    SubjectKind,
    TaskStatus,
)
from tenure.records import record

# Timing defaults, configurable per pool (docs/fencing-and-timing.md).
DEFAULT_RENEW_SECONDS = 10
DEFAULT_GRACE_SECONDS = 50
DEFAULT_TOLERATION_SECONDS = 300
DEFAULT_MAX_ATTEMPTS = 3
MIN_LEASE_SECONDS = 5
MAX_LEASE_SECONDS = 43200
# Claim priority: 0-9, higher claimed first; the default needs no stored value.
DEFAULT_PRIORITY = 5
MIN_PRIORITY = 0
MAX_PRIORITY = 9
# The most blockers a task may have: its filing writes two items per open blocker in one
# transaction, beside its own rows, and 48 of them keep that within DynamoDB's 100 items.
MAX_DEPENDS_ON = 48
# A marked priority partition is dropped from the pool row only when no lease was filed at
# that priority for this long: it covers the index's lag behind a filing, so the sweeper's
# look at an empty partition can never miss a lease filed just before it looked.
PRIORITY_MARK_GRACE_MS = 10 * 60 * 1000
# Marks (`Pool.queue_marks`) are refreshed by a filing only when older than this.
PRIORITY_MARK_REFRESH_MS = PRIORITY_MARK_GRACE_MS // 2
# The pool row's mark for pending leases with a queue timeout (beside the priorities' "0"-"9").
QUEUE_EXPIRY_MARK = "expiry"
# How long an ended lease keeps its logs and attachments (30 days), per pool; the sweeper
# reclaims them after that.
DEFAULT_RETENTION_SECONDS = 2_592_000
# Bytes of attachments one lease may add (1 GiB): a worker cannot fill the bucket.
DEFAULT_ATTACHMENT_QUOTA_BYTES = 1024**3
# Tasks one lease token may file (per pool): a completion names at most 100 tasks it created,
# so a lease that files more cannot account for them.
DEFAULT_MAX_DELEGATED_PER_LEASE = 100
# Tasks a tree of delegation may hold beneath the task a person filed (per pool of the filing
# lease): ten leases' worth at the per-lease default, room for an orchestrator whose workers
# delegate once more, while a lease that keeps handing its work on stops at a thousand runs
# (and their per-lease quotas) rather than going on without end.
DEFAULT_MAX_DELEGATED_PER_TREE = 1000


@record
class Space:
    key: str
    name: str
    created_at: int
    max_active: int | None = None
    archived: bool = False
    archived_changed_at: int | None = None  # when it was last archived or unarchived


@record
class Workflow:
    space: str
    slug: str
    name: str
    created_at: int
    description: str | None = None


@record
class Pool:
    name: str
    space: str
    kind: PoolKind
    created_at: int
    max_active: int | None = None
    renew_seconds: int = DEFAULT_RENEW_SECONDS
    grace_seconds: int = DEFAULT_GRACE_SECONDS
    toleration_seconds: int = DEFAULT_TOLERATION_SECONDS
    on_expiry: OnExpiry = OnExpiry.REQUEUE
    keeps_logs: bool = True
    paused: bool = False
    paused_changed_at: int | None = None  # when it was last paused or resumed
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    display_name: str | None = None  # what the board shows; the name when unset
    attachment_quota_bytes: int = DEFAULT_ATTACHMENT_QUOTA_BYTES
    # Agent and classifier settings (what an agent or classifier lease's payload adds);
    # changing either makes a new `version`, and a lease pins the one current at its creation.
    agent: dict[str, Any] | None = None  # {model, effort?}
    classifier: dict[str, Any] | None = None  # {input, output: {checks?, properties?}}
    version: int = 1

    @property
    def label(self) -> str:
        return self.display_name or self.name

    # Starvation: a claimable pending lease older than this with no reachable worker is
    # starved; a further `starvation_escalation_seconds` parks its task in needs_attention.
    min_queued_age_seconds: int = 600
    starvation_escalation_seconds: int = 3600
    # Per-million-token prices that estimate a completion's cost when it reports none:
    # {currency, input_tokens?, output_tokens?, …}.
    rates: dict[str, Any] | None = None
    # Delegation: the pools whose leases may file tasks here without a person's approval.
    accepts_delegation_from: tuple[str, ...] = ()
    # Delegation's bounds for this pool's leases: how many tasks one lease token may file, and
    # how many a tree of delegated tasks may hold when one of them files.
    max_delegated_per_lease: int = DEFAULT_MAX_DELEGATED_PER_LEASE
    max_delegated_per_tree: int = DEFAULT_MAX_DELEGATED_PER_TREE
    # Retry on failure: {on_failure, backoff: {initial_seconds, multiplier, max_seconds,
    # jitter}}; None reads as RetryPolicy's defaults (off).
    retry: dict[str, Any] | None = None
    # Keyed concurrency: at most this many held leases per concurrency_key (None: unlimited).
    max_active_per_key: int | None = None
    # Rate limit: at most this many claims per minute, a fixed UTC-minute window (None: none).
    max_claims_per_minute: int | None = None
    # Run timeout: a lease held longer is asked to stop and ends timed_out (None: no limit;
    # a task's own max_run_seconds, if smaller, wins).
    max_run_seconds: int | None = None
    # Kinds of pending lease only some pools have, each with when one was last filed (epoch
    # ms): priorities other than the default ("0"-"9", each its own queue partition, which a
    # claim reads only while marked) and queue timeouts (QUEUE_EXPIRY_MARK, which the sweeper
    # reads only while marked). The sweeper drops a mark when nothing it stands for is
    # pending and none was filed for PRIORITY_MARK_GRACE_MS.
    queue_marks: dict[str, int] | None = None
    # What the pool's space and the instance say that a claim or a filing needs, copied onto
    # the pool row by every write that changes it (archiving the space, setting or clearing
    # the space's or the instance's max_active, making the pool), so that a claim or a filing
    # reads one row fresh instead of three: the space is archived; the space, the instance
    # has a ceiling (its counter and limit stay on its own row).
    space_archived: bool = False
    space_ceiling: bool = False
    instance_ceiling: bool = False


@record
class Principal:
    """Who is calling, as the authorizer established it."""

    kind: str  # "operator" | "worker" | "lease"
    token_id: str
    role: str | None = None  # operator: read | member | admin
    spaces: tuple[str, ...] | None = None  # operator: None means every space
    pools: tuple[str, ...] | None = None  # worker: None means every pool
    lease_id: str | None = None  # lease: the one lease it may act on
    # lease: when its lease ended, as the token's check read it (None: it had not). A
    # principal cached from before the end says None; each use case that reads the lease
    # applies the same rule to the row (domain/authz.py require_lease_power).
    lease_ended_at: int | None = None
    # lease: the token's digest. A claim retried with its claim_id mints the same lease a new
    # token and stores that one's digest instead, so a principal kept from before (the
    # authorizer's cache, the worker function's) is refused on any row that no longer carries
    # it (domain/authz.py require_lease_token). None: a verdict kept by a release before this
    # field, which lives out its minute unchecked.
    token_hash: str | None = None
    # operator, worker: when the token expires (ms; None: never). A verdict kept after its
    # token was read (the authorizer's cache, the worker function's) is refused from then on.
    expires_at: int | None = None


@record
class Token:
    id: str
    name: str
    kind: str  # operator | worker
    token_hash: str
    created_at: int
    role: str | None = None
    spaces: tuple[str, ...] | None = None
    pools: tuple[str, ...] | None = None
    expires_at: int | None = None  # ms; from then on the token answers 401
    revoked_at: int | None = None
    last_used_at: int | None = None  # written at most once a minute (TOKEN_TOUCH_MS)

    def principal(self) -> Principal:
        return Principal(
            kind=self.kind,
            token_id=self.id,
            role=self.role,
            spaces=self.spaces,
            pools=self.pools,
            expires_at=self.expires_at,
        )


@record
class Task:
    id: str
    key: str
    space: str
    title: str
    created_at: int
    body: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    workflow: str | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    job_id: str | None = None  # the task's latest run, open or ended
    attention: bool = False  # escalated: recovery exhausted, needs a person
    # Scheduling controls its runs take unless an enqueue names its own: claim priority
    # (None: the default) and the queue timeout of each run's pending lease.
    priority: int | None = None
    expires_in_seconds: int | None = None
    max_run_seconds: int | None = None
    version: int = 1
    event_type: str | None = None
    event_data: dict[str, Any] | None = None
    updated_at: int | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # set by a classifier's output
    # The task graph (app/tasks/graph.py): its parent and every ancestor above it
    # (root first), the tasks whose success it waits for, whether readiness enqueues it (on
    # `pool`), and its own pause with who set it.
    parent_id: str | None = None
    ancestors: tuple[str, ...] | None = None
    depends_on: tuple[str, ...] | None = None
    auto_enqueue_on_ready: bool = False
    pool: str | None = None
    paused: bool = False
    paused_by: str | None = None
    # Typed blocks (app/autonomy/blocks.py): block id → its record (open ones and the most
    # recent closed ones, bounded), and how many blocks of each kind since the last success.
    blocks: dict[str, dict[str, Any]] | None = None
    block_counts: dict[str, int] | None = None
    # Delegation (app/autonomy/delegation.py): the lease whose token filed this task, and
    # whether the task's endings wake that lease's worker (meaningless without one).
    created_by_lease: str | None = None
    wake_creator: bool = False
    # The task a person filed at the top of this one's chain of creators (the task of the
    # lease that filed it, or that task's own root): its tree counts this task. None for a
    # task filed by a person, or before the count existed.
    delegation_root: str | None = None
    # Approval (app/tasks/approval.py): {state: requested | approved | rejected, requested_at,
    # pool?, by?, at?, note?}; None for a task filed without it.
    approval: dict[str, Any] | None = None
    # Keyed concurrency: its runs count against their pool's max_active_per_key under this key.
    concurrency_key: str | None = None
    # Set once, by its first child's filing: the payload lists children (one Query) only for a
    # task that has some, so a task without any costs its payload no read. None is not stored.
    has_children: bool | None = None
    # Cancelled by a person (app/tasks/cancel.py): {at, by, actor_kind, reason, subtree,
    # root?}; `root` names the task whose subtree cancel reached this one. Once set, the task
    # reads `cancelled` and never opens another run.
    cancelled: dict[str, Any] | None = None

    def with_job(self, job_id: str) -> Task:
        return replace(self, job_id=job_id)

    @property
    def awaiting_approval(self) -> bool:
        return self.approval is not None and self.approval.get("state") == "requested"

    @property
    def rejected(self) -> bool:
        return self.approval is not None and self.approval.get("state") == "rejected"


@record
class Job:
    """One run of a subject; the fence counter and the attempt counts live here."""

    id: str
    space: str
    pool: str
    subject_kind: SubjectKind
    subject_id: str
    created_at: int
    lease_id: str  # the job's newest lease
    fence: int = 1
    attempt: int = 1
    recovery_count: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    task_id: str | None = None
    exhausted: bool = False
    # Set when a rule minted the run: which rule, and for an inbound rule the
    # `{topic, occurred_at, data}` its payload carries as `trigger`.
    rule_id: str | None = None
    trigger: dict[str, Any] | None = None
    retry_depth: int = 0  # how many operator retries stand between this run and the first
    # A rule's firing of a task subject: the key of the task it files, so that a delivery
    # that finds the job before its task can write that very task (app/rules/job_first.py).
    task_key: str | None = None


def first_job_id(task_id: str) -> str:
    """The id of a task's first job when it was opened with the task (the task id's own
    unique part under the job prefix, as its first lease's is under the lease prefix).

    Such a job has no row of its own until it moves on: its first lease and its task say
    everything it holds (fence 1, the first attempt, no recovery, the task's max_attempts),
    so filing writes neither a row nor a unit for it. The first write that changes it (a
    successor after an expiry or a release, an exhausted expiry) creates the row, on the
    condition that there is none yet or that it still holds what the writer read."""
    return "job_" + task_id.partition("_")[2]


def implied_pair(job_id: str, lease_id: str) -> bool:
    """Whether `job_id` is the first job of the task whose first lease is `lease_id` (both
    ids carry the task's unique part): a job that may have no row yet."""
    return job_id == "job_" + lease_id.partition("_")[2]


def may_be_implied(job: Job) -> bool:
    """Whether this job is a task's first job, which may still have no row."""
    return job.task_id is not None and job.id == first_job_id(job.task_id)


def implied_job(task: Task, first: Lease) -> Job:
    """The job a task's first lease implies while the job has no row (first_job_id)."""
    return Job(
        id=first.job_id,
        space=first.space,
        pool=first.pool,
        subject_kind=first.subject_kind,
        subject_id=first.subject_id,
        created_at=first.created_at,
        lease_id=first.id,
        attempt=first.attempt,
        max_attempts=task.max_attempts,
        task_id=task.id,
        retry_depth=first.retry_depth,
    )


@record
class Lease:
    id: str
    job_id: str
    space: str
    pool: str
    subject_kind: SubjectKind
    subject_id: str
    state: LeaseState
    fence: int
    attempt: int
    created_at: int
    task_id: str | None = None
    task_key: str | None = None
    workflow: str | None = None
    worker_id: str | None = None
    worker_version: str | None = None
    token_hash: str | None = None
    claimed_by: str | None = None  # the worker token that claimed it (renews only for that one)
    # The claim that took it, when that claim carried a claim_id (fencing.claim_ref): how a
    # retried claim recognises its own lease. `shunned`: claims (by ref) whose record moved on
    # from this lease while it was still pending; none of them may take it any more.
    claim_ref: str | None = None
    shunned: tuple[str, ...] | None = None
    host: str | None = None  # where the claiming worker runs, as it declared it
    lease_seconds: int | None = None
    renew_seconds: int | None = None
    claimed_at: int | None = None
    started_at: int | None = None
    heartbeat_at: int | None = None  # the last heartbeat that was written
    deadline: int | None = None
    # The deadline as the sweeper's index last saw it (<= deadline); see store.keys.DUE_INDEX.
    due_at: int | None = None
    # The pass that found the sweeper's own absence whose push moved this deadline (epoch ms):
    # the walk that meets the lease again, further on in the index, leaves it. The sweeper's
    # own mark: no answer shows it.
    pushed_for: int | None = None
    ended_at: int | None = None
    end_reason: EndReason | None = None
    outcome: str | None = None
    revoke: Revoke | None = None
    report_kind: ReportKind | None = None
    report_fingerprint: str | None = None
    report_id: str | None = None
    report: dict[str, Any] | None = None  # what the final report said (details, error, reason)
    # The claim a final report sent with the worker's token carried (fencing.claim_ref of its
    # `next`): a replay of that report answers that claim's lease again, and no other.
    next_claim: str | None = None
    # The lease that claim is taking (or took): its intent, kept here rather than in a claim_id
    # record of its own, picked before the report's write and moved on conditionally when a
    # rival takes it first (app/leases/claims/record.py). None: the claim keeps a record.
    next_lease: str | None = None
    # The ceilings ("pool:NAME", "space:KEY") this lease counts against while it is held.
    counted: tuple[str, ...] | None = None
    # Deferred (`not_before`): not claimable before this instant (epoch ms); it orders the queue.
    not_before: int | None = None
    # The pool version current when the lease (or its job's first lease) was created.
    pool_version: int | None = None
    # Every transition bumps `version` and names itself here; the reactor turns each new
    # version it sees on the table's stream into one timeline event with an idempotent id.
    version: int = 1
    event_type: str | None = None
    event_data: dict[str, Any] | None = None
    updated_at: int | None = None
    # Timeline stamps (domain/timeline.py): on a task's lease, the version of each routine
    # transition (claimed, started, completed) the timeline reads off this row, set once by
    # the write that makes it; {} from the lease's creation, None on a lease made before
    # stamps (every event of such a lease is a timeline row).
    tl: dict[str, Any] | None = None
    # Task pending: set on a task's first lease when it is written before its task (filing
    # writes the two rows one after the other, not in a transaction). A claim of a lease so
    # marked reads the task first and clears the mark in its own write; a marked lease whose
    # task never came is the remnant of a filing that died between its writes, and the claim
    # that meets it ends it (app/leases/orphans.py). Short: every byte of a lease row counts.
    tp: bool | None = None
    # Set once, when the sweeper deleted the lease's logs and attachments (retention reclaim).
    reclaimed_at: int | None = None
    # The lease has (or may have) logs or attachments, so its retention reclaim has objects
    # to delete: once ended, the sweeper finds it by its end time. Set by the write that
    # records its first log stream or attachment (and, while the table is older than
    # DERIVED_RECLAIMS_FROM_SCHEMA, by every ending). A lease without it has nothing to
    # delete: it reads reclaimed once its pool's retention has passed (derived_reclaimed_at).
    keeps_detail: bool = False
    # The task's ancestors (root first), so a claim can tell a paused subtree from one read of
    # the scheduler row, without walking the tree (ClaimGate, app/dispatch_controls.py).
    lineage: tuple[str, ...] | None = None
    previous_lease_id: str | None = None  # the ended lease this one retries or takes over from
    retry_depth: int = 0
    failure_kind: str | None = None  # "operator_forced" when an operator force-failed it
    # Its task's concurrency_key when the run was opened (a claim counts it per key).
    concurrency_key: str | None = None
    # Claim order: 0-9, higher first; None is the default (5) and is not stored, so a lease
    # at the default priority has the row and the queue key it always had.
    priority: int | None = None
    # Queue timeout (epoch ms): a pending lease not claimed by then ends queue_timeout. Not
    # named expires_at: that is the table's TTL attribute.
    queue_expires_at: int | None = None
    # The queue timeout its run asked for (seconds): every pending lease of the run (its
    # first, and each requeued after a release or an expiry) waits at most this long.
    expires_in_seconds: int | None = None
    # Run timeout: what its run asked for (seconds; a successor keeps it); from its claim,
    # `run_limit_seconds` is the smaller of that and its pool's, and `run_deadline` the
    # instant it runs out (epoch ms). `timed_out_at`: when the sweeper asked it to stop for
    # running past it (its kill then ends timed_out).
    max_run_seconds: int | None = None
    run_limit_seconds: int | None = None
    run_deadline: int | None = None
    timed_out_at: int | None = None
    # True on a task's first lease made with its task once the table's schema allows it: the
    # lease list finds it through its task's list entry, so it has no space list entry of its
    # own (one index write less at filing). Set at creation, never changed: a lease is listed
    # by exactly one of the two, for all its life.
    via_task: bool | None = None

    @property
    def claim_priority(self) -> int:
        return DEFAULT_PRIORITY if self.priority is None else self.priority

    @property
    def superseded(self) -> bool:
        """True when the job was handed on under a newer fence (expiry or release)."""
        return self.state is LeaseState.LOST or self.end_reason is EndReason.RELEASED


# The shortest retention a pool may have: an ended lease is never reclaimed sooner.
MIN_RETENTION_MS = 1000


def derived_reclaimed_at(lease: Lease, retention_seconds: int) -> int | None:
    """When a lease with nothing to delete (no logs, no attachments) counts as reclaimed:
    its end plus its pool's retention. None for a lease that is active, keeps detail for the
    sweeper to delete, or was reclaimed by the sweeper already (`reclaimed_at` says when)."""
    if lease.keeps_detail or lease.reclaimed_at is not None or lease.ended_at is None:
        return None
    if not lease.state.terminal:
        return None
    return lease.ended_at + retention_seconds * 1000


@record
class Worker:
    """A process that claims from a pool, known by the last time it was heard from."""

    pool: str
    worker_id: str
    last_seen: int
    worker_version: str | None = None
    # What the worker last said of its runtime and its credentials in its worker heartbeat
    # (when every reachable worker of a pool refuses, its queued leases say so):
    # {"state": "ok"|"refusing", "reason"?} and {"state": "ok"|"unreachable", "reason"?}.
    runtime: dict[str, Any] | None = None
    credentials: dict[str, Any] | None = None


@record
class PoolVersion:
    """A pool's agent and classifier settings as they were at one version (kept readable)."""

    pool: str
    version: int
    created_at: int
    agent: dict[str, Any] | None = None
    classifier: dict[str, Any] | None = None


# Instance-wide settings (ceiling, breaker limit, agent force, retry chain cap), one row.
DEFAULT_BLOCK_RECURRENCE_LIMIT = 2
DEFAULT_RETRY_CHAIN_CAP = 5
# How long an event is kept to clear the blocks placed after it arrived (app/flow/events.py).
DEFAULT_EVENT_TTL_SECONDS = 3600


@record
class Instance:
    max_active: int | None = None
    block_recurrence_limit: int = DEFAULT_BLOCK_RECURRENCE_LIMIT
    allow_agent_force: bool = False
    retry_chain_cap: int = DEFAULT_RETRY_CHAIN_CAP
    event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS
    updated_at: int | None = None


def pool_gates(space: Space, instance: Instance) -> dict[str, bool]:
    """What a pool row copies from its space and the instance (Pool.space_archived): the
    space is archived; the space, the instance has a ceiling."""
    return {
        "space_archived": space.archived,
        "space_ceiling": space.max_active is not None,
        "instance_ceiling": instance.max_active is not None,
    }


def gates_differ(pool: Pool, gates: dict[str, bool]) -> dict[str, bool]:
    """The gates the pool row does not say yet."""
    return {name: value for name, value in gates.items() if getattr(pool, name) != value}


@record
class Event:
    """One entry on a subject's timeline (a lease's subject, or the "system" timeline)."""

    id: str
    subject_kind: str
    subject_id: str
    type: str
    at: int
    lease_id: str | None = None
    fence: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


@record
class TaskGraph:
    """A task's side row in the graph: counters moved only by conditional updates (never by
    listing children or blockers), and the instants it succeeded and rolled up."""

    task_id: str
    children_total: int = 0
    children_done: int = 0
    blockers_total: int = 0
    blockers_done: int = 0
    succeeded_at: int | None = None
    # The last lease of the task that completed with success (a later run's success replaces
    # it, a replay of an older one does not): whose `result` the task hands on as an input.
    succeeded_lease: str | None = None
    # The success was its lease's (the task had no graph row then) and was copied here by
    # the filing that linked to the task: it was told then, and counts nothing again.
    success_copied: bool = False
    rollup_at: int | None = None
    auto_enqueued_at: int | None = None
    # The usage accumulator (app/usage.py): moved in each completion's own
    # transaction, so a task's usage is read from this one row.
    usage_leases: int = 0
    usage_input_tokens: int = 0
    usage_output_tokens: int = 0
    usage_cache_read_tokens: int = 0
    usage_cache_write_tokens: int = 0
    usage_reasoning_tokens: int = 0
    usage_cost_micros: int = 0
    usage_cost_keys: tuple[str, ...] = ()
    # On a stopped lease's row (keyed by the lease id): the last child its stop has reached,
    # which sets off the next page (app/autonomy/delegation.py).
    stop_after: str | None = None
    # A subtree cancel's walk (app/tasks/cancel.py): when it reached this task and for which
    # top task, the last child of this one it has reached, and when all of them were reached;
    # on the top's own row, how many reached tasks still have children to walk.
    cancel_reached_at: int | None = None
    cancel_root: str | None = None
    cancel_after: str | None = None
    cancel_walked_at: int | None = None
    cancel_open: int = 0

    @property
    def children_outstanding(self) -> int:
        return max(0, self.children_total - self.children_done)

    @property
    def blockers_outstanding(self) -> int:
        return max(0, self.blockers_total - self.blockers_done)


def task_status(task: Task, lease: Lease | None) -> TaskStatus:
    """A task's status is derived from its latest run's newest lease, never stored twice; a
    cancelled task reads cancelled from the instant of its cancel, whatever its run does."""
    if task.cancelled is not None:
        return TaskStatus.CANCELLED
    if task.attention:
        return TaskStatus.NEEDS_ATTENTION
    if task.rejected and (lease is None or lease.state.terminal):
        return TaskStatus.CANCELLED
    if lease is None:
        return TaskStatus.READY
    match lease.state:
        case LeaseState.PENDING | LeaseState.DISPATCHING | LeaseState.DISPATCHED:
            return TaskStatus.QUEUED
        case LeaseState.RUNNING | LeaseState.PAUSED | LeaseState.CANCELLING:
            return TaskStatus.RUNNING
        case LeaseState.COMPLETED:
            return TaskStatus.COMPLETED
        case LeaseState.FAILED | LeaseState.LOST:
            return TaskStatus.FAILED
        case _:
            return TaskStatus.CANCELLED


@record
class KeptEvent:
    """The last event sent for one (space, name, key), kept until `expires_at` (epoch ms) to
    clear blocks placed after it arrived (app/flow/events.py). `data` is as sent."""

    space: str
    name: str
    key: str
    at: int
    expires_at: int
    data: Any = None
    by: str | None = None
