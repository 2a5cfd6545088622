"""Migrations of the table's data: a named, ordered list, run by `tenure admin migrate`.

The table records the schema version its data is at (one meta row). Each migration moves the
data from the version before it to its own, page by page; each page is idempotent (a row
already in the new shape is counted and left alone, and every write is conditional, so a
concurrent request's write is never overwritten), and the position of the next page is saved
after each one, so a migrate that stopped part-way goes on from there. A later change to the
data model adds its migration at the end of `MIGRATIONS` and raises `SCHEMA_VERSION`
(app/schema_versions.py, what the requests read of the versions, apart from the migrations).

Migrations may Scan: they are an operator's command, never a request path.

What the service does with data older than `SCHEMA_VERSION`: it keeps serving. Every change
so far only adds rows that a reader can do without (the token and space list rows: a token
without one still authenticates, a space without one still takes tasks, they are only missing
from `GET /tokens` and `GET /spaces`), so refusing requests would take an instance down for
what costs it nothing but an incomplete list. The answers that can be incomplete, those two
lists, say so (a `Tenure-Schema` header naming `tenure admin migrate`).
A migration that the service could not do without must make the service refuse instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol, TypeVar

from tenure.app.schema_versions import (
    CHILDREN_MARKED_FROM_SCHEMA,
    CLAIM_START_FROM_SCHEMA,
    CREATED_STAMPS_FROM_SCHEMA,
    DERIVED_RECLAIMS_FROM_SCHEMA,
    HANDOVER_INTENTS_FROM_SCHEMA,
    IMPLIED_JOBS_FROM_SCHEMA,
    LISTED_BY_TASK_FROM_SCHEMA,
    POOL_GATES_FROM_SCHEMA,
    RULE_MINTS_FROM_SCHEMA,
    SPACE_LIST_FROM_SCHEMA,
    STAMPS_FROM_SCHEMA,
    SUCCESSES_DERIVED_FROM_SCHEMA,
    TASK_KEYS_FROM_SCHEMA,
    UNTRANSACTED_FILING_FROM_SCHEMA,
    WORKER_SIGNALS_FROM_SCHEMA,
    SchemaState,
)

# Named here too: the version the migrations bring the data to.
from tenure.app.schema_versions import SCHEMA_VERSION as SCHEMA_VERSION
from tenure.domain.errors import Conflict
from tenure.domain.model import (
    Instance,
    Lease,
    Pool,
    Space,
    Task,
    Token,
    gates_differ,
    pool_gates,
)
from tenure.domain.task_keys import task_id_of_key
from tenure.records import record

# Pages a migration reads at most in one run (a bound on the loop, not a limit in practice:
# with 500 rows a page it is 50 million rows).
MAX_PAGES = 100_000
PAGE_SIZE = 500


class MigrationStore(Protocol):
    def schema_state(self) -> SchemaState: ...

    def save_schema(self, expect: SchemaState, new: SchemaState) -> bool:
        """Write `new` (with the next step) only if the row is still `expect`."""
        ...

    def scan_tokens(self, cursor: str | None, limit: int) -> tuple[list[Token], str | None]:
        """One page of token rows (a Scan reading at most `limit` rows) and the next page's
        position, None after the last."""
        ...

    def listed_token_ids(self, token_ids: list[str]) -> set[str]:
        """Which of these tokens have their list row (one batch read)."""
        ...

    def list_token(self, token: Token) -> bool:
        """Write the token's list row only if it has none; False when it had one."""
        ...

    def scan_spaces(self, cursor: str | None, limit: int) -> tuple[list[Space], str | None]:
        """One page of space rows (a Scan reading at most `limit` rows) and the next page's
        position, None after the last."""
        ...

    def listed_space_keys(self, keys: list[str]) -> set[str]:
        """Which of these spaces have their list row (one batch read)."""
        ...

    def list_space(self, space: Space) -> bool:
        """Write the space's list row only if it has none; False when it had one."""
        ...

    def scan_tasks(self, cursor: str | None, limit: int) -> tuple[list[Task], str | None]:
        """One page of task rows (a Scan reading at most `limit` rows) and the next page's
        position, None after the last."""
        ...

    def keyed_tasks(self, keys: list[str]) -> set[str]:
        """Which of these task keys have their key row (one batch read)."""
        ...

    def key_task(self, task: Task) -> bool:
        """Write the task's key row only if it has none; False when it had one."""
        ...

    def children_marked(self, task_ids: list[str]) -> set[str]:
        """Which of these tasks carry `has_children` (one batch read)."""
        ...

    def mark_children(self, task_id: str) -> bool:
        """Set `has_children` on the task's row (no version bump, no other field touched)
        only if the task exists and has no mark; False otherwise."""
        ...

    def scan_held_leases(self, cursor: str | None, limit: int) -> tuple[list[Lease], str | None]:
        """One page of held leases (claimed, started, paused or cancelling: a Scan of the due
        index reading at most `limit` entries, then their rows, read consistently) and the
        next page's position, None after the last."""
        ...

    def mark_keeps_detail(self, lease: Lease) -> bool:
        """Set the lease's keeps-detail mark as its first log stream or attachment does (no
        version bump, no other field touched) only if the lease exists, is not reclaimed and
        has no mark; False otherwise."""
        ...

    def scan_pools(self, cursor: str | None, limit: int) -> tuple[list[Pool], str | None]:
        """One page of pool rows (a consistent Query of their one partition, at most `limit`
        rows) and the next page's position, None after the last."""
        ...

    def gate_sources(self, space_keys: list[str]) -> tuple[dict[str, Space], Instance]:
        """These spaces (one consistent batch read; a space that is gone is left out) and the
        instance settings (read consistently)."""
        ...

    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        """As PoolRows.write_pool_gates (app/rows.py)."""
        ...


