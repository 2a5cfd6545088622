"""An in-memory Store with the DynamoDB adapter's semantics (conditions, indexes, cursors), for
unit tests.

It keeps entities instead of DynamoDB items, but follows the real adapter wherever the service
could tell the difference: every conditional write fails with `Conflict` exactly when the real
condition expression would, a commit lands all or nothing, the sparse indexes hold exactly the
rows the real ones would, and values come back as a DynamoDB round trip returns them. The table
stream's reactor is played synchronously inside `commit`, so timelines can be read at once.
Not thread-safe: it exists to test service logic fast.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, assert_never

from tenure.app.migrations import SchemaState
from tenure.app.ports import (
    INSTANCE_CEILING,
    LIST_SCAN_BUDGET,
    MAX_CHANGE_ITEMS,
    OWN_LIMIT_CEILINGS,
    POOL_CAP,
    TIMELINE_CAP,
    WORKER_RETENTION_S,
    WORKER_SAYS,
    WORKER_SCAN_BUDGET,
    WORKERS_CAP,
    AddCounts,
    AddUsage,
    Advance,
    Attachment,
    Ceiling,
    Change,
    ClaimRecord,
    Clock,
    CopySuccess,
    DueEntry,
    Edge,
    EventPage,
    Filed,
    GraphOp,
    LeasePage,
    Link,
    Mark,
    MarkHasChildren,
    Reach,
    RecordWrite,
    RequireJobLease,
    RequireLeaseOpen,
    RequireNotSucceeded,
    RequireRun,
    RequireSucceeded,
    SchedulerState,
    Settings,
    SignalBump,
    SpacePage,
    SweeperState,
    TaskEntry,
    TaskPage,
    TokenPage,
    Unedge,
    WorkerPage,
)
from tenure.domain.errors import AlreadyExists, CeilingReached, Conflict, NotFound
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
    first_job_id,
    implied_pair,
    may_be_implied,
)
from tenure.domain.states import REPORTABLE, LeaseState, SubjectKind
from tenure.domain.timeline import (
    first_lease_id,
    graph_event,
    lease_events,
    task_event,
    task_side_events,
)
from tenure.domain.transitions import SignalKey
from tenure.store import cursors, items
from tenure.store import keys as k
from tenure.store.keys import queue_at

from tests.unit.fake_rules import FakeRules

E = TypeVar("E")


def _plain(value: Any) -> Any:
    """A nested value as a DynamoDB round trip returns it (whole floats become ints)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _stored(entity: E) -> E:
    """A private copy of an entity, with its JSON documents normalised like a stored item."""
    changes = {
        f.name: _plain(copy.deepcopy(getattr(entity, f.name)))
        for f in dataclasses.fields(entity)  # type: ignore[arg-type]
        if isinstance(getattr(entity, f.name), dict | list)
    }
    return replace(entity, **changes) if changes else entity  # type: ignore[type-var]


def _stored_event(event: Event) -> Event:
    # An event row keeps its subject kind as plain text, whatever enum it was written with.
    return _stored(replace(event, subject_kind=str(event.subject_kind)))


def _position(lease: Lease) -> str:
    # The per-space list's sort key: creation time, then id (store.keys.space_list_keys).
    return k.space_position(lease.created_at, lease.id)


def _worker_sk(worker_id: str) -> str:
    return k.worker_key("", worker_id)[k.SK]


def _queue_position(lease: Lease) -> str:
    # The queue index's sort key: when the lease becomes claimable (store.keys.queue_at).
    return f"{queue_at(lease.created_at, lease.not_before):013d}#{lease.id}"


def _limit(limit: int) -> None:
    if limit < 1:
        raise ValueError("a page needs a limit of at least 1")


def _claim_of(claim: ClaimRecord) -> tuple[str, str, str, str]:
    return (claim.pool, claim.claimant, claim.worker_id, claim.claim_id)


@dataclass
class _LeaseRow:
    lease: Lease
    # True when the last full write put the row into the per-pool due index (it carries
    # due_pk); move_deadline rewrites due_at but never adds or removes due_pk.
    due_indexed: bool


