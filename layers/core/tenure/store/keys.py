"""The one module that knows key formats, index names, attribute names and conditions."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tenure.domain.model import DEFAULT_PRIORITY

# ------------------------------------------------------------------ table and indexes

PK = "PK"
SK = "SK"

# Sparse: only pending leases carry these, so a claim reads only what it could take.
QUEUE_INDEX = "queue"
QUEUE_PK = "queue_pk"
QUEUE_SK = "queue_sk"

# Every lease, per space, newest first: the operator's list.
SPACE_INDEX = "by_space"
SPACE_PK = "space_pk"
SPACE_SK = "space_sk"

# Sparse: held leases per pool, by the deadline they were last indexed at. The sweeper reads
# only what is due; the workers list reads a pool's held leases. Heartbeats move `deadline`
# but never `due_at`, so no heartbeat writes to an index (each index write is billed, and
# heartbeats are the commonest write); the sweeper re-indexes a lease whose `due_at` passed
# while its real deadline did not.
DUE_INDEX = "due"
DUE_PK = "due_pk"
DUE_AT = "due_at"

# Sparse: ended leases with logs or attachments, per pool by end time, until their retention
# reclaim has finished. The write that records a lease's first log stream or attachment sets
# the partition key, the write that ends it sets `ended_at` (the index needs both), and the
# sweeper takes it out once reclaimed. A lease with neither never enters it: it has nothing
# to delete (domain/model.py derived_reclaimed_at). No heartbeat ever touches it.
ENDED_INDEX = "ended"
ENDED_PK = "ended_pk"
ENDED_AT = "ended_at"

# Every task, per space, newest first: the operator's task list (the board). Both keys are
# fixed when the task is filed (space, creation time, id) and the index keeps keys only, so
# filing a task writes it once and no later rewrite of the task row writes to it
# (an index write costs a write unit of its own).
TASKS_INDEX = "tasks_by_space"
TASKS_PK = "tasks_pk"
TASKS_SK = "tasks_sk"

INDEXES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    QUEUE_INDEX: ((QUEUE_PK, "S"), (QUEUE_SK, "S")),
    SPACE_INDEX: ((SPACE_PK, "S"), (SPACE_SK, "S")),
    DUE_INDEX: ((DUE_PK, "S"), (DUE_AT, "N")),
    ENDED_INDEX: ((ENDED_PK, "S"), (ENDED_AT, "N")),
    TASKS_INDEX: ((TASKS_PK, "S"), (TASKS_SK, "S")),
}


def table_definition(name: str) -> dict[str, Any]:
    """CreateTable arguments; infra/template.yaml is checked against this by the tests."""
    attrs = {PK: "S", SK: "S"}
    for hash_key, range_key in INDEXES.values():
        attrs.update(dict([hash_key, range_key]))
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": a, "AttributeType": t} for a, t in sorted(attrs.items())
        ],
        "KeySchema": [
            {"AttributeName": PK, "KeyType": "HASH"},
            {"AttributeName": SK, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": hash_key[0], "KeyType": "HASH"},
                    {"AttributeName": range_key[0], "KeyType": "RANGE"},
                ],
                # Keys only: the narrowest projection; the item is read by key afterwards.
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
            for index, (hash_key, range_key) in INDEXES.items()
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }


# Rows that only matter for a while (worker sightings, claim records) carry their end as epoch
# seconds here, and DynamoDB's TTL deletes them some time after it (lazily: up to days late,
# so every read of such rows also filters on it, see conditions.NOT_EXPIRED).
TTL_ATTRIBUTE = "expires_at"
TTL_SPECIFICATION = {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}


# ------------------------------------------------------------------------ item keys


def space_key(key: str) -> dict[str, str]:
    return {PK: f"SPACE#{key}", SK: "SPACE"}


def workflow_key(space: str, slug: str) -> dict[str, str]:
    return {PK: f"SPACE#{space}", SK: f"WORKFLOW#{slug}"}


# Pools share one partition so the sweeper can list them with one Query (never a Scan);
# pools are few and read through a short in-process cache.
POOLS_PK = "POOLS"


def pool_key(name: str) -> dict[str, str]:
    return {PK: POOLS_PK, SK: f"POOL#{name}"}


def pool_version_key(name: str, version: int) -> dict[str, str]:
    """A superseded pool version's settings: a partition per pool, apart from the POOLS list."""
    return {PK: f"POOL#{name}", SK: f"VERSION#{version:06d}"}


