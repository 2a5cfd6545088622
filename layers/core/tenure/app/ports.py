"""Ports: what the core needs from the outside world, as Protocols."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from tenure.domain.model import (
    Event,
    Job,
    Lease,
    Space,
    Task,
    TaskGraph,
    Token,
    Worker,
)
from tenure.domain.states import LeaseState
from tenure.domain.transitions import SignalKey
from tenure.records import record

if TYPE_CHECKING:
    pass

# Bounds every implementation keeps (STYLE 14: every request reads a bounded number of items).
# A lease list examines at most about this many index entries per call, by_space's and
# tasks_by_space's together (and reads at most as many lease rows); fewer than `limit` may
# match, the cursor then resumes after the last place examined.
LIST_SCAN_BUDGET = 200
# A workers page examines at most this many worker rows (expired ones included: TTL is lazy).
WORKER_SCAN_BUDGET = 1000
# `list_workers` answers at most this many workers (one page; `worker_page` pages on).
WORKERS_CAP = 500
# A worker row is kept this long after the worker was last heard from, then TTL deletes it:
# far beyond any pool's grace (so "unreachable" workers still show for a day), short enough
# that a pool's worker partition holds only the day's workers.
WORKER_RETENTION_S = 86_400
# What a worker says of itself, each written only when heard (WorkerRows.note_worker): the
# version it runs, how its runtime and its credentials stand.
WORKER_SAYS = frozenset({"worker_version", "runtime", "credentials"})
# An instance holds at most this many pools: `list_pools` reads them all (GET /pools, the
# sweeper, the scheduler), so the cap is what keeps that read bounded (1,000 rows ≈ 125 RU).
POOL_CAP = 1000
# `timeline(..., limit=None)` answers at most the newest this-many events (oldest first).
TIMELINE_CAP = 1000


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...


class Ids(Protocol):
    def new_id(self, prefix: str) -> str: ...

    def secret(self) -> str:
        """A URL-safe random string of at least 128 bits."""
        ...

    def shuffle(self, items: list[str]) -> list[str]: ...

    def jitter(self) -> float:
        """A random fraction in [0, 1), for spreading out the retries of rivals."""
        ...


@record
class LeaseWrite:
    """Write `new`; when `expect` is set the row must still hold that (state, fence).

    `seen` is the row as the writer read it: the write then also requires its version and
    deadline, so no transition and no heartbeat that landed in between is overwritten.
    """

    new: Lease
    expect: tuple[LeaseState, int] | None = None
    seen: Lease | None = None


@record
class JobWrite:
    """Write `new`; when `expect_fence` is set the row must still hold that fence.

    `ahead`: a new job under a fresh random id, which nothing names until the rest of the
    change commits the lease and task that point at it. The store may write it on its own
    before the rest (a crash in between leaves an unreachable row, never a dangling
    reference), sparing it the transaction. Never for a job whose creation is the change's
    guard (a rule's firing, keyed by its occasion): that one must commit with the rest."""

    new: Job
    expect_fence: int | None = None
    ahead: bool = False


@record
class TaskWrite:
    """Write `new`; the row must still point at `expect_job_id` (None: at no job)."""

    new: Task
    expect_job_id: str | None = None
    create: bool = False
    # ...and, when set, still be at this version (a writer that read the row and bumps it:
    # pause, PATCH, parking — so that no flag written in between is put back).
    expect_version: int | None = None


@record
class Ceiling:
    """Moves a pool's or space's count of held leases; +1 lands only while below `limit`.

    Four scopes judge `limit` itself rather than a row's own setting: KEY_CEILING (held leases
    of one concurrency key in one pool, `key_ceiling(pool, key)`), RATE_CEILING (claims in
    one pool during one minute, `rate_ceiling(pool, minute)`; never given back), and
    DELEGATED_CEILING and TREE_CEILING (tasks delegated by one lease, and within one tree)."""

    # "pool" | "space" | "instance" (INSTANCE_CEILING) | one of OWN_LIMIT_CEILINGS
    scope: str
    name: str
    delta: int
    limit: int | None = None


# The name of the one instance-wide ceiling counter (on the instance settings row).
INSTANCE_CEILING = "instance"
# Held leases per (pool, concurrency key), and claims per (pool, minute).
KEY_CEILING = "key"
RATE_CEILING = "rate"
# Joins a pool's name to the key or minute in a ceiling's name; pool names never contain it.
CEILING_JOIN = "#"


# Delegation's bounds (app/autonomy/delegation.py), each judged against the limit a filing
# sends: tasks filed with one lease's token (named by the lease id), and tasks in one tree of
# delegation (named by the id of the task at its top). Never given back: a task once filed
# has been filed.
DELEGATED_CEILING = "delegated"
TREE_CEILING = "tree"
# The scopes a Ceiling's own `limit` judges (the others: the row's own max_active).
OWN_LIMIT_CEILINGS = (KEY_CEILING, RATE_CEILING, DELEGATED_CEILING, TREE_CEILING)


def key_ceiling(pool: str, key: str) -> str:
    return f"{pool}{CEILING_JOIN}{key}"


def rate_ceiling(pool: str, minute: int) -> str:
    return f"{pool}{CEILING_JOIN}{minute}"


def split_ceiling(name: str) -> tuple[str, str]:
    """(pool, key or minute) of a KEY_CEILING or RATE_CEILING name."""
    pool, _, rest = name.partition(CEILING_JOIN)
    return pool, rest


@record
class Settings:
    """A partial update of a settings row: SET these attributes, REMOVE those (a null)."""

    set: dict[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()


@record
class ClaimRecord:
    """A claim's `claim_id` (the worker's idempotency key): the lease that claim is taking,
    or took.

    Keyed by (pool, claimant token id, worker_id, claim_id). Written before the claim's own
    write and naming the lease about to be claimed, so no transaction is needed: when that
    lease goes to someone else the record is moved on, conditionally from the lease it names,
    to the next candidate. A retried claim follows it — to its lease under a fresh token when
    that lease carries this claim's `claim_ref`, or on to claim it while it is still pending —
    so a retry never takes a second lease. `intent` is False on the records earlier releases
    wrote inside the claim's own transaction: their lease is the claim's by construction.
    """

    pool: str
    claimant: str
    worker_id: str
    claim_id: str
    lease_id: str
    expires_at: int  # epoch seconds: the row is kept (TTL) at least as long as the lease
    intent: bool = True


@record
class Filed:
    """An idempotent request's record: the caller's key (a digest scoped by its token), the
    digest of the body it came with, and once the request has answered, that answer.

    Until then `locked_until` says how long the request that took the key may take to answer;
    past it (that request died) the key may be taken again.
    """

    key: str
    body_hash: str
    expires_at: int  # epoch seconds: the record is kept (TTL) this long
    locked_until: int  # epoch ms
    status: int | None = None
    answer: str | None = None  # the answer's JSON, as sent


# The task graph's side rows are written inside a Change's transaction by one typed operation
# each (store.keys has the rows and the named conditions; the adapter and the fake each match
# on these types). `Counts` are (counter, delta) pairs ADDed to a graph row.
Counts = tuple[tuple[str, int], ...]


@record
class AddCounts:
    """ADD `counts` to `task_id`'s graph row (creating it), and SET `mark` = `at` when named
    (a new task's auto-enqueue mark, or "succeeded_at": a parent's own success copied from
    its lease with its first child, only while it has not succeeded). One that counts a new
    child (`children_total`) lands only on a parent no subtree cancel has reached: a child
    filed under it then would be missed by the walk."""

    task_id: str
    counts: Counts
    mark: str = ""
    at: int | None = None


@record
class AddUsage:
    """ADD `counts` to `task_id`'s graph row and `cost_key` to its `usage_cost_keys` set: a
    completion's usage (app/usage.py)."""

    task_id: str
    cost_key: str
    counts: Counts


@record
class Edge:
    """Create the edge row `task_id` -[`kind`: child|dependent|delegated|ttl]-> `other`, once;
    `counted_at` set means it already counted (a blocker that had succeeded before the edge)."""

    task_id: str
    kind: str
    other: str
    counted_at: int | None = None


@record
class Unedge:
    """Delete that edge row, which must still be as read: counted when `counted`, not counted
    otherwise (a dependency dropped by PATCH; its counts move with it)."""

    task_id: str
    kind: str
    other: str
    counted: bool = False


@record
class RequireSucceeded:
    """Require `task_id` to have succeeded: with RequireNotSucceeded, the condition that keeps
    a new edge and a blocker's concurrent success from missing each other."""

    task_id: str


@record
class RequireNotSucceeded:
    """Require `task_id` not to have succeeded (see RequireSucceeded)."""

    task_id: str


@record
class CopySuccess:
    """SET `succeeded_at` = `at` on `task_id`'s graph row, marked copied, while its success is
    due, naming `lease_id` as `succeeded_lease`: the success of a task that had no graph row
    when its lease succeeded, copied there by the filing that links to it, or by a new run of
    the task (nothing counts it again)."""

    task_id: str
    at: int
    lease_id: str


@record
class Link:
    """Make `task_id`'s graph row (SET `linked_at` = `at` if absent) while it has not
    succeeded: the task is linked from then on, and the reactor writes its success there."""

    task_id: str
    at: int


@record
class RequireLeaseOpen:
    """Require lease `lease_id` (`task_id`'s newest) to be still open, not ended. With
    RequireRun and RequireJobLease, and Link, it keeps a task with no graph row yet and its
    success from missing each other when a filing links to it: its success comes from a
    lease that is still open, or from a later one that must change what they check."""

    task_id: str
    lease_id: str


@record
class RequireRun:
    """Require `task_id`'s task row to point at job `job_id` ("" for none yet)."""

    task_id: str
    job_id: str


@record
class RequireJobLease:
    """Require job `job_id` (of task `task_id`) to point at lease `lease_id` (a first job with
    no row is on its first lease)."""

    task_id: str
    job_id: str
    lease_id: str


@record
class Mark:
    """SET `name` = `at` on `task_id`'s graph row once; "auto_enqueued_at" also needs every
    blocker met (one auto-enqueue per readiness, however many blockers finish at once)."""

    task_id: str
    name: str
    at: int | None


@record
class Advance:
    """SET `name` = `to` on `task_id`'s graph row while it is absent or sorts before `to` (a
    cursor that only moves forward: a stop's page, a cancel's walk)."""

    task_id: str
    name: str
    to: str


@record
class MarkHasChildren:
    """SET has_children on `task_id`'s task row (not its graph row): a parent's first child,
    so its payload knows to list children (app/tasks/inputs.py)."""

    task_id: str


@record
class Reach:
    """A subtree cancel reaching `task_id` (app/tasks/cancel.py): SET `cancel_reached_at` =
    `at` and `cancel_root` = `root`, once, and ADD `counts`; with `walked` named, SET it to
    `at` too, only while the task has no child (walked at once)."""

    task_id: str
    root: str
    at: int
    walked: str = ""
    counts: Counts = ()


GraphOp = (
    AddCounts
    | AddUsage
    | Edge
    | Unedge
    | RequireSucceeded
    | RequireNotSucceeded
    | CopySuccess
    | Link
    | RequireLeaseOpen
    | RequireRun
    | RequireJobLease
    | Mark
    | Advance
    | MarkHasChildren
    | Reach
)


@record
class HoldOp:
    """Add or remove a task id in one of the scheduler row's sets ("paused": its own pause,
    "attention": parked in needs_attention, "cancelled": a subtree cancel still walking
    down); claims skip leases under any of them."""

    set_name: str
    task_id: str
    add: bool


@record
class SchedulerState:
    """The instance's one scheduler row: its pause, and the task ids claims must skip."""

    paused: bool = False
    paused_by: str | None = None
    paused_at: int | None = None
    paused_tasks: frozenset[str] = frozenset()
    attention: frozenset[str] = frozenset()
    # Tasks holding an open typed block: a claim re-reads such a task's row,
    # since a transient block stops counting the instant it expires.
    blocked: frozenset[str] = frozenset()
    # Tasks whose subtree cancel is still walking down (app/tasks/cancel.py): everything
    # under them reads cancelled and is never claimed until the walk reaches it.
    cancelled: frozenset[str] = frozenset()


@record
class RecordWrite:
    """A claim record written in a change's transaction: new when `previous` is None, else
    moved on from the lease `previous` (the record must still name it)."""

    record: ClaimRecord
    previous: str | None = None


@record
class SignalBump:
    """Raise the epoch of one worker's signal row (made when absent), and keep the row for
    WORKER_RETENTION_S from `at` (ms)."""

    key: SignalKey
    at: int


@record
class Change:
    """Everything one transition writes; committed all together or not at all.

    Timeline events are not written here: each row names its own transition and the stream
    (triggers/stream.py) derives the event from it with an idempotent id, so a state change
    and its event commit together or not at all.
    """

    leases: list[LeaseWrite] = field(default_factory=list)
    jobs: list[JobWrite] = field(default_factory=list)
    tasks: list[TaskWrite] = field(default_factory=list)
    ceilings: list[Ceiling] = field(default_factory=list)
    records: list[RecordWrite] = field(default_factory=list)
    # (job id, lease id): the job must still point at that lease (conditions.JOB_LEASE_IS).
    job_checks: list[tuple[str, str]] = field(default_factory=list)
    # Written only when new (a second claim with the same key loses the whole change).
    # The task graph's side rows (app/tasks/graph.py) and the scheduler row's sets.
    graph: list[GraphOp] = field(default_factory=list)
    holds: list[HoldOp] = field(default_factory=list)
    # Workers' signal rows whose epoch this change raises (domain/signals.py), each once.
    signals: list[SignalBump] = field(default_factory=list)

    def size(self) -> int:
        """The items it writes or checks at most: what MAX_CHANGE_ITEMS bounds."""
        return sum(
            len(part)
            for part in (
                self.leases, self.jobs, self.tasks, self.ceilings, self.records,
                self.job_checks, self.graph, self.holds, self.signals,
            )
        )  # fmt: skip


# The most items one Change may hold: DynamoDB's transaction takes at most 100, and one over
# that is refused whole. A use case whose change grows with its input (a task's blockers)
# refuses the input by name before it is committed.
MAX_CHANGE_ITEMS = 100


@record
class LeasePage:
    leases: list[Lease]
    next_cursor: str | None


@record
class TaskEntry:
    """One task of a space's task list, with what its read derives from: its graph row and
    the newest lease of its latest run (None: never enqueued)."""

    task: Task
    graph: TaskGraph
    lease: Lease | None
    cursor: str  # resumes the list right after this task


class TaskPage(NamedTuple):
    entries: list[TaskEntry]  # newest first
    next_cursor: str | None  # null when the space holds no older task


class TokenPage(NamedTuple):
    tokens: tuple[Token, ...]  # by id
    next_cursor: str | None
    # The table's data is older than this release: tokens made before the list may be
    # missing from it until `tenure admin migrate` runs.
    schema_behind: bool = False


class SpacePage(NamedTuple):
    spaces: tuple[Space, ...]  # by key
    next_cursor: str | None  # null on the last page
    # The table's data is older than this release: spaces made before the list may be
    # missing from it until `tenure admin migrate` runs.
    schema_behind: bool = False


class EventPage(NamedTuple):
    events: list[Event]
    next_cursor: str | None  # null when the timeline holds nothing further


class WorkerPage(NamedTuple):
    workers: list[Worker]  # by worker_id; rows past their retention are left out
    next_cursor: str | None


class DueEntry(NamedTuple):
    """One entry of a pool's due index: the deadline it is indexed at, and its lease (entries
    with one due_at sort in the store's own order, not necessarily by lease id)."""

    due_at: int
    lease_id: str


@record
class AbsencePush:
    """The sweeper's own absence, being made good in one pool: every lease held in it is
    pushed out by the gaps it was held silent through, one page of the due index a pass, each
    lease once (it is marked with `at`), until the walk reaches the end of the index."""

    at: int  # the pass that found the absence (epoch ms): the mark a lease pushed for it gets
    gap_ms: int  # that absence's gap
    # Absences found in the pool earlier, while this push was pending (at, gap_ms), oldest
    # first: a lease not renewed or pushed since one of them is owed its gap too.
    earlier: tuple[tuple[int, int], ...] = ()
    after: DueEntry | None = None  # the last entry of the walk handled; None: from the start


@record
class SweeperState:
    last_pass_at: int | None = None
    # Pools whose expiries the mass-expiry brake holds, each until then (epoch ms).
    holds: dict[str, int] = field(default_factory=dict)
    # Pools in a capacity-waiting episode, each since then (epoch ms): told once an episode.
    capacity_waiting: dict[str, int] = field(default_factory=dict)
    # The last minute whose delegated tasks' ttls the sweeper has drained (epoch minutes).
    ttl_cursor: int | None = None
    # Pools whose push after the sweeper's own absence is not finished: written with the pass
    # that found the absence, before any lease is pushed, so a pass cut short loses none.
    absences: dict[str, AbsencePush] = field(default_factory=dict)


@record
class Attachment:
    """A file a lease's job produced; its bytes live in the attachments bucket at `key`."""

    id: str
    lease_id: str
    kind: str
    filename: str
    content_type: str
    byte_size: int
    created_at: int
    key: str
    # "pending" until the bytes are seen stored as declared; "stored"; or "rejected" (the
    # object that arrived is not what was declared) / "abandoned" (nothing came in time).
    status: str = "pending"


@record
class Blob:
    """What a HEAD of a stored object says."""

    size: int
    content_type: str
    # When the bucket wrote it (epoch ms, by the bucket's clock): an upload is judged by it.
    modified_at: int


@record
class LogLine:
    """One line a job printed, as stored and as read back (timestamp in epoch ms)."""

    timestamp: int
    container: str
    stream: str  # stdout | stderr
    message: str


class LogPage(NamedTuple):
    events: list[LogLine]
    truncated: bool
    next_cursor: str | None


class LogSink(Protocol):
    """Where lease logs live (CloudWatch Logs: one stream per lease and container)."""

    def append(self, lease_id: str, container: str, lines: list[LogLine], new: bool = False) -> int:
        """Store `lines` (any order); answers how many were accepted. `new`: the container
        was first counted just now, so its stream is made before it is written."""
        ...

    def read(
        self,
        lease_id: str,
        container: str | None,
        since: int | None,
        tail: int | None,
        cursor: str | None,
        limit: int,
    ) -> LogPage: ...

    def delete(self, lease_id: str) -> int:
        """Delete every stream of the lease; answers how many there were."""
        ...


class EventPublisher(Protocol):
    """Where the service publishes its own events (EventBridge: the template's bus)."""

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        """Publish one event; raises when the bus refused it."""
        ...


class EventBatchPublisher(Protocol):
    """The bus as the reactor's outbound events use it: many events, as few calls as it takes."""

    def publish_batch(self, source: str, events: list[tuple[str, dict[str, Any]]]) -> set[int]:
        """Publish (detail_type, detail) pairs; the positions of those the bus did not take
        (refused entries, or every entry of a call that failed)."""
        ...


class BlobStore(Protocol):
    """Where attachment bytes live (S3: private, encrypted)."""

    def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_s: int
    ) -> tuple[str, dict[str, str]]:
        """A URL and the headers a PUT of exactly these bytes must carry."""
        ...

    def put(self, key: str, data: bytes, content_type: str) -> None: ...
    def head(self, key: str) -> Blob | None:
        """The stored object's size, content type and time written, or None when there is
        none."""
        ...

    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when it is gone (the bucket's lifecycle rule)."""
        ...

    def presign_get(self, key: str, filename: str, content_type: str, expires_s: int) -> str: ...
    def origin(self) -> str:
        """scheme://host[:port] of the presigned URLs (the board's page may fetch from it)."""
        ...

    def copy(self, source: str, target: str) -> None:
        """Copy one object within the bucket (its content type with it)."""
        ...

    def delete(self, keys: list[str]) -> None: ...