class FakeStore(FakeRules):
    # Per-call page budgets (app/ports.py); instances may lower them (the contract tests do).
    list_budget = LIST_SCAN_BUDGET
    worker_budget = WORKER_SCAN_BUDGET
    timeline_cap = TIMELINE_CAP

    def __init__(self, clock: Clock | None = None) -> None:
        # The wall clock DynamoDB's TTL runs on, for reads not given `now_ms`. Without one,
        # the fake never expires a worker row (its unit tests run in 2026-01-01).
        self.clock = clock
        self.spaces: dict[str, Space] = {}
        self.task_seq: dict[str, int] = {}
        self.workflows: dict[tuple[str, str], Workflow] = {}
        self.pools: dict[str, Pool] = {}
        self.active: dict[tuple[str, str], int] = {}  # ceiling counters (pool/space rows)
        self.tokens: dict[str, Token] = {}
        self.token_names: dict[str, str] = {}
        # The tokens' list rows, by id: the token's hash. A token written by a release older
        # than the list has none until `tenure admin migrate` writes it.
        self.token_list: dict[str, str] = {}
        # The spaces' list rows (GET /spaces), written with the space.
        self.space_list: set[str] = set()
        # Key rows of tasks filed before ids were derived from keys (key -> task id).
        self.task_keys: dict[str, str] = {}
        # The schema version the data is at, and a migration's saved position.
        self.schema: SchemaState = SchemaState()
        self.tasks: dict[str, Task] = {}
        self.voided_tasks: set[str] = set()  # ids a claim gave up (the adapter's void_task)
        self.jobs: dict[str, Job] = {}
        self.lease_rows: dict[str, _LeaseRow] = {}
        self.workers: dict[tuple[str, str], Worker] = {}
        self.worker_expiry: dict[tuple[str, str], int] = {}  # the rows' TTL (epoch seconds)
        self.signals: dict[SignalKey, int] = {}  # workers' signal epochs (domain/signals.py)
        self.claims: dict[tuple[str, str, str, str], ClaimRecord] = {}
        self.requests: dict[str, Filed] = {}
        # A worker token's waiting-claim slots: slot number -> held until (epoch ms).
        self.wait_slot_rows: dict[str, dict[int, int]] = {}
        self.timelines: dict[tuple[str, str], dict[str, Event]] = {}
        self.sweeper: SweeperState | None = None
        self.pool_versions: dict[tuple[str, int], PoolVersion] = {}
        self.instance = Instance()
        # Every write the service asked for, by method name (tests count writes per call).
        self.writes: list[str] = []
        self.queue_reads: list[tuple[str, int | None]] = []  # (pool, priority) per queue read
        # The task graph's side rows and the scheduler row (store.keys).
        self.graphs: dict[str, TaskGraph] = {}
        self.edges: dict[tuple[str, str, str], int | None] = {}  # (task, kind, other) -> counted
        # Event waits: (space, name, key) -> (task id, block id) in key order; kept events.
        self.event_wait_rows: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
        self.kept_events: dict[tuple[str, str, str], KeptEvent] = {}
        self.scheduler = SchedulerState()
        # The stream's reactions, played after each commit like the stream would (the rig
        # sets it to the reactions table's `react_to_rows`); rows: (entity, old, new).
        self.reactor: Any = None

    # ------------------------------------------------------------------ set-up resources

    def put_space(self, space: Space) -> None:
        self.writes.append("put_space")
        if space.key in self.spaces:
            raise AlreadyExists(f"space {space.key} already exists")
        self.spaces[space.key] = _stored(space)
        self.space_list.add(space.key)

    def get_space(self, key: str) -> Space | None:
        return self.spaces.get(key)

    def list_spaces(
        self, limit: int, cursor: str | None, only: tuple[str, ...] | None = None
    ) -> SpacePage:
        position = cursors.decode(cursor, "spaces", k.LISTED_SPACE_SHAPE) if cursor else ""
        listed = self.space_list if only is None else set(only)
        keys = sorted(key for key in listed if f"SPACE#{key}" > position)
        page = keys[:limit]
        after = cursors.encode("spaces", f"SPACE#{page[-1]}") if len(keys) > limit else None
        return SpacePage(tuple(self.spaces[key] for key in page if key in self.spaces), after)

    def next_task_number(self, space: str) -> int:
        self.writes.append("next_task_number")
        if space not in self.spaces:
            raise NotFound(f"space {space!r} does not exist")
        self.task_seq[space] = self.task_seq.get(space, 0) + 1
        return self.task_seq[space]

    def task_id_by_key(self, key: str) -> str | None:
        return self.task_keys.get(key)

    def put_workflow(self, workflow: Workflow) -> None:
        self.writes.append("put_workflow")
        key = (workflow.space, workflow.slug)
        if key in self.workflows:
            raise AlreadyExists(
                f"workflow {workflow.slug} in space {workflow.space} already exists"
            )
        self.workflows[key] = _stored(workflow)

    def get_workflow(self, space: str, slug: str) -> Workflow | None:
        return self.workflows.get((space, slug))

    def put_pool(self, pool: Pool) -> None:
        self.writes.append("put_pool")
        if pool.name in self.pools:
            raise AlreadyExists(f"pool {pool.name} already exists")
        self.pools[pool.name] = _stored(pool)

    def get_pool(self, name: str) -> Pool | None:
        return self.pools.get(name)

    def list_pools(self, consistent: bool = False) -> list[Pool]:
        return [self.pools[name] for name in sorted(self.pools)][:POOL_CAP]

    def put_token(self, token: Token, event: Event | None = None) -> None:
        self.writes.append("put_token")
        # One transaction, each put only if new: the name, the hash, the list row, the event.
        if token.name in self.token_names or token.token_hash in self.tokens:
            raise AlreadyExists(f"token {token.name} already exists")
        self._event_is_new(event)
        self.token_names[token.name] = token.id
        self.tokens[token.token_hash] = _stored(token)
        self.token_list[token.id] = token.token_hash
        if event is not None:
            self._add_event(event)

    def get_token(self, token_hash: str) -> Token | None:
        return self.tokens.get(token_hash)

    def get_token_by_id(self, token_id: str) -> Token | None:
        token_hash = self.token_list.get(token_id)
        return self.tokens.get(token_hash) if token_hash else None

    def list_tokens(self, kind: str | None, limit: int, cursor: str | None) -> TokenPage:
        position = cursors.decode(cursor, "tokens", k.TOKEN_ID_SHAPE) if cursor else ""
        listed = sorted(
            (self.tokens[h] for i, h in self.token_list.items() if f"TOKEN#{i}" > position),
            key=lambda t: t.id,
        )
        page, more = listed[:limit], len(listed) > limit
        after = cursors.encode("tokens", f"TOKEN#{page[-1].id}") if more else None
        return TokenPage(tuple(t for t in page if kind is None or t.kind == kind), after)

    def revoke_token(self, token_hash: str, at: int, event: Event | None = None) -> bool:
        token = self.tokens.get(token_hash)
        if token is None or token.revoked_at is not None:
            return False
        self._event_is_new(event)
        self.writes.append("revoke_token")
        self.tokens[token_hash] = replace(token, revoked_at=at)
        if event is not None:
            self._add_event(event)
        return True

    # ------------------------------------------------------- schema and migrations

    def schema_state(self) -> SchemaState:
        return self.schema

    def save_schema(self, expect: SchemaState, new: SchemaState) -> bool:
        if self.schema != expect:
            return False
        self.writes.append("save_schema")
        self.schema = replace(new, step=expect.step + 1)
        return True

    def scan_tokens(self, cursor: str | None, limit: int) -> tuple[list[Token], str | None]:
        hashes = sorted(h for h in self.tokens if cursor is None or h > cursor)
        page = hashes[:limit]
        after = page[-1] if len(hashes) > limit else None
        return [self.tokens[h] for h in page], after

    def listed_token_ids(self, token_ids: list[str]) -> set[str]:
        return {i for i in token_ids if i in self.token_list}

    def list_token(self, token: Token) -> bool:
        if token.id in self.token_list or token.token_hash not in self.tokens:
            return False
        self.writes.append("list_token")
        self.token_list[token.id] = token.token_hash
        return True

    def scan_spaces(self, cursor: str | None, limit: int) -> tuple[list[Space], str | None]:
        keys = sorted(key for key in self.spaces if cursor is None or key > cursor)
        page = keys[:limit]
        after = page[-1] if len(keys) > limit else None
        return [self.spaces[key] for key in page], after

    def listed_space_keys(self, keys: list[str]) -> set[str]:
        return {key for key in keys if key in self.space_list}

    def list_space(self, space: Space) -> bool:
        if space.key in self.space_list or space.key not in self.spaces:
            return False
        self.writes.append("list_space")
        self.space_list.add(space.key)
        return True

    def scan_tasks(self, cursor: str | None, limit: int) -> tuple[list[Task], str | None]:
        ids = sorted(i for i in self.tasks if cursor is None or i > cursor)
        page = ids[:limit]
        after = page[-1] if len(ids) > limit else None
        return [self.tasks[i] for i in page], after

    def keyed_tasks(self, keys: list[str]) -> set[str]:
        return {key for key in keys if key in self.task_keys}

    def key_task(self, task: Task) -> bool:
        if task.key in self.task_keys:
            return False
        self.writes.append("key_task")
        self.task_keys[task.key] = task.id
        return True

    def children_marked(self, task_ids: list[str]) -> set[str]:
        return {t for t in task_ids if t in self.tasks and self.tasks[t].has_children}

    def mark_children(self, task_id: str) -> bool:
        task = self.tasks.get(task_id)
        if task is None or task.has_children:
            return False
        self.writes.append("mark_children")
        self.tasks[task_id] = replace(task, has_children=True)
        return True

    def scan_held_leases(self, cursor: str | None, limit: int) -> tuple[list[Lease], str | None]:
        # The due index's held partitions: every lease held with a deadline.
        ids = sorted(
            i
            for i, row in self.lease_rows.items()
            if row.lease.state in REPORTABLE
            and row.lease.due_at is not None
            and (cursor is None or i > cursor)
        )
        page = ids[:limit]
        after = page[-1] if len(ids) > limit else None
        return [self.lease_rows[i].lease for i in page], after

    def mark_keeps_detail(self, lease: Lease) -> bool:
        row = self.lease_rows.get(lease.id)
        if row is None or row.lease.reclaimed_at is not None or row.lease.keeps_detail:
            return False
        self.writes.append("mark_keeps_detail")
        row.lease = replace(row.lease, keeps_detail=True)  # no new version, as on the table
        return True

    def scan_pools(self, cursor: str | None, limit: int) -> tuple[list[Pool], str | None]:
        names = sorted(n for n in self.pools if cursor is None or n > cursor)
        page = names[:limit]
        after = page[-1] if len(names) > limit else None
        return [self.pools[n] for n in page], after

    def gate_sources(self, space_keys: list[str]) -> tuple[dict[str, Space], Instance]:
        return {k: self.spaces[k] for k in space_keys if k in self.spaces}, self.instance

    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        name = pool.name
        space = self.spaces.get(pool.space)
        sources = {
            "space_archived": space is not None and space.archived,
            "space_ceiling": space is not None and space.max_active is not None,
            "instance_ceiling": self.instance.max_active is not None,
        }
        if any(sources[gate] != value for gate, value in gates.items()):
            return False  # as the table's checks on the space and instance rows
        if space is None and ("space_archived" in gates or "space_ceiling" in gates):
            return False
        if name not in self.pools:
            return False
        self.writes.append("write_pool_gates")
        self.pools[name] = self._settled(self.pools[name], Settings(set=dict(gates)))
        return True

    def touch_token(self, token_hash: str, at: int, before: int) -> None:
        token = self.tokens.get(token_hash)
        if token is None or (token.last_used_at is not None and token.last_used_at > before):
            return
        self.writes.append("touch_token")
        self.tokens[token_hash] = replace(token, last_used_at=at)

    # ------------------------------------------------------------ tasks, jobs, leases

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None:
        return self.tasks.get(task_id)

    def get_job(self, job_id: str, consistent: bool = True) -> Job | None:
        return self.jobs.get(job_id)

    def void_task(self, task_id: str, keep_until: int) -> bool:
        if task_id in self.tasks:
            return False
        self.writes.append("void_task")
        self.voided_tasks.add(task_id)
        return True

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None:
        row = self.lease_rows.get(lease_id)
        return row.lease if row else None

    def get_leases(self, lease_ids: Iterable[str], consistent: bool = True) -> dict[str, Lease]:
        found: dict[str, Lease] = {}
        for lease_id in dict.fromkeys(lease_ids):
            row = self.lease_rows.get(lease_id)
            if row is not None:
                found[lease_id] = row.lease
        return found

    def note_worker(self, worker: Worker, heard: Collection[str] = WORKER_SAYS) -> None:
        self.writes.append("note_worker")
        stored = self.workers.get((worker.pool, worker.worker_id))
        if stored is not None:  # a field not heard stays as stored
            kept = {name: getattr(stored, name) for name in WORKER_SAYS - set(heard)}
            worker = replace(worker, **kept)
        self.workers[(worker.pool, worker.worker_id)] = _stored(worker)
        expires = worker.last_seen // 1000 + WORKER_RETENTION_S
        self.worker_expiry[(worker.pool, worker.worker_id)] = expires

    def get_worker(self, pool: str, worker_id: str) -> Worker | None:
        return self.workers.get((pool, worker_id))

    def signal_epoch(self, key: SignalKey) -> int:
        return self.signals.get(key, 0)

    def signal_secret(self) -> str | None:
        return getattr(self, "_signal_secret", None)

    def keep_signal_secret(self, secret: str) -> str:
        self.writes.append("keep_signal_secret")
        kept = self.signal_secret()
        if kept is None:
            self._signal_secret = kept = secret
        return kept

    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        return self.worker_page(pool, limit, None, now_ms).workers

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        _limit(limit)
        kind, shape = k.WORKER_CURSOR
        start = cursors.decode(cursor, kind, shape) if cursor else None
        now_ms = self.clock.now_ms() if now_ms is None and self.clock else now_ms
        rows = sorted(
            (_worker_sk(w), key)
            for key, w in self.workers.items()
            if key[0] == pool and (start is None or _worker_sk(w) > start)
        )
        found: list[tuple[str, Worker]] = []
        for examined, (sk, key) in enumerate(rows, start=1):
            if now_ms is None or self.worker_expiry[key] > now_ms // 1000:
                found.append((sk, self.workers[key]))
            if len(found) > limit:
                return WorkerPage([w for _, w in found[:limit]], cursors.encode(kind, found[-2][0]))
            if examined >= self.worker_budget and examined < len(rows):
                return WorkerPage([w for _, w in found], cursors.encode(kind, sk))
        return WorkerPage([w for _, w in found], None)

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        if limit < 1:
            raise ValueError("a query's Limit must be at least 1")
        self.queue_reads.append((pool, priority))
        partition = k.queue_pk(pool, priority)
        queued = sorted(
            _queue_position(row.lease)
            for row in self.lease_rows.values()
            if row.lease.state is LeaseState.PENDING
            and k.queue_pk(row.lease.pool, row.lease.priority) == partition
            and (due_by is None or queue_at(row.lease.created_at, row.lease.not_before) <= due_by)
        )
        return [position.split("#", 1)[1] for position in queued[:limit]]

    def queue_expiring(self, pool: str, now: int, limit: int) -> list[str]:
        _limit(limit)
        due = sorted(
            (row.lease.queue_expires_at, row.lease.id)
            for row in self.lease_rows.values()
            if row.lease.state is LeaseState.PENDING
            and row.lease.pool == pool
            and row.lease.queue_expires_at is not None
            and row.lease.queue_expires_at <= now
        )
        return [lease_id for _, lease_id in due[:limit]]

    def mark_queue(self, pool: str, mark: str, now: int) -> None:
        self.writes.append("mark_queue")
        current = self.pools[pool]
        marks = {**(current.queue_marks or {}), mark: now}
        self.pools[pool] = replace(current, queue_marks=marks)

    def unmark_queue(self, pool: str, mark: str, marked_before: int) -> bool:
        current = self.pools[pool]
        marks = dict(current.queue_marks or {})
        if marks.get(mark, marked_before) >= marked_before:
            return False
        self.writes.append("unmark_queue")
        del marks[mark]
        self.pools[pool] = replace(current, queue_marks=marks or None)
        return True

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        # As the adapter: at most `list_budget` index entries examined, the cursor after the
        # last one examined, null only when the index holds nothing further. Without the
        # task kind in `subjects`, the leases listed through their tasks are not examined.
        _limit(limit)
        kind, shape = k.LEASE_CURSOR
        start = cursors.decode_in(cursor, kind, shape, space) if cursor else None
        by_task = subjects is None or SubjectKind.TASK in subjects
        newest_first = sorted(
            (
                row.lease
                for row in self.lease_rows.values()
                if row.lease.space == space
                and (start is None or _position(row.lease) < start)
                and (by_task or not row.lease.via_task)
            ),
            key=_position,
            reverse=True,
        )
        found: list[Lease] = []
        for examined, lease in enumerate(newest_first, start=1):
            if (
                (state is None or lease.state is state)
                and (pool is None or lease.pool == pool)
                and (subjects is None or lease.subject_kind in subjects)
            ):
                found.append(lease)
            more = examined < len(newest_first)
            if more and (len(found) == limit or examined >= self.list_budget):
                return LeasePage(found, cursors.encode_in(kind, space, _position(lease)))
        return LeasePage(found, None)

    def task_page(self, space: str, limit: int, cursor: str | None) -> TaskPage:
        # As the adapter: newest first by (created_at, id) on tasks_by_space, `limit` a page.
        _limit(limit)
        kind, shape = k.TASK_CURSOR
        start = cursors.decode(cursor, kind, shape) if cursor else None
        newest_first = sorted(
            (
                (k.space_position(t.created_at, t.id), t)
                for t in self.tasks.values()
                if t.space == space
            ),
            key=lambda pair: pair[0],
            reverse=True,
        )
        rest = [(p, t) for p, t in newest_first if start is None or p < start]
        entries = []
        for position, task in rest[:limit]:
            job = self.jobs.get(task.job_id) if task.job_id else None
            lease_id = job.lease_id if job else None
            if job is None and task.job_id == first_job_id(task.id):
                lease_id = first_lease_id(task.id)  # a first job with no row yet
            lease = self.lease_rows.get(lease_id) if lease_id else None
            entries.append(
                TaskEntry(
                    task=task,
                    graph=self._graph(task.id),
                    lease=lease.lease if lease else None,
                    cursor=cursors.encode(kind, position),
                )
            )
        more = len(rest) > limit
        return TaskPage(entries, entries[-1].cursor if more else None)

    def timeline(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int | None,
        held: Sequence[Lease] = (),
    ) -> list[Event]:
        # Its timelines are rows the reactor wrote, stamps included: nothing to read of `held`.
        want = self.timeline_cap if limit is None else min(limit, self.timeline_cap)
        _limit(want)
        rows = self.timelines.get((str(subject_kind), subject_id), {})
        return [rows[sk] for sk in sorted(rows)][-want:]

    def timeline_page(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int,
        cursor: str | None,
        newest_first: bool = False,
        reclaimed: Callable[[Lease], int | None] | None = None,
    ) -> EventPage:
        # Every event here is a row of its own (no stamps): no lease is read for them.
        _limit(limit)
        kind, shape = k.EVENT_CURSOR
        start = cursors.decode(cursor, kind, shape) if cursor else None
        rows = self.timelines.get((str(subject_kind), subject_id), {})
        after = [
            sk
            for sk in sorted(rows, reverse=newest_first)
            if start is None or (sk < start if newest_first else sk > start)
        ]
        page = after[:limit]
        more = len(after) > limit
        return EventPage(
            [rows[sk] for sk in page], cursors.encode(kind, page[-1]) if more else None
        )

    # ------------------------------------------------------------------------ writes

    def commit(self, change: Change) -> None:
        self.writes.append("commit")
        targets = (
            [("lease", w.new.id) for w in change.leases]
            + [("job", w.new.id) for w in change.jobs]
            + [("task", w.new.id) for w in change.tasks]
            + [_graph_target(g) for g in change.graph]
            + [("scheduler", "") for _ in change.holds]
            + [("claim", str(_claim_of(rw.record))) for rw in change.records]
            + [("signal", repr(bump.key)) for bump in change.signals]
        )
        if not targets:
            raise ValueError("a transaction needs at least one item")
        # The table refuses a whole transaction of more items than it holds.
        if len(targets) + len(change.ceilings) + len(change.job_checks) > MAX_CHANGE_ITEMS:
            raise ValueError(f"a transaction holds at most {MAX_CHANGE_ITEMS} items")
        if len(set(targets)) != len(targets):
            raise ValueError("a transaction cannot write one item twice")
        reasons = self._failed_conditions(change)
        if reasons:
            raise Conflict("a conditional write lost", reasons=reasons)
        # As conditions.BELOW_CEILING: against the row's own max_active, not the claimer's copy
        # (conditions.BELOW_LIMIT: a key's or a minute's counter against the limit the claim sends).
        full = [
            c
            for c in change.ceilings
            if c.delta > 0
            and c.limit is not None
            and (limit := self._max_active(c)) is not None
            and self.active.get((c.scope, c.name), 0) >= limit
        ]
        if full:
            raise CeilingReached(
                "a ceiling is full",
                scope=full[0].scope,
                name=full[0].name,
                reasons=[f"{c.scope} {c.name} is full" for c in full],
            )
        for c in change.ceilings:
            self.active[(c.scope, c.name)] = self.active.get((c.scope, c.name), 0) + c.delta
        olds = [
            row.lease if (row := self.lease_rows.get(lw.new.id)) else None for lw in change.leases
        ]
        for lw in change.leases:
            old_row = self.lease_rows.get(lw.new.id)
            new = _stored(lw.new)
            indexed = new.state in REPORTABLE and new.due_at is not None
            if not indexed:
                new = replace(new, due_at=None)  # the row drops due_at with due_pk
            self.lease_rows[new.id] = _LeaseRow(new, indexed)
            for event in lease_events(old_row.lease if old_row else None, new):
                self._react(event)
        for jw in change.jobs:
            self.jobs[jw.new.id] = _stored(jw.new)
        for rw in change.records:
            self.claims[_claim_of(rw.record)] = rw.record
        task_rows: list[tuple[str, Any, Any]] = []
        for tw in change.tasks:
            old_task = self.tasks.get(tw.new.id)
            task = _stored(tw.new)
            self.tasks[task.id] = task
            self._react(task_event(old_task, task))
            for side in task_side_events(old_task, task):
                self._react(side)
            task_rows.append(("task", old_task, task))
        rows: list[tuple[str, Any, Any]] = [
            ("lease", old, self.lease_rows[lw.new.id].lease)
            for lw, old in zip(change.leases, olds, strict=True)
        ]
        rows.extend(task_rows)
        for g in change.graph:
            rows.extend(self._apply_graph(g))
        for h in change.holds:
            self._apply_hold(h.set_name, h.task_id, h.add)
        for bump in change.signals:
            self.signals[bump.key] = self.signals.get(bump.key, 0) + 1
        self._after(rows)

    def _max_active(self, ceiling: Ceiling) -> int | None:
        scope, name = ceiling.scope, ceiling.name
        if scope in OWN_LIMIT_CEILINGS:
            return ceiling.limit
        if scope == INSTANCE_CEILING:
            return self.instance.max_active
        row = self.pools.get(name) if scope == "pool" else self.spaces.get(name)
        return row.max_active if row is not None else None

    def held_count(self, scope: str, name: str) -> int:
        self.writes.append("read-held")
        return self.active.get((scope, name), 0)

    def _failed_conditions(self, change: Change) -> list[str]:
        reasons: list[str] = []
        for lw in change.leases:
            row = self.lease_rows.get(lw.new.id)
            if lw.expect is None:
                if row is not None:
                    reasons.append(f"lease {lw.new.id} exists")
            elif row is None or (row.lease.state, row.lease.fence) != lw.expect:
                reasons.append(f"lease {lw.new.id} is not at {lw.expect}")
            elif lw.seen is not None and (row.lease.version, row.lease.deadline) != (
                lw.seen.version,
                lw.seen.deadline,
            ):
                reasons.append(f"lease {lw.new.id} changed since it was read")
            elif lw.seen is not None and row.lease.keeps_detail and not lw.seen.keeps_detail:
                reasons.append(f"lease {lw.new.id} was marked as keeping detail since")
        for job_id, lease_id in change.job_checks:
            checked = self.jobs.get(job_id)
            if checked is None and implied_pair(job_id, lease_id):
                continue  # a first job with no row yet is on its first lease
            if checked is None or checked.lease_id != lease_id:
                reasons.append(f"job {job_id} no longer points at {lease_id}")
        for jw in change.jobs:
            job = self.jobs.get(jw.new.id)
            if jw.expect_fence is None:
                if job is not None:
                    reasons.append(f"job {jw.new.id} exists")
            elif job is None and jw.expect_fence == 1 and may_be_implied(jw.new):
                pass  # a first job with no row yet is at fence 1, as its writer read it
            elif job is None or job.fence != jw.expect_fence:
                reasons.append(f"job {jw.new.id} is not at fence {jw.expect_fence}")
        for tw in change.tasks:
            task = self.tasks.get(tw.new.id)
            if tw.create:
                if task is not None or tw.new.id in self.voided_tasks:
                    reasons.append(f"task {tw.new.id} exists")
            elif task is None or task.job_id != tw.expect_job_id:
                reasons.append(f"task {tw.new.id} does not point at {tw.expect_job_id}")
            elif tw.expect_version is not None and task.version != tw.expect_version:
                reasons.append(f"task {tw.new.id} is not at version {tw.expect_version}")
            elif task.cancelled is not None and tw.new.cancelled is None:
                reasons.append(f"task {tw.new.id} is cancelled")
        for g in change.graph:
            if not self._graph_holds(g):
                reasons.append(f"graph {type(g).__name__} on {g.task_id} does not hold")
        for rw in change.records:
            refused = self._record_refused(rw)
            if refused:
                reasons.append(refused)
        return reasons

    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str, consistent: bool = True
    ) -> ClaimRecord | None:
        return self.claims.get((pool, claimant, worker_id, claim_id))

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        self.writes.append("point_claim")
        refused = self._record_refused(RecordWrite(record, previous))
        if refused:
            raise Conflict(refused)
        self.claims[_claim_of(record)] = record

    def _record_refused(self, rw: RecordWrite) -> str | None:
        held = self.claims.get(_claim_of(rw.record))
        if rw.previous is None and held is not None:
            return "a claim with this claim_id is under way"
        if rw.previous is not None and (held is None or held.lease_id != rw.previous):
            return "the claim's record was moved on by another call"
        return None

    def take_request(self, record: Filed, now_ms: int) -> Filed | None:
        held = self.requests.get(record.key)
        if held is None or held.expires_at < now_ms // 1000:
            self.requests[record.key] = record
            return None
        if held.answer is None and held.locked_until < now_ms:
            self.requests[record.key] = record
            return None
        return held

    def finish_request(self, key: str, status: int, answer: str) -> None:
        held = self.requests.get(key)
        if held is None:
            raise Conflict("the request's record is gone")
        self.requests[key] = replace(held, status=status, answer=answer)

    def drop_request(self, key: str) -> None:
        self.requests.pop(key, None)

    def wait_slots(self, token_id: str) -> dict[int, int]:
        return dict(self.wait_slot_rows.get(token_id, {}))

    def take_wait_slot(self, token_id: str, slot: int, now_ms: int, until_ms: int) -> None:
        row = self.wait_slot_rows.setdefault(token_id, {})
        if slot in row and row[slot] >= now_ms:
            raise Conflict("the wait slot is held")
        self.writes.append("take_wait_slot")
        row[slot] = until_ms

    def free_wait_slot(self, token_id: str, slot: int, until_ms: int) -> None:
        row = self.wait_slot_rows.get(token_id, {})
        if row.get(slot) != until_ms:
            raise Conflict("the wait slot is no longer this claim's")
        self.writes.append("free_wait_slot")
        del row[slot]

    def _react(self, event: Event | None) -> None:
        # The reactor: one event per (row, version); a redelivered record writes nothing.
        if event is not None:
            timeline = self.timelines.setdefault((str(event.subject_kind), event.subject_id), {})
            timeline.setdefault(f"EV#{event.at:013d}#{event.id}", _stored_event(event))

    def _held_at(self, lease_id: str, expect: tuple[LeaseState, int]) -> _LeaseRow:
        row = self.lease_rows.get(lease_id)
        if row is None or (row.lease.state, row.lease.fence) != expect:
            raise Conflict("lease moved on")
        return row

    def renew(
        self,
        lease: Lease,
        expect: tuple[LeaseState, int],
        move_due: bool = False,
        signal: SignalBump | None = None,
    ) -> None:
        self.writes.append("renew")
        row = self._held_at(lease.id, expect)
        if signal is not None:
            self.signals[signal.key] = self.signals.get(signal.key, 0) + 1
        row.lease = replace(
            row.lease,
            deadline=lease.deadline,
            heartbeat_at=lease.heartbeat_at,
            lease_seconds=lease.lease_seconds,
            due_at=lease.due_at if move_due else row.lease.due_at,
        )

    def put_event(self, event: Event) -> None:
        self.writes.append("put_event")
        self._event_is_new(event)
        self._add_event(event)

    def put_anchor(self, event: Event) -> None:
        # This store keeps every event of a lease as a row of its own (its timeline is what
        # the adapter assembles from rows, anchors and stamps): an anchor is that row.
        self.put_event(event)

    def _event_is_new(self, event: Event | None) -> None:
        if event is None:
            return
        timeline = self.timelines.get((str(event.subject_kind), event.subject_id), {})
        if f"EV#{event.at:013d}#{event.id}" in timeline:
            raise Conflict("a conditional write lost")

    def _add_event(self, event: Event) -> None:
        timeline = self.timelines.setdefault((str(event.subject_kind), event.subject_id), {})
        timeline[f"EV#{event.at:013d}#{event.id}"] = _stored_event(event)

    # ----------------------------------------------------------------------- sweeper

    def _due_index(self, pool: str) -> list[Lease]:
        held = [
            row.lease
            for row in self.lease_rows.values()
            if row.due_indexed and row.lease.due_at is not None and row.lease.pool == pool
        ]
        return sorted(held, key=lambda x: (x.due_at or 0, x.id))

    def due_leases(self, pool: str, now: int | None, limit: int | None = None) -> list[str]:
        if limit is not None:
            _limit(limit)
        due = [
            lease.id
            for lease in self._due_index(pool)
            if now is None or (lease.due_at is not None and lease.due_at <= now)
        ]
        return due if limit is None else due[:limit]

    def due_page(self, pool: str, after: DueEntry | None, limit: int) -> list[DueEntry]:
        _limit(limit)
        entries = [DueEntry(x.due_at or 0, x.id) for x in self._due_index(pool)]
        return [e for e in entries if after is None or e > after][:limit]

    def count_held(self, pool: str, at_most: int) -> int:
        if at_most < 1:
            raise ValueError("a query's Limit must be at least 1")
        return min(len(self._due_index(pool)), at_most)

    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        self.writes.append("move_deadline")
        row = self._held_at(lease.id, (seen.state, seen.fence))
        if row.lease.deadline != seen.deadline:
            raise Conflict("lease moved on")
        mark = lease.pushed_for
        if mark is not None and row.lease.pushed_for == mark:
            raise Conflict("already pushed for this absence")
        moved = replace(row.lease, deadline=lease.deadline, due_at=lease.due_at)
        row.lease = moved if mark is None else replace(moved, pushed_for=mark)

    def reindex(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        self.writes.append("reindex")
        row = self._held_at(lease.id, expect)
        row.lease = replace(row.lease, due_at=lease.due_at)

    def get_sweeper_state(self) -> SweeperState:
        return self.sweeper or SweeperState()

    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None:
        self.writes.append("put_sweeper_state")
        if expect_last is None:
            if self.sweeper is not None:
                raise Conflict("a conditional write lost")
        elif self.sweeper is None or self.sweeper.last_pass_at != expect_last:
            raise Conflict("a conditional write lost")
        self.sweeper = state

    # -------------------------------------------------------- pools, spaces, instance

    @staticmethod
    def _settled(entity: E, settings: Settings) -> E:
        # As a row read back after an UpdateItem: stored values, enums rebuilt (store.items).
        row = {**items._row(entity), **settings.set}
        for name in settings.remove:
            row.pop(name, None)
        return _stored(items._from(type(entity), row))

    def update_pool(
        self,
        name: str,
        settings: Settings,
        expect_version: int | None = None,
        superseded: PoolVersion | None = None,
    ) -> Pool:
        self.writes.append("update_pool")
        pool = self.pools.get(name)
        if expect_version is not None:
            if superseded is None:
                raise ValueError("a version change keeps the version it supersedes")
            if pool is None or pool.version != expect_version:
                raise Conflict("a conditional write lost")
            if (name, superseded.version) in self.pool_versions:
                raise Conflict("a conditional write lost")
            self.pool_versions[(name, superseded.version)] = _stored(superseded)
        if pool is None:
            raise NotFound(f"pool {name!r} does not exist")
        self.pools[name] = self._settled(pool, settings)
        return self.pools[name]

    def get_pool_version(self, pool: str, version: int) -> PoolVersion | None:
        return self.pool_versions.get((pool, version))

    def update_space(self, key: str, settings: Settings) -> Space:
        self.writes.append("update_space")
        space = self.spaces.get(key)
        if space is None:
            raise NotFound(f"space {key!r} does not exist")
        self.spaces[key] = self._settled(space, settings)
        return self.spaces[key]

    def get_instance(self) -> Instance:
        return self.instance

    def update_instance(self, settings: Settings) -> Instance:
        self.writes.append("update_instance")
        self.instance = self._settled(self.instance, settings)
        return self.instance

    # ---------------------------------------------- the task graph and the scheduler

    def _graph(self, task_id: str) -> TaskGraph:
        return self.graphs.get(task_id) or TaskGraph(task_id)

    def _graph_holds(self, g: GraphOp) -> bool:
        graph = self.graphs.get(g.task_id)
        match g:
            case Edge(task_id, kind, other):
                return (task_id, kind, other) not in self.edges
            case Unedge(task_id, kind, other, counted):
                key = (task_id, kind, other)
                return key in self.edges and (self.edges[key] is not None) == counted
            case RequireSucceeded():
                return graph is not None and graph.succeeded_at is not None
            case RequireNotSucceeded() | Link():
                return graph is None or graph.succeeded_at is None
            case Mark(name=name):
                if getattr(graph, name, None) is not None:
                    return False
                if name == "auto_enqueued_at" and graph is not None:
                    return graph.blockers_done == graph.blockers_total
                return True
            case Advance(name=name, to=to):
                at = getattr(graph, name, None)
                return at is None or at < to
            case MarkHasChildren(task_id):
                return task_id in self.tasks
            case CopySuccess():
                return graph is None or (
                    graph.succeeded_at is None and graph.children_done == graph.children_total
                )
            case RequireLeaseOpen(lease_id=lease_id):
                row = self.lease_rows.get(lease_id)
                return row is not None and row.lease.state.active
            case RequireRun(task_id, job_id):
                task = self.tasks.get(task_id)
                return task is not None and task.job_id == (job_id or None)
            case RequireJobLease(job_id=job_id, lease_id=lease_id):
                job = self.jobs.get(job_id)
                if job is None:
                    return implied_pair(job_id, lease_id)
                return job.lease_id == lease_id
            case Reach(walked=walked):
                if graph is not None and graph.cancel_reached_at is not None:
                    return False
                return not walked or graph is None or graph.children_total == 0
            case AddCounts(counts=counts, mark=mark):
                if mark == "succeeded_at" and graph is not None and graph.succeeded_at is not None:
                    return False
                if any(n == "children_total" and d > 0 for n, d in counts):
                    return graph is None or graph.cancel_reached_at is None
                return True
            case AddUsage():
                return True
        assert_never(g)

    def _put_graph(self, new: TaskGraph) -> tuple[str, Any, Any]:
        old = self.graphs.get(new.task_id)
        self.graphs[new.task_id] = new
        self._react(graph_event(old, new))
        return ("graph", old, new)

    def _apply_graph(self, g: GraphOp) -> list[tuple[str, Any, Any]]:
        graph = self._graph(g.task_id)
        match g:
            case AddCounts(counts=counts, mark=mark, at=at):
                moved: dict[str, Any] = {n: getattr(graph, n) + delta for n, delta in counts}
                if mark:
                    moved[mark] = at
                if mark == "succeeded_at":
                    moved["success_copied"] = True
                return [self._put_graph(replace(graph, **moved))]
            case AddUsage(cost_key=cost_key, counts=counts):
                used: dict[str, Any] = {n: getattr(graph, n) + delta for n, delta in counts}
                keys = tuple(sorted({*graph.usage_cost_keys, cost_key}))
                return [self._put_graph(replace(graph, **used, usage_cost_keys=keys))]
            case Edge(task_id, kind, other, counted_at):
                self.edges[(task_id, kind, other)] = counted_at
            case Unedge(task_id, kind, other):
                del self.edges[(task_id, kind, other)]
            case Mark(name=name, at=at):
                return [self._put_graph(replace(graph, **{name: at}))]
            case Advance(name=name, to=to):
                return [self._put_graph(replace(graph, **{name: to}))]
            case CopySuccess(at=at, lease_id=lease_id):
                copied = replace(
                    graph, succeeded_at=at, success_copied=True, succeeded_lease=lease_id or None
                )
                return [self._put_graph(copied)]
            case Link():
                return [self._put_graph(graph)]
            case MarkHasChildren(task_id):
                # As the adapter: one attribute set, the row's version as it was.
                self.tasks[task_id] = replace(self.tasks[task_id], has_children=True)
            case Reach(root=root, at=at, walked=walked, counts=counts):
                reached: dict[str, Any] = {n: getattr(graph, n) + delta for n, delta in counts}
                reached.update(cancel_reached_at=at, cancel_root=root)
                if walked:
                    reached[walked] = at
                return [self._put_graph(replace(graph, **reached))]
            case RequireSucceeded() | RequireNotSucceeded() | RequireLeaseOpen():
                pass
            case RequireRun() | RequireJobLease():
                pass
        return []

    def _apply_hold(self, set_name: str, task_id: str, add: bool) -> None:
        name = {
            "paused": "paused_tasks",
            "attention": "attention",
            "blocked": "blocked",
            "cancelled": "cancelled",
        }[set_name]
        ids = set(getattr(self.scheduler, name))
        ids = ids | {task_id} if add else ids - {task_id}
        self.scheduler = replace(self.scheduler, **{name: frozenset(ids)})

    def _after(self, rows: list[tuple[str, Any, Any]]) -> None:
        if self.reactor is not None and rows:
            self.reactor(rows)

    def get_graph(self, task_id: str) -> TaskGraph:
        return self._graph(task_id)

    def get_graphs(self, task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        return {t: self._graph(t) for t in task_ids}

    def newest_children(self, task_id: str, limit: int) -> list[str]:
        _limit(limit)
        others = sorted(o for (t, kd, o) in self.edges if t == task_id and kd == "child")
        return others[::-1][:limit]

    def task_entries(self, task_ids: list[str]) -> dict[str, TaskEntry]:
        _limit(len(task_ids) or 1)
        found: dict[str, TaskEntry] = {}
        for task_id in dict.fromkeys(task_ids):
            task = self.tasks.get(task_id)
            if task is None:
                continue
            job = self.jobs.get(task.job_id) if task.job_id else None
            lease_id = job.lease_id if job else None
            if job is None and task.job_id == first_job_id(task.id):
                lease_id = first_lease_id(task.id)
            row = self.lease_rows.get(lease_id) if lease_id else None
            found[task_id] = TaskEntry(
                task=task, graph=self._graph(task_id), lease=row.lease if row else None, cursor=""
            )
        return found

    def put_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        self.writes.append("put_event_wait")
        self.event_wait_rows.setdefault((space, name, key), set()).add((task_id, block_id))

    def event_waits(self, space: str, name: str, key: str, limit: int) -> list[tuple[str, str]]:
        _limit(limit)
        return sorted(self.event_wait_rows.get((space, name, key), set()))[:limit]

    def drop_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        self.writes.append("drop_event_wait")
        self.event_wait_rows.get((space, name, key), set()).discard((task_id, block_id))

    def put_kept_event(self, event: KeptEvent) -> None:
        self.writes.append("put_kept_event")
        self.kept_events[(event.space, event.name, event.key)] = event

    def kept_event(self, space: str, name: str, key: str) -> KeptEvent | None:
        return self.kept_events.get((space, name, key))

    def graph_edges(
        self, task_id: str, kind: str, limit: int, after: str | None = None
    ) -> list[str]:
        _limit(limit)
        others = sorted(o for (t, kd, o) in self.edges if t == task_id and kd == kind)
        return [o for o in others if after is None or o > after][:limit]

    def edges_counted(self, task_id: str, kind: str, others: list[str]) -> dict[str, bool]:
        _limit(len(others) or 1)
        found = {
            o: self.edges[(task_id, kind, o)] for o in others if (task_id, kind, o) in self.edges
        }
        return {o: at is not None for o, at in found.items()}

    def count_edge(self, task_id: str, kind: str, other: str, counter: str, at: int) -> bool:
        self.writes.append("count_edge")
        key = (task_id, kind, other)
        if key not in self.edges or self.edges[key] is not None:
            return False
        self.edges[key] = at
        target = self._graph(task_id if kind == "child" else other)
        self._after([self._put_graph(replace(target, **{counter: getattr(target, counter) + 1}))])
        return True

    def in_graph(self, task_id: str) -> bool:
        return self._linked(task_id)

    def linked_task(self, task_id: str) -> tuple[Task | None, bool]:
        return self.tasks.get(task_id), self._linked(task_id)

    def _linked(self, task_id: str) -> bool:
        if task_id in self.graphs:
            return True
        return any(t == task_id and kd == "dependent" for (t, kd, _) in self.edges)

    def settle_graph(self, task_id: str, name: str, at: int, lease_id: str | None = None) -> bool:
        self.writes.append("settle_graph")
        graph = self._graph(task_id)
        if name == "rollup_at":
            due = (
                graph.rollup_at is None
                and graph.children_total > 0
                and graph.children_done == graph.children_total
            )
            new = replace(graph, rollup_at=at, succeeded_at=graph.succeeded_at or at)
        else:
            due = graph.succeeded_at is None and graph.children_done == graph.children_total
            new = replace(graph, succeeded_at=at, succeeded_lease=lease_id or graph.succeeded_lease)
        if not due:
            newer = graph.succeeded_lease is None or graph.succeeded_lease < (lease_id or "")
            if lease_id is not None and name != "rollup_at" and newer:
                self.writes.append("settle_graph")
                self._after([self._put_graph(replace(graph, succeeded_lease=lease_id))])
            return False
        self._after([self._put_graph(new)])
        return True

    def get_scheduler(self, consistent: bool = True) -> SchedulerState:
        return self.scheduler

    def set_scheduler_paused(self, paused: bool, by: str, at: int) -> None:
        self.writes.append("set_scheduler_paused")
        self.scheduler = replace(self.scheduler, paused=paused, paused_by=by, paused_at=at)

    def _queued(
        self, pool: str, created_before: int | None, priority: int | None = None
    ) -> list[str]:
        return [
            lease_id
            for lease_id in self.queue_candidates(
                pool, max(1, len(self.lease_rows)), priority=priority
            )
            if created_before is None
            or _queued_at(self.lease_rows[lease_id].lease) < created_before
        ]

    def count_queue(
        self, pool: str, created_before: int | None, at_most: int, priority: int | None = None
    ) -> int:
        _limit(at_most)
        return min(len(self._queued(pool, created_before, priority)), at_most)

    def queue_page(
        self, pool: str, created_before: int | None, limit: int, priority: int | None = None
    ) -> list[str]:
        _limit(limit)
        return self._queued(pool, created_before, priority)[:limit]

    # ------------------------------------------------------------------- for tests

    def everything(self) -> str:
        """Every stored value as text, to prove a secret was never stored."""
        return repr(
            [
                self.spaces,
                self.workflows,
                self.pools,
                self.tokens,
                self.token_names,
                self.tasks,
                self.jobs,
                self.lease_rows,
                self.workers,
                self.signals,
                self.claims,
                self.timelines,
                self.sweeper,
            ]
        )

    # ------------------------------------------------------ attachments and retention
    # Kept beside the rows above (set up lazily, so __init__ stays as it is): attachments by
    # lease, and the leases taken out of the ended index once their reclaim finished.

    def _attachments(self, lease_id: str) -> dict[str, Attachment]:
        every: dict[str, dict[str, Attachment]] = self.__dict__.setdefault("attachments", {})
        return every.setdefault(lease_id, {})

    def _unindexed(self) -> set[str]:
        out: set[str] = self.__dict__.setdefault("ended_out", set())
        return out

    def put_attachment(self, attachment: Attachment, cap: int, quota_bytes: int) -> None:
        self.writes.append("put_attachment")
        rows = self._attachments(attachment.lease_id)
        counts: dict[str, int] = self.__dict__.setdefault("attachment_counts", {})
        sizes: dict[str, int] = self.__dict__.setdefault("attachment_bytes", {})
        if counts.get(attachment.lease_id, 0) >= cap:
            raise CeilingReached(f"a lease keeps at most {cap} attachments")
        if sizes.get(attachment.lease_id, 0) + attachment.byte_size > quota_bytes:
            raise CeilingReached(f"a lease adds at most {quota_bytes} bytes", quota=True)
        if attachment.id in rows:
            raise Conflict("an attachment write lost")
        counts[attachment.lease_id] = counts.get(attachment.lease_id, 0) + 1
        sizes[attachment.lease_id] = sizes.get(attachment.lease_id, 0) + attachment.byte_size
        rows[attachment.id] = attachment

    def count_log_containers(self, lease_id: str, containers: list[str], cap: int) -> set[str]:
        self.writes.append("count_log_containers")
        every: dict[str, set[str]] = self.__dict__.setdefault("log_containers", {})
        counted = every.setdefault(lease_id, set())
        new = set(containers) - counted
        if len(counted) + len(new) > cap:
            raise CeilingReached(f"a lease keeps the logs of at most {cap} containers")
        counted |= new
        return new

    def list_attachments(self, lease_id: str) -> list[Attachment]:
        return sorted(self._attachments(lease_id).values(), key=lambda a: (a.created_at, a.id))

    def get_attachment(self, lease_id: str, attachment_id: str) -> Attachment | None:
        return self._attachments(lease_id).get(attachment_id)

    def set_attachment_status(self, attachment: Attachment, status: str) -> None:
        self.writes.append("set_attachment_status")
        rows = self._attachments(attachment.lease_id)
        if attachment.id not in rows:
            raise Conflict("the attachment is gone")
        rows[attachment.id] = replace(rows[attachment.id], status=status)

    def delete_attachments(self, lease_id: str, attachment_ids: list[str]) -> None:
        self.writes.append("delete_attachments")
        rows = self._attachments(lease_id)
        for attachment_id in attachment_ids:
            rows.pop(attachment_id, None)

    def ended_since(self, pool: str, since: int, limit: int) -> list[str]:
        _limit(limit)
        out = self._unindexed()
        ended = [
            row.lease
            for row in self.lease_rows.values()
            if row.lease.pool == pool
            and row.lease.keeps_detail
            and row.lease.state.terminal
            and row.lease.ended_at is not None
            and row.lease.ended_at >= since
            and row.lease.id not in out
        ]
        ended.sort(key=lambda x: (x.ended_at or 0, x.id), reverse=True)
        return [x.id for x in ended[:limit]]

    def ended_leases(self, pool: str, ended_before: int, limit: int) -> list[str]:
        _limit(limit)
        out = self._unindexed()
        ended = [
            row.lease
            for row in self.lease_rows.values()
            if row.lease.pool == pool
            and row.lease.keeps_detail
            and row.lease.state.terminal
            and row.lease.ended_at is not None
            and row.lease.ended_at <= ended_before
            and row.lease.id not in out
        ]
        ended.sort(key=lambda x: (x.ended_at or 0, x.id))
        return [x.id for x in ended[:limit]]

    def mark_reclaimed(self, lease: Lease) -> None:
        self.writes.append("mark_reclaimed")
        row = self.lease_rows.get(lease.id)
        if row is None or row.lease.reclaimed_at is not None:
            raise Conflict(f"lease {lease.id} was reclaimed already")
        old = row.lease
        row.lease = replace(
            old,
            reclaimed_at=lease.reclaimed_at,
            version=lease.version,
            event_type=lease.event_type,
            event_data=_plain(lease.event_data or {}),
            updated_at=lease.updated_at,
        )
        for event in lease_events(old, row.lease):
            self._react(event)

    def keep_detail(self, lease: Lease) -> None:
        self.writes.append("keep_detail")
        row = self.lease_rows.get(lease.id)
        if row is None or row.lease.reclaimed_at is not None:
            raise Conflict(f"lease {lease.id} was reclaimed")
        row.lease = replace(row.lease, keeps_detail=True)  # no new version, as on the table

    def unindex_ended(self, lease_id: str) -> None:
        self.writes.append("unindex_ended")
        if lease_id not in self.lease_rows:
            raise Conflict("the lease is gone")
        self._unindexed().add(lease_id)


def _queued_at(lease: Lease) -> int:
    # The real index sorts on when a lease becomes claimable (a deferred one at its not-before).
    return queue_at(lease.created_at, lease.not_before)


def _graph_target(g: GraphOp) -> tuple[str, str]:
    """The row a graph operation writes or checks, as the transaction's one-write-per-row rule
    names it."""
    match g:
        case Edge(task_id, kind, other) | Unedge(task_id, kind, other):
            return ("edge", f"{task_id}>{kind}>{other}")
        case MarkHasChildren(task_id) | RequireRun(task_id):
            return ("task", task_id)
        case RequireLeaseOpen(lease_id=lease_id):
            return ("lease", lease_id)
        case RequireJobLease(job_id=job_id):
            return ("job", job_id)
    return ("graph", g.task_id)
