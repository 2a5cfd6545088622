"""The store's ports, one per aggregate: what a use case may read and write, named in its
constructor. `Store` is all of them at once, for what holds the whole table."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Protocol

from tenure.app.ports import (
    WORKER_SAYS,
    WORKERS_CAP,
    Attachment,
    Change,
    ClaimRecord,
    DueEntry,
    EventPage,
    Filed,
    LeasePage,
    SchedulerState,
    Settings,
    SignalBump,
    SpacePage,
    SweeperState,
    TaskEntry,
    TaskPage,
    TokenPage,
    WorkerPage,
)
from tenure.app.rules.ports import RuleStore
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
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.transitions import SignalKey
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.schema_versions import SchemaState


class SpaceRows(Protocol):
    """Spaces and their workflows."""

    def put_space(self, space: Space) -> None: ...
    def get_space(self, key: str) -> Space | None: ...
    def list_spaces(
        self, limit: int, cursor: str | None, only: tuple[str, ...] | None = None
    ) -> SpacePage:
        """Up to `limit` spaces by key after `cursor`: one Query of the spaces' list partition
        and one batch read of their rows; with `only`, those spaces alone (one batch read)."""
        ...

    def update_space(self, key: str, settings: Settings) -> Space:
        """Change only the named attributes of a space row; NotFound for an unknown space."""
        ...

    def put_workflow(self, workflow: Workflow) -> None: ...
    def get_workflow(self, space: str, slug: str) -> Workflow | None: ...


class PoolRows(Protocol):
    """Pools, their superseded versions and queue marks, and the instance settings."""

    def put_pool(self, pool: Pool) -> None: ...
    def get_pool(self, name: str) -> Pool | None: ...
    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        """Set these of the pool's gates (Pool.space_archived, space_ceiling,
        instance_ceiling; nothing else, no new version) only while the pool exists and the
        space's and instance's rows they copy still say so; False otherwise (the write that
        moved one copies its own value after it)."""
        ...

    def list_pools(self, consistent: bool = False) -> list[Pool]:
        """Every pool, by name; never more than POOL_CAP rows are read. `consistent`: a pool
        made a moment ago is among them (what a write that copies its space's or the
        instance's settings onto every pool row goes by)."""
        ...

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

    def mark_queue(self, pool: str, mark: str, now: int) -> None:
        """Note on the pool row (`queue_marks`) that leases of a kind only some pools have may
        be pending there: a priority's partition ("0"-"9") or queue timeouts (QUEUE_EXPIRY_MARK)."""
        ...

    def unmark_queue(self, pool: str, mark: str, marked_before: int) -> bool:
        """Drop the pool's `mark` if it was last set before `marked_before`; False when a newer
        mark stands (or none)."""
        ...

    def get_instance(self) -> Instance:
        """The instance settings (defaults while never written)."""
        ...

    def update_instance(self, settings: Settings) -> Instance: ...


class TaskRows(Protocol):
    """Task rows, their keys and numbers, and the space's task lists."""

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None: ...
    def void_task(self, task_id: str, keep_until: int) -> bool:
        """Take the id of a task that was never written, so that it never will be (its
        filing's late write of the task loses), until `keep_until` (epoch seconds). False,
        nothing written, when the task is there after all. Reads of it see no task."""
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


class GraphRows(Protocol):
    """The task graph: each task's graph row and its edges."""

    def get_graph(self, task_id: str) -> TaskGraph:
        """The task's graph row (zeros when it has none), read consistently."""
        ...

    def get_graphs(self, task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        """Many tasks' graph rows at once (one batched read, eventually consistent unless
        asked otherwise; zeros for those with none)."""
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

    def linked_task(self, task_id: str) -> tuple[Task | None, bool]:
        """The task (None when there is none) and whether it is linked, as `in_graph`, in one
        consistent read of both."""
        ...

    def settle_graph(self, task_id: str, name: str, at: int, lease_id: str | None = None) -> bool:
        """Set `succeeded_at` (only with no child outstanding) or `rollup_at` (only when every
        child counted; it sets `succeeded_at` too) once; False when it was not due or set.
        With `lease_id` (a success of that lease) the row also names it as `succeeded_lease`
        in the same write, or, when `succeeded_at` was not due, in a write of its own unless
        the row names a newer lease already."""
        ...


class EventWaitRows(Protocol):
    """Blocks waiting for named events, and the events kept for late waiters."""

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


class TokenRows(Protocol):
    """API tokens, by hash and by id."""

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


class SchemaRows(Protocol):
    """The schema version the table's data is at."""

    def schema_state(self) -> SchemaState:
        """The schema version the table's data is at (one key read of the meta row)."""
        ...


class LeaseRows(Protocol):
    """Lease and job rows, and the writes of a held lease's timing outside a commit."""

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None: ...
    def get_leases(self, lease_ids: list[str], consistent: bool = True) -> dict[str, Lease]: ...
    def get_job(self, job_id: str, consistent: bool = True) -> Job | None: ...
    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        """A page of the space's leases, newest first, in a bounded read; `state`, `pool` and
        `subjects` (the subject kinds kept) filter it."""
        ...

    def renew(
        self,
        lease: Lease,
        expect: tuple[LeaseState, int],
        move_due: bool = False,
        signal: SignalBump | None = None,
    ) -> None:
        """Write a held lease's deadline, heartbeat time and lease_seconds; with `move_due`,
        its due_at (the sweeper's index entry) too — a heartbeat that shortens the lease; with
        `signal`, raise that worker's signal epoch in the same transaction."""
        ...

    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        """Write deadline, due_at and the absence's mark (`pushed_for`) together, only over the
        state, fence and deadline `seen`, and only on a lease not marked with that mark yet
        (the push after the sweeper's own absence)."""
        ...

    def reindex(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        """Move only due_at (the sweeper's index entry) to the lease's deadline."""
        ...


class QueueRows(Protocol):
    """The pending and held leases' indexes, and the ceilings' counters."""

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        """Pending leases of `pool` at `priority` (None: the default), head first; with
        `due_by`, only those due by then."""
        ...

    def queue_expiring(self, pool: str, now: int, limit: int) -> list[str]:
        """Up to `limit` pending leases of `pool` whose queue timeout is at or before `now`."""
        ...

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

    def due_leases(self, pool: str, now: int | None, limit: int | None = None) -> list[str]:
        """Held leases of `pool` whose indexed deadline is <= now (None: every held lease),
        earliest first; at most `limit` of them when set (a sweeper pass's bound)."""
        ...

    def due_page(self, pool: str, after: DueEntry | None, limit: int) -> list[DueEntry]:
        """At most `limit` entries of `pool`'s due index (its held leases), in index order,
        those after `after` alone when it is set (the entry need not be there any more)."""
        ...

    def count_held(self, pool: str, at_most: int) -> int: ...
    def held_count(self, scope: str, name: str) -> int:
        """How many held leases a ceiling's counter says the pool or space has."""
        ...


class WorkerRows(Protocol):
    """The workers heard from, per pool."""

    def note_worker(self, worker: Worker, heard: Collection[str] = WORKER_SAYS) -> None:
        """Write that the worker was heard from at its last_seen, and of what it says of
        itself (WORKER_SAYS) the fields named in `heard`, each as `worker` has it (a None one
        removed). A field not heard stays as stored: what the worker said through another
        process since is never written over with an older copy."""
        ...

    def get_worker(self, pool: str, worker_id: str) -> Worker | None: ...
    def signal_epoch(self, key: SignalKey) -> int:
        """The epoch of the worker's signal row, read eventually consistent (0: no row yet).
        Only raised, in the transaction of a write its heartbeat must hear of."""
        ...

    def signal_secret(self) -> str | None:
        """The instance's secret that seals what a worker heartbeat vouches for (read
        consistently; None until the first heartbeat that asked for a signal kept one)."""
        ...

    def keep_signal_secret(self, secret: str) -> str:
        """Keep `secret` as the instance's unless one is kept already: the one kept."""
        ...

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


class TimelineRows(Protocol):
    """Events on a subject's timeline."""

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

    def put_event(self, event: Event) -> None: ...
    def put_anchor(self, event: Event) -> None:
        """Put a task lease's `lease.created` as the lease's anchor on the task's timeline
        (only if new): what a timeline read finds the lease's stamped events by."""
        ...


class Committer(Protocol):
    """The one write of a Change: every row in it lands, on its condition, or none does."""

    def commit(self, change: Change) -> None: ...


class ClaimRecords(Protocol):
    """What a claim_id named, and a worker token's waiting-claim slots."""

    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str, consistent: bool = True
    ) -> ClaimRecord | None:
        """The record of the claim with this key, or None (`consistent`: a strongly
        consistent read; else a copy that may lag its latest write by about a second)."""
        ...

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        """Write `record`, naming its lease: a new record when `previous` is None, else the
        record moved on from the lease `previous`. Conflict when another call with the same
        key wrote first (the record exists, or names another lease by now)."""
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


class RequestRecords(Protocol):
    """Idempotency records of requests sent with a key."""

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


class SweeperRows(Protocol):
    """The sweeper's own state and the dispatch controls' row."""

    def get_sweeper_state(self) -> SweeperState: ...
    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None: ...
    def get_scheduler(self, consistent: bool = True) -> SchedulerState: ...
    def set_scheduler_paused(self, paused: bool, by: str, at: int) -> None: ...


class RetentionRows(Protocol):
    """Ended leases that keep logs or attachments, until they are reclaimed."""

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


class AttachmentRows(Protocol):
    """Attachments and log containers, counted on their lease."""

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


class Store(
    SpaceRows,
    PoolRows,
    TaskRows,
    GraphRows,
    EventWaitRows,
    TokenRows,
    SchemaRows,
    LeaseRows,
    QueueRows,
    WorkerRows,
    TimelineRows,
    Committer,
    ClaimRecords,
    RequestRecords,
    SweeperRows,
    RetentionRows,
    AttachmentRows,
    Protocol,
):
    """Every row port at once: what one object holding the whole table offers (the
    in-memory fake of the tests, the composed adapter). A use case names the ports it uses."""


@record
class Rows:
    """One object per port, as the adapter composes them: what `compose()` hands out, each use
    case taking only the ones it names."""

    spaces: SpaceRows
    pools: PoolRows
    tasks: TaskRows
    graph: GraphRows
    event_waits: EventWaitRows
    tokens: TokenRows
    schema: SchemaRows
    leases: LeaseRows
    queues: QueueRows
    workers: WorkerRows
    timeline: TimelineRows
    committer: Committer
    claims: ClaimRecords
    requests: RequestRecords
    sweeper: SweeperRows
    retention: RetentionRows
    attachments: AttachmentRows
    rules: RuleStore

    @classmethod
    def of(cls, store: Store, rules: RuleStore) -> Rows:
        """Every port served by the one object that holds the whole table (and its rules,
        most often the same object)."""
        return cls(
            spaces=store,
            pools=store,
            tasks=store,
            graph=store,
            event_waits=store,
            tokens=store,
            schema=store,
            leases=store,
            queues=store,
            workers=store,
            timeline=store,
            committer=store,
            claims=store,
            requests=store,
            sweeper=store,
            retention=store,
            attachments=store,
            rules=rules,
        )