def key_counter_key(pool: str, key: str) -> dict[str, str]:
    """Held leases of one concurrency key in one pool: a row per (pool, key), in the pool's
    own partition of keys, so that no key's counter contends with another's."""
    return {PK: f"KEYS#{pool}", SK: f"KEY#{key}"}


def rate_counter_key(pool: str, minute: int) -> dict[str, str]:
    """Claims of one pool in one UTC minute (epoch seconds // 60), deleted by TTL after."""
    return {PK: f"RATE#{pool}", SK: f"MINUTE#{minute}"}


def delegation_counter_key(scope: str, owner: str) -> dict[str, str]:
    """Tasks delegated by one lease (scope "delegated", owner: the lease id) or within one tree
    (scope "tree", owner: the id of the task at its top): a row of its own in that lease's or
    task's graph partition, apart from its graph row, so a filing's graph writes never name
    the same item twice and a count's move wakes no stream reaction."""
    return {PK: f"TASK#{owner}", SK: f"COUNT#{scope}"}


# A rate counter outlives its minute by this much before TTL may delete it (the views read
# the current minute's row only).
RATE_COUNTER_KEEP_SECONDS = 120


# The instance settings and the instance-wide ceiling counter share one row.
INSTANCE_KEY = {PK: "INSTANCE", SK: "SETTINGS"}


def worker_key(pool: str, worker_id: str) -> dict[str, str]:
    return {PK: f"WORKERS#{pool}", SK: f"WORKER#{worker_id}"}


def signal_key(claimant: str, worker_id: str) -> dict[str, str]:
    """A worker's signal row (domain/signals.py): one per worker token and worker id, apart
    from the per-pool worker rows, since one worker heartbeat covers leases of many pools."""
    return {PK: f"SIGNAL#{claimant}", SK: f"WORKER#{worker_id}"}


SIGNAL_EPOCH = "epoch"
# The instance's secret that seals what a worker heartbeat vouches for (domain/signals.py).
SIGNAL_SECRET_KEY = {PK: "META", SK: "SIGNAL_SECRET"}
SIGNAL_SECRET = "secret"


def workers_pk(pool: str) -> str:
    return f"WORKERS#{pool}"


def worker_start(pool: str, position: str) -> dict[str, str]:
    """The key a page of a pool's workers resumes after (`position` is a worker row's SK)."""
    return {PK: workers_pk(pool), SK: position}


def claim_key(pool: str, claimant: str, worker_id: str, claim_id: str) -> dict[str, str]:
    """A claim record's key: a digest of its four parts, so no part's length (a claim_id is
    the worker's own string) can push the key past DynamoDB's 2048-byte partition key limit,
    and no two different tuples can collide by how they are joined."""
    parts = json.dumps([pool, claimant, worker_id, claim_id], separators=(",", ":"))
    return {PK: f"CLAIM#{hashlib.sha256(parts.encode()).hexdigest()}", SK: "CLAIM"}


def wait_slots_key(token_id: str) -> dict[str, str]:
    """The claims one worker token has waiting in long polls: one small row of slots, each
    attribute (`wait_slot_attribute`) the epoch ms its waiting claim holds it until."""
    return {PK: f"POLLS#{token_id}", SK: "POLLS"}


def wait_slot_attribute(slot: int) -> str:
    return f"w{slot}"


WAIT_SLOT_NAME = re.compile(r"w(\d{1,3})")


def wait_slots_of(row: dict[str, Any]) -> dict[int, int]:
    """A slots row's held slots: slot number -> the epoch ms it is held until."""
    return {
        int(found[1]): int(value)
        for name, value in row.items()
        if (found := WAIT_SLOT_NAME.fullmatch(name)) is not None
    }