class Page(NamedTuple):
    counts: dict[str, int]
    cursor: str | None


@record
class Migration:
    version: int  # the version the data is at once it has run
    name: str
    does: str
    page: Callable[[MigrationStore, str | None, int, bool], Page]


T = TypeVar("T")


def _write_missing(
    found: Iterable[T],
    there: Callable[[T], bool],
    write: Callable[[T], bool],
    dry_run: bool,
    counts: dict[str, int],
    already: str,
    wrote: str,
) -> dict[str, int]:
    """The loop every rewriting migration shares: each item already `there` counts under
    `already`; each other one is written (conditionally, only if still missing: `write`
    answers False when it was written meanwhile, which counts under `already` too) or, on a
    dry run, counted under `wrote` unwritten."""
    counts.setdefault(already, 0)
    counts.setdefault(wrote, 0)
    for item in found:
        if there(item):
            counts[already] += 1
        elif dry_run or write(item):
            counts[wrote] += 1
        else:
            counts[already] += 1
    return counts


def list_tokens_made_before_the_list(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A token written before tokens had list rows is missing from `GET /tokens`, and so
    cannot be found to be revoked: write its list row. Only the list row is written, only if
    it is missing: the token's own row (its revocation, expiry and last use) is not touched."""
    tokens, after = store.scan_tokens(cursor, limit)
    listed = store.listed_token_ids([t.id for t in tokens]) if tokens else set()
    # A concurrent create may list a token between the read and the write.
    counts = _write_missing(
        tokens,
        lambda token: token.id in listed,
        lambda token: store.list_token(replace(token, revoked_at=None, last_used_at=None)),
        dry_run,
        {"tokens": len(tokens)},
        "already_listed",
        "would_list" if dry_run else "listed",
    )
    return Page(counts, after)


def list_spaces_made_before_the_list(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A space made before spaces had list rows is missing from `GET /spaces` (and so from
    the board's space picker): write its list row. The space's own row is not touched."""
    spaces, after = store.scan_spaces(cursor, limit)
    listed = store.listed_space_keys([sp.key for sp in spaces]) if spaces else set()
    counts = _write_missing(
        spaces,
        lambda space: space.key in listed,
        store.list_space,
        dry_run,
        {"spaces": len(spaces)},
        "already_listed",
        "would_list" if dry_run else "listed",
    )
    return Page(counts, after)


def key_tasks_filed_before_keys_gave_ids(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A task filed when ids were drawn at random cannot be found by its key from its id:
    write its key row. A task whose id is its key's needs none; the task's own row is not
    touched."""
    tasks, after = store.scan_tasks(cursor, limit)
    old = [t for t in tasks if t.id != task_id_of_key(t.key)]
    keyed = store.keyed_tasks([t.key for t in old]) if old else set()
    counts = _write_missing(
        old,
        lambda task: task.key in keyed,
        store.key_task,
        dry_run,
        {"tasks": len(tasks), "already_keyed": len(tasks) - len(old)},
        "already_keyed",
        "would_key" if dry_run else "keyed",
    )
    return Page(counts, after)


def mark_tasks_with_children_filed_before_the_mark(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A task whose children were all filed before filing marked a parent has no
    `has_children`, so its payload's inputs leave its children out: set the mark on it. Each
    task row of the page names its parent, so the page's children say which tasks need the
    mark (one batch read of at most a page of parents, a write for each one unmarked), and a
    parent met again on a later page is read as marked. Nothing else on the row is touched."""
    tasks, after = store.scan_tasks(cursor, limit)
    parents = sorted({t.parent_id for t in tasks if t.parent_id})
    marked = store.children_marked(parents) if parents else set()
    # A child filed between the read and the write marks its parent itself.
    counts = _write_missing(
        parents,
        lambda parent: parent in marked,
        store.mark_children,
        dry_run,
        {"tasks": len(tasks), "parents": len(parents)},
        "already_marked",
        "would_mark" if dry_run else "marked",
    )
    return Page(counts, after)


def start_timeline_stamps(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: leases made before keep a timeline row per event, and are read as
    they are. Reaching this version is what lets the service stamp the leases it makes."""
    return Page({}, None)


def start_claims_that_start(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: reaching this version is what lets a claim start its lease."""
    return Page({}, None)


def start_created_stamps(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: leases made before keep their anchors, and are read as they are.
    Reaching this version is what lets a task's first lease go without one."""
    return Page({}, None)


def start_derived_successes(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: graph rows written before keep their successes, and a task with
    none is linked to only as this release links. Reaching this version is what lets the
    reactor leave an unlinked task's success to its lease."""
    return Page({}, None)


def start_implied_jobs(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: jobs made before keep their rows, and are read as they are.
    Reaching this version is what lets a task's first job go without one."""
    return Page({}, None)


def start_first_leases_listed_by_task(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: leases made before keep their list entries, and the list reads
    each lease through its entry or its task's, never both. Reaching this version is what
    lets a task's first lease go without one."""
    return Page({}, None)


def start_untransacted_filing(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: tasks filed before were written with their first lease at once.
    Reaching this version is what lets filing write the two one after the other."""
    return Page({}, None)


def mark_held_leases_before_derived_reclaims(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A lease that shipped logs or attachments under an earlier release carries no
    keeps-detail mark (that release marked a lease at its ending); one still held when the
    data reaches this version would end outside the ended index, its objects never deleted:
    set the mark on every held lease. Leases that ended before keep their place in the index;
    a pending lease has no lease token, so no logs or attachments. Marking a lease that has
    none costs its reclaim one sweeper visit. Only the mark is written, only if absent."""
    leases, after = store.scan_held_leases(cursor, limit)
    # One that ended between the index read and the row read is marked too: it ended without
    # the mark, so the mark is what puts it in the ended index. One marked between the read and
    # the write (its first log stream), or reclaimed, is not written.
    counts = _write_missing(
        leases,
        lambda lease: lease.keeps_detail,
        store.mark_keeps_detail,
        dry_run,
        {"held_leases": len(leases)},
        "already_marked",
        "would_mark" if dry_run else "marked",
    )
    return Page(counts, after)


# How often a pool's gates are read again and rewritten when what they copy moved meanwhile.
GATE_COPY_TRIES = 5


def copy_gates_onto_pools(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """A pool made before pool rows carried their space's and the instance's gates says
    nothing of them: write each pool's copy from its space and the instance (read
    consistently). A pool whose copy already says what they say is left alone, so a run again,
    or one resumed from its saved page, writes nothing twice; an archive or a ceiling that
    lands meanwhile writes the copy itself before it answers. A pool whose space is gone is
    left alone (it hands nothing out)."""
    pools, after = store.scan_pools(cursor, limit)
    spaces, instance = (
        store.gate_sources(sorted({p.space for p in pools})) if pools else ({}, Instance())
    )
    wanted = {p.name: pool_gates(spaces[p.space], instance) for p in pools if p.space in spaces}

    def copy(pool: Pool) -> bool:
        # All three at once, each checked against the row it copies: when one moved between
        # the read and the write, the sources are read again (bounded); the write that moved
        # it copies its own value too, so the row ends as the last of them says.
        gates = wanted[pool.name]
        for _ in range(GATE_COPY_TRIES):
            if store.write_pool_gates(pool, gates):
                return True
            now, settings = store.gate_sources([pool.space])
            if pool.space not in now:
                return False
            gates = pool_gates(now[pool.space], settings)
        return False

    counts = _write_missing(
        [p for p in pools if p.name in wanted],
        lambda pool: not gates_differ(pool, wanted[pool.name]),
        copy,
        dry_run,
        {"pools": len(pools), "spaceless": len(pools) - len(wanted)},
        "already_copied",
        "would_copy" if dry_run else "copied",
    )
    return Page(counts, after)


def start_worker_signals(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: a worker with no signal row is at epoch 0. Reaching this version is
    what lets a heartbeat trust the epoch."""
    return Page({}, None)


def start_handover_intents(
    store: MigrationStore, cursor: str | None, limit: int, dry_run: bool
) -> Page:
    """Nothing to rewrite: reports ended before keep their claim's record, which their resend
    still follows. Reaching this version is what lets a new report go without one."""
    return Page({}, None)


def start_rule_mints(store: MigrationStore, cursor: str | None, limit: int, dry_run: bool) -> Page:
    """Nothing to rewrite: firings minted before wrote their job with its lease and task.
    Reaching this version is what lets a firing write the three one after the other."""
    return Page({}, None)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="token-list-rows",
        does="write the list row of each token made before tokens were listed",
        page=list_tokens_made_before_the_list,
    ),
    Migration(
        version=STAMPS_FROM_SCHEMA,
        name="timeline-stamps",
        does="let new task leases keep their claim, start and completion as stamps on the "
        "lease row (leases made before keep their timeline rows)",
        page=start_timeline_stamps,
    ),
    Migration(
        version=CLAIM_START_FROM_SCHEMA,
        name="claims-that-start",
        does="let a claim that asks to start its lease claim and start it in one write",
        page=start_claims_that_start,
    ),
    Migration(
        version=CREATED_STAMPS_FROM_SCHEMA,
        name="first-lease-stamps",
        does="let a task's first lease keep its creation as a stamp, with no anchor row "
        "(leases made before keep theirs)",
        page=start_created_stamps,
    ),
    Migration(
        version=IMPLIED_JOBS_FROM_SCHEMA,
        name="implied-first-jobs",
        does="let a task's first job, opened with the task, go without a row until it moves "
        "on (jobs made before keep theirs)",
        page=start_implied_jobs,
    ),
    Migration(
        version=SPACE_LIST_FROM_SCHEMA,
        name="space-list-rows",
        does="write the list row of each space made before spaces were listed",
        page=list_spaces_made_before_the_list,
    ),
    Migration(
        version=TASK_KEYS_FROM_SCHEMA,
        name="task-key-rows",
        does="write the key row of each task filed before task ids were derived from keys, "
        "so that its key finds it wherever a task id is taken",
        page=key_tasks_filed_before_keys_gave_ids,
    ),
    Migration(
        version=LISTED_BY_TASK_FROM_SCHEMA,
        name="first-leases-listed-by-task",
        does="let a task's first lease, made with the task, go without an entry in the space's "
        "lease list: the list finds it through its task (leases made before keep theirs)",
        page=start_first_leases_listed_by_task,
    ),
    Migration(
        version=CHILDREN_MARKED_FROM_SCHEMA,
        name="task-children-marks",
        does="mark each task whose children were filed before tasks were marked at their "
        "first child, so that its payload's inputs list its children",
        page=mark_tasks_with_children_filed_before_the_mark,
    ),
    Migration(
        version=UNTRANSACTED_FILING_FROM_SCHEMA,
        name="untransacted-filing",
        does="let filing write a task's first lease and then the task, each on its own, "
        "instead of in one transaction (claims honour the lease's task-pending mark)",
        page=start_untransacted_filing,
    ),
    Migration(
        version=SUCCESSES_DERIVED_FROM_SCHEMA,
        name="derived-successes",
        does="let the success of a task nothing is linked to stay its lease's, with no graph "
        "row written for it (rows written before keep theirs)",
        page=start_derived_successes,
    ),
    Migration(
        version=DERIVED_RECLAIMS_FROM_SCHEMA,
        name="derived-reclaims",
        does="mark each held lease as keeping logs or attachments (an earlier release marked "
        "a lease at its end), and let a lease with no logs and no attachments end outside "
        "the ended index, reclaimed by derivation once its pool's retention has passed "
        "(leases ended before keep their place in it)",
        page=mark_held_leases_before_derived_reclaims,
    ),
    Migration(
        version=POOL_GATES_FROM_SCHEMA,
        name="pool-gates",
        does="copy onto each pool row whether its space is archived and whether its space "
        "and the instance have a ceiling, so that a claim and a filing read the pool row "
        "alone",
        page=copy_gates_onto_pools,
    ),
    Migration(
        version=WORKER_SIGNALS_FROM_SCHEMA,
        name="worker-signals",
        does="let every write a worker heartbeat must report (cancel, kill, pause, resume, "
        "an operator's end, an expiry, a release) raise the holding worker's signal epoch in "
        "the same transaction, so that heartbeats read only the leases whose epoch moved",
        page=start_worker_signals,
    ),
    Migration(
        version=HANDOVER_INTENTS_FROM_SCHEMA,
        name="handover-intents",
        does="let a final report that claims the worker's next lease keep that claim's intent "
        "on the lease it ends, with no claim_id record (reports ended before keep theirs)",
        page=start_handover_intents,
    ),
    Migration(
        version=RULE_MINTS_FROM_SCHEMA,
        name="rule-mints",
        does="let a rule's firing write its job (the occasion's lock) on its own, then its "
        "lease and its task, instead of the three in one transaction (a later delivery of the "
        "occasion finishes a mint whose writer stopped in between)",
        page=start_rule_mints,
    ),
)


@dataclass
class Outcome:
    """What one migration did in this run: `applied`, `already` (the data was past it),
    `would_apply` (a dry run), or `stopped` (the page bound was reached: run again)."""

    name: str
    version: int
    status: str
    pages: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class SchemaTooNew(Exception):
    """The data is at a version this release does not know (written by a newer one)."""


def migrate(
    store: MigrationStore,
    dry_run: bool = False,
    page_size: int = PAGE_SIZE,
    max_pages: int = MAX_PAGES,
    migrations: tuple[Migration, ...] = MIGRATIONS,
) -> list[Outcome]:
    """Run every migration the data has not had, in order, each from where a stopped run
    left it. A dry run reads what each would do and writes nothing."""
    state = store.schema_state()
    newest = max((m.version for m in migrations), default=0)
    if state.version > newest:
        raise SchemaTooNew(
            f"the data is at schema version {state.version}; this release knows {newest}"
        )
    outcomes: list[Outcome] = []
    for migration in migrations:
        if migration.version <= state.version:
            outcomes.append(Outcome(migration.name, migration.version, "already"))
            continue
        if dry_run and outcomes and outcomes[-1].status == "would_apply":
            # A later migration may need the earlier one's rows: say it is pending.
            outcomes.append(Outcome(migration.name, migration.version, "would_apply"))
            continue
        outcome = Outcome(migration.name, migration.version, "stopped")
        outcomes.append(outcome)
        cursor = state.cursor if state.migration == migration.name else None
        for _ in range(max_pages):
            page = migration.page(store, cursor, page_size, dry_run)
            outcome.pages += 1
            for name, count in page.counts.items():
                outcome.counts[name] = outcome.counts.get(name, 0) + count
            cursor = page.cursor
            if not dry_run:
                done = cursor is None
                new = SchemaState(
                    version=migration.version if done else state.version,
                    migration=None if done else migration.name,
                    cursor=cursor,
                    step=state.step + 1,
                )
                if not store.save_schema(state, new):
                    raise Conflict("another `tenure admin migrate` moved the schema row: rerun")
                state = new
            if cursor is None:
                outcome.status = "would_apply" if dry_run else "applied"
                break
        if outcome.status == "stopped":
            return outcomes
    return outcomes
