"""Ports: what the core needs from the outside world, as Protocols."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from tenure.domain.model import (
    Event,
    Instance,
    Job,
    KeptEvent,
    Lease,
    Pool,
    PoolVersion,
    Space,
    Task,
    TaskGraph,
    Token,
    Worker,
    Workflow,
)
from tenure.domain.states import LeaseState

if TYPE_CHECKING:
    from tenure.app.migrations import SchemaState

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


@dataclass(frozen=True)
class LeaseWrite:
    """Write `new`; when `expect` is set the row must still hold that (state, fence).

    `seen` is the row as the writer read it: the write then also requires its version and
    deadline, so no transition and no heartbeat that landed in between is overwritten.
    """

    new: Lease
    expect: tuple[LeaseState, int] | None = None
    seen: Lease | None = None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TaskWrite:
    """Write `new`; the row must still point at `expect_job_id` (None: at no job)."""

    new: Task
    expect_job_id: str | None = None
    create: bool = False
    # ...and, when set, still be at this version (a writer that read the row and bumps it:
    # pause, PATCH, parking — so that no flag written in between is put back).
    expect_version: int | None = None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Settings:
    """A partial update of a settings row: SET these attributes, REMOVE those (a null)."""

    set: dict[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class GraphOp:
    """One write on the task graph's side rows, inside a Change's transaction (store.keys has
    the rows and the named conditions). `op` is one of:

    * "add": ADD `counts` to `task_id`'s graph row (creating it), and SET `name` = `at` when
      named (a new task's auto-enqueue mark: one write per row in a transaction);
    * "edge": create the edge row `task_id` -[`name`: child|dependent]-> `other`, once;
      `at` set means it already counted (a blocker that had succeeded before the edge);
    * "unedge": delete that edge row, which must still be as read: counted when `at` is set,
      not counted otherwise (a dependency dropped by PATCH; its counts move with it);
    * "met" / "unmet": require `task_id` to have (not to have) succeeded — the condition that
      keeps a new edge and a blocker's concurrent success from missing each other;
    * "succeeded": SET `succeeded_at` = `at` on `task_id`'s graph row, marked copied, while
      its success is due (the success of a task that had no graph row when its lease
      succeeded, copied there by the filing that links to it, or by a new run of the task:
      nothing counts it again), naming the succeeded lease `other` as `succeeded_lease`;
    * "link": make `task_id`'s graph row (SET `linked_at` = `at` if absent) while it has not
      succeeded: the task is linked from then on, and the reactor writes its success there;
    * "lease_open": require lease `other` (`task_id`'s newest) to be still open, not ended;
    * "run_is": require `task_id`'s task row to point at job `other` ("" for none yet);
    * "job_is": require job `name` to point at lease `other` (a first job with no row is on
      its first lease). These three, with "link", keep a task with no graph row yet and its
      success from missing each other when a filing links to it: its success comes from a
      lease that is still open, or from a later one that must change what they check;
    * "mark": SET `name` = `at` on `task_id`'s graph row once; "auto_enqueued_at" also needs
      every blocker met (one auto-enqueue per readiness, however many blockers finish at once);
    * "usage": ADD `counts` to `task_id`'s graph row and `name` (a cost key) to its
      `usage_cost_keys` set — a completion's usage (app/usage.py);
    * "advance": SET `name` = `other` on `task_id`'s graph row while it is absent or sorts
      before `other` (a cursor that only moves forward: a stop's page, app/autonomy);
    * "has_children": SET has_children on `task_id`'s task row (not its graph row) — a
      parent's first child, so its payload knows to list children (app/tasks/inputs.py).
    * "reach": a subtree cancel reaching `task_id` (app/tasks/cancel.py): SET
      `cancel_reached_at` = `at` and `cancel_root` = `other`, once, and ADD `counts`.
    An "add" that counts a new child (`children_total`) lands only on a parent no subtree
    cancel has reached: a child filed under it then would be missed by the walk.
    """

    op: str
    task_id: str
    name: str = ""
    other: str = ""
    counts: tuple[tuple[str, int], ...] = ()
    at: int | None = None


@dataclass(frozen=True)
class HoldOp:
    """Add or remove a task id in one of the scheduler row's sets ("paused": its own pause,
    "attention": parked in needs_attention, "cancelled": a subtree cancel still walking
    down); claims skip leases under any of them."""

    set_name: str
    task_id: str
    add: bool


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class RecordWrite:
    """A claim record written in a change's transaction: new when `previous` is None, else
    moved on from the lease `previous` (the record must still name it)."""

    record: ClaimRecord
    previous: str | None = None


@dataclass(frozen=True)
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
    # (job id, lease id): the job must still point at that lease (see keys.JOB_LEASE_IS).
    job_checks: list[tuple[str, str]] = field(default_factory=list)
    # Written only when new (a second claim with the same key loses the whole change).
    # The task graph's side rows (app/tasks/graph.py) and the scheduler row's sets.
    graph: list[GraphOp] = field(default_factory=list)
    holds: list[HoldOp] = field(default_factory=list)


@dataclass(frozen=True)
class LeasePage:
    leases: list[Lease]
    next_cursor: str | None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class SweeperState:
    last_pass_at: int | None = None
    # Pools whose expiries the mass-expiry brake holds, each until then (epoch ms).
    holds: dict[str, int] = field(default_factory=dict)
    # Pools in a capacity-waiting episode, each since then (epoch ms): told once an episode.
    capacity_waiting: dict[str, int] = field(default_factory=dict)
    # The last minute whose delegated tasks' ttls the sweeper has drained (epoch minutes).
    ttl_cursor: int | None = None


class Store(Protocol):
    def put_space(self, space: Space) -> None: ...
    def get_space(self, key: str) -> Space | None: ...
    def list_spaces(
        self, limit: int, cursor: str | None, only: tuple[str, ...] | None = None
    ) -> SpacePage:
        """Up to `limit` spaces by key after `cursor`: one Query of the spaces' list partition
        and one batch read of their rows; with `only`, those spaces alone (one batch read)."""
        ...

    def next_task_number(self, space: str) -> int:
        """A number no other task of `space` gets: unique in the space and increasing within
        one instance, but neither gap-free nor in filing order across instances."""
        ...

    def task_id_by_key(self, key: str) -> str | None:
        """The id in a task key's row (tasks filed before ids were derived from keys), or
        None: one read by key."""
        ...

    def key_task(self, task: Task) -> bool:
        """Write the task's key row (for a task whose id is not its key's) only if it has
        none; False when it had one."""
        ...

    def put_workflow(self, workflow: Workflow) -> None: ...
    def get_workflow(self, space: str, slug: str) -> Workflow | None: ...
    def put_pool(self, pool: Pool) -> None: ...
    def get_pool(self, name: str) -> Pool | None: ...
    def put_token(self, token: Token, event: Event | None = None) -> None:
        """The token's row, its name, its list row and `event` (who made it), in one
        transaction: all of them land or none does."""
        ...

    def get_token(self, token_hash: str) -> Token | None: ...
    def get_token_by_id(self, token_id: str) -> Token | None:
        """The token of this id, as its own row has it now (two key reads), or None."""
        ...

    def list_tokens(self, kind: str | None, limit: int, cursor: str | None) -> TokenPage:
        """Up to `limit` tokens by id after `cursor`, of `kind` when given: one Query of the
        tokens' partition and one batch read of their rows."""
        ...

    def revoke_token(self, token_hash: str, at: int, event: Event | None = None) -> bool:
        """Mark the token revoked at `at`, with `event` (who revoked it) in the same
        transaction; False, and nothing written, when it already was."""
        ...

    def touch_token(self, token_hash: str, at: int, before: int) -> None:
        """Note the token's use at `at` unless already noted at or after `before`."""
        ...

    def schema_state(self) -> SchemaState:
        """The schema version the table's data is at (one key read of the meta row)."""
        ...

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None: ...
    def get_job(self, job_id: str, consistent: bool = True) -> Job | None: ...
    def void_task(self, task_id: str, keep_until: int) -> bool:
        """Take the id of a task that was never written, so that it never will be (its
        filing's late write of the task loses), until `keep_until` (epoch seconds). False,
        nothing written, when the task is there after all. Reads of it see no task."""
        ...

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None: ...
    def get_leases(self, lease_ids: list[str], consistent: bool = True) -> dict[str, Lease]: ...
    def put_worker(self, worker: Worker) -> None: ...
    def get_worker(self, pool: str, worker_id: str) -> Worker | None: ...
    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        """The first `limit` workers heard from within WORKER_RETENTION_S of `now_ms` (None:
        the wall clock), by worker_id: one bounded page of `worker_page`."""
        ...

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        """Up to `limit` unexpired workers after `cursor`, examining <= WORKER_SCAN_BUDGET rows."""
        ...

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        """Pending leases of `pool` at `priority` (None: the default), head first; with
        `due_by`, only those due by then."""
        ...

    def queue_expiring(self, pool: str, now: int, limit: int) -> list[str]:
        """Up to `limit` pending leases of `pool` whose queue timeout is at or before `now`."""
        ...

    def mark_queue(self, pool: str, mark: str, now: int) -> None:
        """Note on the pool row (`queue_marks`) that leases of a kind only some pools have may
        be pending there: a priority's partition ("0"-"9") or queue timeouts (QUEUE_EXPIRY_MARK)."""
        ...

    def unmark_queue(self, pool: str, mark: str, marked_before: int) -> bool:
        """Drop the pool's `mark` if it was last set before `marked_before`; False when a newer
        mark stands (or none)."""
        ...

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
    ) -> LeasePage: ...
    def timeline(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int | None,
        held: Sequence[Lease] = (),
    ) -> list[Event]:
        """The newest `limit` events (None: TIMELINE_CAP), oldest first. `held`: lease rows
        the caller read or wrote in this request; a task's timeline takes their stamps from
        them instead of reading those rows again."""
        ...

    def timeline_page(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int,
        cursor: str | None,
        newest_first: bool = False,
        reclaimed: Callable[[Lease], int | None] | None = None,
    ) -> EventPage:
        """Up to `limit` events after `cursor`, in the order asked for. `reclaimed` (a task's
        timeline): when each of its leases read counts as reclaimed (Kernel.reclaimed_at),
        so that one with nothing to delete shows its derived `lease.reclaimed`."""
        ...

    def commit(self, change: Change) -> None: ...
    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str
    ) -> ClaimRecord | None:
        """The record of the claim with this key (consistent read), or None."""
        ...

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        """Write `record`, naming its lease: a new record when `previous` is None, else the
        record moved on from the lease `previous`. Conflict when another call with the same
        key wrote first (the record exists, or names another lease by now)."""
        ...

    def take_request(self, record: Filed, now_ms: int) -> Filed | None:
        """Write `record` unless its key is held (answered and not expired, or taken and still
        locked); None when written, else the record that holds it (consistent read)."""
        ...

    def finish_request(self, key: str, status: int, answer: str) -> None:
        """Store the answer of the request that took `key`."""
        ...

    def drop_request(self, key: str) -> None:
        """Let `key` go (its request failed: the same key may be sent again)."""
        ...

    def wait_slots(self, token_id: str) -> dict[int, int]:
        """The worker token's waiting-claim slots that are written, each the epoch ms it is
        held until (one consistent read of one small row; none written: empty)."""
        ...

    def take_wait_slot(self, token_id: str, slot: int, now_ms: int, until_ms: int) -> None:
        """Hold `slot` until `until_ms`: Conflict when it is held beyond `now_ms`."""
        ...

    def free_wait_slot(self, token_id: str, slot: int, until_ms: int) -> None:
        """Give `slot` back: Conflict when it is no longer held until `until_ms` (its time ran
        out and another claim took it)."""
        ...

    def renew(self, lease: Lease, expect: tuple[LeaseState, int], move_due: bool = False) -> None:
        """Write a held lease's deadline, heartbeat time and lease_seconds; with `move_due`,
        its due_at (the sweeper's index entry) too — a heartbeat that shortens the lease."""
        ...

    def put_event(self, event: Event) -> None: ...
    def put_anchor(self, event: Event) -> None:
        """Put a task lease's `lease.created` as the lease's anchor on the task's timeline
        (only if new): what a timeline read finds the lease's stamped events by."""
        ...

    def list_pools(self) -> list[Pool]:
        """Every pool, by name; never more than POOL_CAP rows are read."""
        ...

    def due_leases(self, pool: str, now: int | None, limit: int | None = None) -> list[str]:
        """Held leases of `pool` whose indexed deadline is <= now (None: every held lease),
        earliest first; at most `limit` of them when set (a sweeper pass's bound)."""
        ...

    def count_held(self, pool: str, at_most: int) -> int: ...
    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        """Write deadline and due_at together, only over the deadline `seen` (absence push)."""
        ...

    def reindex(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        """Move only due_at (the sweeper's index entry) to the lease's deadline."""
        ...

    def get_sweeper_state(self) -> SweeperState: ...
    def held_count(self, scope: str, name: str) -> int:
        """How many held leases a ceiling's counter says the pool or space has."""
        ...

    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None: ...

    # ------------------------------------------------------- attachments and retention

    def put_attachment(self, attachment: Attachment, cap: int, quota_bytes: int) -> None:
        """Record a new attachment, counting it and its bytes on the lease's counter row in
        the same transaction; CeilingReached once its lease has `cap` of them, or when its
        bytes would take the lease past `quota_bytes` (`details["quota"]` is then True)."""
        ...

    def count_log_containers(self, lease_id: str, containers: list[str], cap: int) -> set[str]:
        """Count `containers` among those the lease ships logs from (each is a log stream),
        all or none, in one conditional write: CeilingReached, and nothing counted, when the
        lease would then have more than `cap`. Answers the ones that were not counted yet
        (their streams are still to be made); concurrent calls never take it past `cap`."""
        ...

    def list_attachments(self, lease_id: str) -> list[Attachment]:
        """Every attachment recorded for the lease (at most the cap), oldest first."""
        ...

    def get_attachment(self, lease_id: str, attachment_id: str) -> Attachment | None: ...
    def set_attachment_status(self, attachment: Attachment, status: str) -> None: ...
    def delete_attachments(self, lease_id: str, attachment_ids: list[str]) -> None: ...
    def ended_leases(self, pool: str, ended_before: int, limit: int) -> list[str]:
        """Ended, not yet fully reclaimed leases of `pool` with logs or attachments (keeps_detail)
        that ended at or before `ended_before`, earliest first, at most `limit` (the ended
        index: no Scan)."""
        ...

    def ended_since(self, pool: str, since: int, limit: int) -> list[str]:
        """Ended, not yet fully reclaimed leases of `pool` with logs or attachments (keeps_detail)
        that ended at or after `since`, latest first, at most `limit` (one page of the ended
        index: no Scan)."""
        ...

    def mark_reclaimed(self, lease: Lease) -> None:
        """Write `lease` (reclaimed_at set, version bumped, naming `lease.reclaimed`) over the
        stored row only while that row has no reclaimed_at: Conflict otherwise."""
        ...

    def keep_detail(self, lease: Lease) -> None:
        """Mark the lease as keeping logs or attachments (Lease.keeps_detail), without a new
        version, while it is not reclaimed (Conflict otherwise): once ended, it is found
        by the sweeper's read of ended leases, and its reclaim deletes them."""
        ...

    def unindex_ended(self, lease_id: str) -> None:
        """Take a reclaimed lease out of the ended index (its reclaim is finished)."""
        ...

    # --------------------------------------------------------- pools, spaces, instance
    def update_pool(
        self,
        name: str,
        settings: Settings,
        expect_version: int | None = None,
        superseded: PoolVersion | None = None,
    ) -> Pool:
        """Change only the named attributes of a pool row (its ceiling counter is kept); with
        `expect_version`, only while the row is still at that version, and `superseded` (the
        settings that version had) is written in the same transaction. NotFound for an unknown
        pool, Conflict when the version moved on."""
        ...

    def get_pool_version(self, pool: str, version: int) -> PoolVersion | None:
        """A superseded version's settings (the current one lives on the pool row)."""
        ...

    def update_space(self, key: str, settings: Settings) -> Space:
        """Change only the named attributes of a space row; NotFound for an unknown space."""
        ...

    def get_instance(self) -> Instance:
        """The instance settings (defaults while never written)."""
        ...

    def update_instance(self, settings: Settings) -> Instance: ...

    # ------------------------------------------------ the task graph and the scheduler

    def get_graph(self, task_id: str) -> TaskGraph:
        """The task's graph row (zeros when it has none), read consistently."""
        ...

    def get_graphs(self, task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        """Many tasks' graph rows at once (one batched read, eventually consistent unless
        asked otherwise; zeros for those with none)."""
        ...

    def task_page(self, space: str, limit: int, cursor: str | None) -> TaskPage:
        """The space's next `limit` tasks, newest first (by creation, then id), each with its
        graph row and newest lease: one index Query and batched reads by key, eventually
        consistent. A cursor of another kind or shape is ValidationFailed."""
        ...

    def newest_children(self, task_id: str, limit: int) -> list[str]:
        """Up to `limit` ids of `task_id`'s children, newest first (one bounded Query)."""
        ...

    def task_entries(self, task_ids: list[str]) -> dict[str, TaskEntry]:
        """These tasks by id (those that exist; at most a payload's inputs), each with its
        graph row and newest lease: batched reads by key, eventually consistent."""
        ...

    # ---------------------------------------------------------------- event waits

    def put_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        """Record that this block waits for (space, name, key): one row in that signal's
        partition (written before the block, so an event that reads the partition after the
        block exists finds it)."""

    def event_waits(self, space: str, name: str, key: str, limit: int) -> list[tuple[str, str]]:
        """The first `limit` (task id, block id) waiting for (space, name, key), read
        consistently (one bounded Query)."""
        ...

    def drop_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        """Forget one wait (its block cleared, or never placed); absent already is fine."""

    def put_kept_event(self, event: KeptEvent) -> None:
        """Keep the last event of its (space, name, key) until its expires_at (a TTL row)."""

    def kept_event(self, space: str, name: str, key: str) -> KeptEvent | None:
        """The kept event of (space, name, key), read consistently; None when there is none.
        An expired one may still be returned (TTL deletes lazily): the caller checks."""
        ...

    def graph_edges(
        self, task_id: str, kind: str, limit: int, after: str | None = None
    ) -> list[str]:
        """Up to `limit` ids at the far end of `task_id`'s edges of `kind` (child, dependent,
        …), in id order, starting after the id `after` when given (the next page)."""
        ...

    def edges_counted(self, task_id: str, kind: str, others: list[str]) -> dict[str, bool]:
        """For each of `task_id`'s edges of `kind` to `others` that exists: whether it counted
        (one batch read; an edge that does not exist is left out)."""
        ...

    def count_edge(self, task_id: str, kind: str, other: str, counter: str, at: int) -> bool:
        """Mark the edge counted and ADD 1 to `counter` on the graph row it counts toward (the
        parent's for a child edge, the dependent's for a dependent edge), both at once and
        only once: False when it had counted before (a replayed stream record)."""
        ...

    def in_graph(self, task_id: str) -> bool:
        """Whether the task is linked: it has a graph row or a dependent edge (one consistent
        Query of at most one row). A task filed with neither has no graph row written for
        its success; a filing that links to it after makes one of them exist."""
        ...

    def settle_graph(self, task_id: str, name: str, at: int, lease_id: str | None = None) -> bool:
        """Set `succeeded_at` (only with no child outstanding) or `rollup_at` (only when every
        child counted; it sets `succeeded_at` too) once; False when it was not due or set.
        With `lease_id` (a success of that lease) the row also names it as `succeeded_lease`
        in the same write, or, when `succeeded_at` was not due, in a write of its own unless
        the row names a newer lease already."""
        ...

    def get_scheduler(self, consistent: bool = True) -> SchedulerState: ...
    def set_scheduler_paused(self, paused: bool, by: str, at: int) -> None: ...
    def count_queue(
        self, pool: str, created_before: int | None, at_most: int, priority: int | None = None
    ) -> int:
        """How many pending leases of `pool` at `priority` (None: the default) the queue index
        holds (created before the given instant, when set), reading at most `at_most`."""
        ...

    def queue_page(
        self, pool: str, created_before: int | None, limit: int, priority: int | None = None
    ) -> list[str]:
        """The oldest pending lease ids of `pool` at `priority` (None: the default) created
        before the instant, at most `limit`."""
        ...


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    def head(self, key: str) -> tuple[int, str] | None:
        """(size, content type) of a stored object, or None when there is none."""
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