# A slots row outlives the last slot taken by this much before TTL may delete it: longer than
# any claim waits, so TTL never drops a row whose slot is still held.
WAIT_SLOTS_KEEP_SECONDS = 120


def request_key(key: str) -> dict[str, str]:
    """An idempotent request's record (`key` is already a digest of the caller and its key)."""
    return {PK: f"IDEM#{key}", SK: "IDEM"}


SWEEPER_KEY = {PK: "SWEEPER", SK: "STATE"}
# The schema version the table's data is at (`tenure admin migrate` moves it).
SCHEMA_KEY = {PK: "META", SK: "SCHEMA"}


def token_key(token_hash: str) -> dict[str, str]:
    return {PK: f"TOKEN#{token_hash}", SK: "TOKEN"}


def token_name_key(name: str) -> dict[str, str]:
    return {PK: f"TOKENNAME#{name}", SK: "TOKENNAME"}


# Every token also has a write-once row in one partition, by id: GET /tokens is one Query of
# it (paged, never a Scan) and DELETE /tokens/{id} finds the token's hash by key. Revocation
# and last use live on the token's own row (the one the authorizer reads).
TOKENS_PK = "TOKENS"
TOKEN_ID_SHAPE = re.compile(r"TOKEN#[A-Za-z0-9_\-]{1,200}")


def token_id_key(token_id: str) -> dict[str, str]:
    return {PK: TOKENS_PK, SK: f"TOKEN#{token_id}"}


def listed_token_id(item_key: dict[str, Any]) -> str:
    """The token id a row of the tokens' list partition is for."""
    return str(item_key[SK]).removeprefix("TOKEN#")


# Every space also has a write-once row in one partition, by key, written in the space's own
# transaction: GET /spaces is one Query of it (paged, sorted by key, never a Scan) and one
# batch read of the spaces' rows, which keep the settings and the archived flag current.
SPACES_PK = "SPACES"
LISTED_SPACE_SHAPE = re.compile(r"SPACE#[A-Z][A-Z0-9_]{0,31}")


def listed_space_key(key: str) -> dict[str, str]:
    return {PK: SPACES_PK, SK: f"SPACE#{key}"}


def listed_space_position(key: str) -> str:
    """Where space `key` sorts in the spaces' list partition (a page's cursor)."""
    return str(listed_space_key(key)[SK])


def listed_space_of(item_key: dict[str, Any]) -> str:
    """The space key a row of the spaces' list partition is for."""
    return str(item_key[SK]).removeprefix("SPACE#")


def task_pk(task_id: str) -> str:
    """The partition of a task: its row, its graph row and the edges it starts."""
    return f"TASK#{task_id}"


# A task row's sort key: after its graph row and edges in its partition (linked_task).
TASK_SK = "TASK"


def task_key(task_id: str) -> dict[str, str]:
    return {PK: task_pk(task_id), SK: TASK_SK}


def task_key_row(key: str) -> dict[str, str]:
    """The row that finds a task filed before task ids were derived from keys by its key
    (written by `tenure admin migrate`; a newer task's id is its key's)."""
    return {PK: f"TASKKEY#{key}", SK: "TASKKEY"}


def task_key_of(item_key: dict[str, Any]) -> str:
    """The task key a task key row (task_key_row) is for."""
    return str(item_key[PK]).removeprefix("TASKKEY#")


def job_key(job_id: str) -> dict[str, str]:
    return {PK: f"JOB#{job_id}", SK: "JOB"}


def lease_key(lease_id: str) -> dict[str, str]:
    return {PK: f"LEASE#{lease_id}", SK: "LEASE"}


def lease_id_of(item_key: dict[str, Any]) -> str:
    return str(item_key[PK]).removeprefix("LEASE#")


def timeline_pk(subject_kind: str, subject_id: str) -> str:
    return f"TL#{subject_kind}#{subject_id}"


def event_key(subject_kind: str, subject_id: str, at: int, event_id: str) -> dict[str, str]:
    return {PK: timeline_pk(subject_kind, subject_id), SK: event_sk(at, event_id)}


def event_sk(at: int, event_id: str) -> str:
    return f"EV#{at:013d}#{event_id}"


# A task lease's anchor on its task's timeline: its `lease.created` event, keyed by the same
# time and id under another prefix, so the leases of a timeline's stretch are one Query.
EVENT_PREFIX = "EV#"
ANCHOR_PREFIX = "LS#"


def anchor_key(subject_kind: str, subject_id: str, at: int, event_id: str) -> dict[str, str]:
    return {PK: timeline_pk(subject_kind, subject_id), SK: anchor_sk(at, event_id)}


def anchor_sk(at: int, event_id: str) -> str:
    return f"{ANCHOR_PREFIX}{at:013d}#{event_id}"


def queue_keys(
    pool: str, created_at: int, lease_id: str, priority: int | None = None
) -> dict[str, str]:
    return {QUEUE_PK: queue_pk(pool, priority), QUEUE_SK: f"{created_at:013d}#{lease_id}"}


def queue_pk(pool: str, priority: int | None = None) -> str:
    """A pool's queue partition for one priority. The default priority keeps the partition
    it always had (`Q#pool`), so a pool that never uses priorities reads and writes exactly
    what it did before; each other priority has its own (`Q#pool#p9`), read by a claim only
    while the pool row marks it (`queue_marks`), highest first."""
    if priority is None or priority == DEFAULT_PRIORITY:
        return f"Q#{pool}"
    return f"Q#{pool}#p{priority}"


def queue_expiry_pk(pool: str) -> str:
    """The due index's partition of a pool's pending leases that have a queue timeout, by
    their expiry instant (held leases use `due_pk`, so neither read sees the other's)."""
    return f"QEXP#{pool}"


def queue_at(created_at: int, not_before: int | None) -> int:
    """A pending lease's place in its pool's queue: when it becomes claimable. A deferred
    lease sorts at its not-before instant, so a claim's Query bounded by `queue_due_bound`
    reads only leases that are due (a deferred one costs no read until then)."""
    return max(created_at, not_before or 0)


def queue_due_bound(now: int) -> str:
    # "~" sorts after "#", so every key of the instant `now` itself is inside the bound.
    return f"{now:013d}~"


def space_list_keys(space: str, created_at: int, lease_id: str) -> dict[str, str]:
    return {SPACE_PK: f"SPACE#{space}", SPACE_SK: space_position(created_at, lease_id)}


def space_position(created_at: int, lease_id: str) -> str:
    return f"{created_at:013d}#{lease_id}"


def task_list_bound(position: str) -> str:
    """The tasks_by_space sort key at a lease list position (created_at#lease_id): a task's
    first lease made with it sits at its task's creation time under the task id's unique
    part, so the tasks before it in that index are the leases before it in the list."""
    created, _, lease_id = position.partition("#")
    return f"{created}#task_{lease_id.partition('_')[2]}"


def first_lease_position(task_position: str) -> str:
    """The lease list position of a task's first lease made with it, from the task's
    tasks_by_space sort key (created_at#task_id)."""
    created, _, task_id = task_position.partition("#")
    return f"{created}#lease_{task_id.partition('_')[2]}"


def task_list_keys(space: str, created_at: int, task_id: str) -> dict[str, str]:
    """The tasks_by_space keys every write of a task row carries (the same ones each time)."""
    return {TASKS_PK: task_list_pk(space), TASKS_SK: space_position(created_at, task_id)}


def task_list_pk(space: str) -> str:
    return f"TASKS#{space}"


def task_list_start(space: str, position: str) -> dict[str, str]:
    """The tasks_by_space key a page resumes after: the index key and the task's own key."""
    return {
        **task_key(position.split("#", 1)[1]),
        TASKS_PK: task_list_pk(space),
        TASKS_SK: position,
    }


def task_id_of(item_key: dict[str, Any]) -> str:
    return str(item_key[PK]).removeprefix("TASK#")


def due_pk(pool: str) -> str:
    return f"DUE#{pool}"


def space_list_pk(space: str) -> str:
    return f"SPACE#{space}"


# --------------------------------------------------------------------- cursors

# Each paged read's cursor names one sort-key position of its own kind (store.cursors); a
# cursor of another kind, or a position of another shape, is refused as forged.
# The lease list's: its space, then a lease's place in it (created_at#lease_id).
LEASE_CURSOR = ("p", re.compile(r"[A-Z][A-Z0-9_]*/\d{13}#.+"))
EVENT_CURSOR = ("t", re.compile(r"EV#\d{13}#.+"))  # timeline SK
WORKER_CURSOR = ("w", re.compile(r"WORKER#.+"))  # workers SK
TASK_CURSOR = ("k", re.compile(r"\d{13}#[^#]+"))  # tasks_by_space SK: created_at#task_id


# ------------------------------------------------------------------------------ rules


def rule_key(rule_id: str) -> dict[str, str]:
    return {PK: f"RULE#{rule_id}", SK: "RULE"}


# A space's rules by name: the row reserves the name (written only if new) and lists the
# space's rules with one Query on the space's partition (never a Scan).
RULE_NAME_PREFIX = "RULENAME#"


def rule_name_key(space: str, name: str) -> dict[str, str]:
    return {PK: f"SPACE#{space}", SK: f"{RULE_NAME_PREFIX}{name}"}


def rule_count_key(space: str) -> dict[str, str]:
    """How many rules a space has: moved in the transaction that makes or deletes one, so
    creates at once cannot pass the space's cap together."""
    return {PK: f"SPACE#{space}", SK: "RULECOUNT"}


# A rule list's cursor: the space it lists, then the last rule name it showed.
RULE_CURSOR_SHAPE = re.compile(r"[^/]{1,64}/[A-Za-z0-9][A-Za-z0-9._ -]{0,63}")


# Enabled inbound rules by (topic, required recipient), across spaces: an email is matched
# by reading one partition per recipient plus the topic's "any recipient" partition, and an
# event of one space by the same partitions narrowed to the space's sort-key prefix.
ANY_RECIPIENT = "*"


def inbound_pk(topic: str, to: str | None) -> str:
    return f"INBOUND#{topic}#{to or ANY_RECIPIENT}"


def inbound_key(topic: str, to: str | None, space: str, rule_id: str) -> dict[str, str]:
    return {PK: inbound_pk(topic, to), SK: f"{space}#{rule_id}"}


# Every scheduled rule, enabled or not, in one partition: its schedule can be re-made from
# the table (the local stack's moto forgets schedules on restart) without a Scan.
SCHEDULED_RULES_PK = "SCHEDULED_RULES"


def scheduled_rule_key(space: str, rule_id: str) -> dict[str, str]:
    return {PK: SCHEDULED_RULES_PK, SK: f"{space}#{rule_id}"}


def event_record_key(space: str, event_id: str) -> dict[str, str]:
    return {PK: f"EVENTID#{space}#{event_id}", SK: "EVENTID"}


# Inbound addresses: one row per address says which space owns it (so ownership is one
# conditional put: two spaces racing for an address cannot both win), and one row per
# (space, address) lists a space's addresses with one bounded Query.
ADDRESS_PREFIX = "ADDR#"


def address_key(address: str) -> dict[str, str]:
    return {PK: f"ADDRESS#{address}", SK: "ADDRESS"}


def space_address_key(space: str, address: str) -> dict[str, str]:
    return {PK: f"SPACE#{space}", SK: f"{ADDRESS_PREFIX}{address}"}


# A rule's firings in one clock hour: the counter row a rule's max_firings_per_hour is
# enforced on, one conditional ADD per firing; it expires (TTL) a day after its hour.
def rule_hour_key(rule_id: str, hour: str) -> dict[str, str]:
    return {PK: f"RULE#{rule_id}", SK: f"HOUR#{hour}"}


# ------------------------------------------------------- attachments and retention

# A lease's attachments share its partition (one Query lists them), beside one counter row
# that caps how many a lease may have.
ATTACHMENT_PREFIX = "ATT#"
ATTACHMENT_COUNT_SK = "ATTCOUNT"


def attachment_key(lease_id: str, attachment_id: str) -> dict[str, str]:
    return {PK: f"LEASE#{lease_id}", SK: f"{ATTACHMENT_PREFIX}{attachment_id}"}


def attachment_count_key(lease_id: str) -> dict[str, str]:
    return {PK: f"LEASE#{lease_id}", SK: ATTACHMENT_COUNT_SK}


# The containers a lease has shipped logs from (a string set), on a row of their own: each
# names a log stream, and a lease keeps no more than its reads and its reclaim reach.
LOG_CONTAINERS_SK = "LOGCONTAINERS"


def log_containers_key(lease_id: str) -> dict[str, str]:
    return {PK: f"LEASE#{lease_id}", SK: LOG_CONTAINERS_SK}


def lease_pk(lease_id: str) -> str:
    return f"LEASE#{lease_id}"


def ended_pk(pool: str) -> str:
    return f"ENDED#{pool}"


# ------------------------------------------------------------------ the task graph

# Each task may have a graph row beside its task row (same partition): counters of children and
# blockers, moved only by conditional updates, and the instants it succeeded and rolled up. It
# is a row of its own so that the counters never race a whole-row write of the task.
GRAPH_SK = "GRAPH"
# Edges live in the partition of the task they start from: TASK#parent / CHILD#child and
# TASK#blocker / DEPENDENT#dependent, so a success reads its edges with one bounded Query.
# A lease that delegates tasks gets TASK#lease / DELEGATED#child edges (its own partition, keyed
# by the lease id), so its children are found with one bounded Query when it is stopped.
# A delegated task with a ttl gets TASK#ttl.<minute> / TTL#task, in the partition of the minute
# its ttl passes, so the sweeper reads each minute's due tasks with one bounded Query.
EDGE_PREFIX = {
    "child": "CHILD#",
    "dependent": "DEPENDENT#",
    "delegated": "DELEGATED#",
    "ttl": "TTL#",
}


def task_graph_key(task_id: str) -> dict[str, str]:
    return {PK: f"TASK#{task_id}", SK: GRAPH_SK}


def task_edge_key(task_id: str, kind: str, other: str) -> dict[str, str]:
    return {PK: f"TASK#{task_id}", SK: f"{EDGE_PREFIX[kind]}{other}"}


# A task's graph row and its dependent edges sort together in its partition (DEPENDENT#… <
# GRAPH): a Query between them finds either, which is what makes a task linked.
LINKED_FROM = EDGE_PREFIX["dependent"]
LINKED_TO = GRAPH_SK

# The scheduler's one row: its pause, and string sets of task ids claims skip.
SCHEDULER_KEY = {PK: "SCHEDULER", SK: "STATE"}
HOLD_SETS = {
    "paused": "paused_tasks",
    "attention": "attention_tasks",
    "blocked": "blocked_tasks",
    "cancelled": "cancelled_trees",
}


# ------------------------------------------------------------------ event waits


# A name and a key are any 1-128 characters: the name's length goes first, so that no
# (name, key) pair can be spelt like another ("a#b", "c" and "a", "b#c" differ).
def _signal(space: str, name: str, key: str) -> str:
    return f"{space}#{len(name)}#{name}#{key}"


# The blocks waiting for one (space, name, key) share a partition, one row per block
# (SK task#block), so an event reads its waiters with bounded Queries of that partition alone.
def event_wait_key(space: str, name: str, key: str, task_id: str, block_id: str) -> dict[str, str]:
    return {PK: f"EVWAIT#{_signal(space, name, key)}", SK: f"{task_id}#{block_id}"}


def event_wait_pk(space: str, name: str, key: str) -> str:
    return f"EVWAIT#{_signal(space, name, key)}"


# The last event of one (space, name, key), kept for the instance's event_ttl_seconds (its
# expires_at is the row's TTL; reads check it too, as TTL deletes lazily).
def kept_event_key(space: str, name: str, key: str) -> dict[str, str]:
    return {PK: f"EVENT#{_signal(space, name, key)}", SK: "EVENT"}
