"""The table's update and key-condition expressions, each named with what it does (the
conditions they are written under are store.conditions'; the key formats, store.keys')."""

from __future__ import annotations

from collections.abc import Iterable

from tenure.store.conditions import ACTIVE
from tenure.store.keys import (
    DUE_AT,
    DUE_PK,
    ENDED_AT,
    ENDED_PK,
    PK,
    QUEUE_PK,
    QUEUE_SK,
    SK,
    TASKS_PK,
    TTL_ATTRIBUTE,
)

# ------------------------------------------------------------------- key conditions

# Every row of one partition (a list partition, a timeline, a rule's index).
IN_PARTITION = f"{PK} = :pk"
# The rows of one partition whose sort key starts with :prefix (edges of a kind, a space's
# rule names or addresses, a lease's attachments).
WITH_PREFIX = f"{PK} = :pk AND begins_with({SK}, :prefix)"
# A task's dependent edges and its graph row sort together: one row between them is a link.
BETWEEN_FIRST_AND_LAST = f"{PK} = :pk AND {SK} BETWEEN :first AND :last"
# A timeline's event rows (not its anchors), by their prefix :ev.
EVENTS_OF = f"{PK} = :pk AND begins_with({SK}, :ev)"
# A timeline's rows between two sort keys (the anchors a page of events needs).
BETWEEN_LOW_AND_HIGH = f"{PK} = :pk AND {SK} BETWEEN :low AND :high"
# A space's tasks in the tasks_by_space index.
TASKS_OF_SPACE = f"{TASKS_PK} = :s"
# The due index's entries of one partition (a pool's held leases, or its queue timeouts)...
DUE_IN = f"{DUE_PK} = :p"
# ...and only those due by :now.
DUE_BY = f"{DUE_IN} AND {DUE_AT} <= :now"
# The ended index: a pool's ended leases up to :before (reclaim), or from :since (a page).
ENDED_BY = f"{ENDED_PK} = :p AND {ENDED_AT} <= :before"
ENDED_SINCE = f"{ENDED_PK} = :p AND {ENDED_AT} >= :since"


def queue_condition(due_by: bool = False, created_before: bool = False) -> str:
    """A queue partition :q, only the entries due by :due, or created before :before."""
    condition = f"{QUEUE_PK} = :q"
    if due_by:
        condition += f" AND {QUEUE_SK} <= :due"
    if created_before:
        condition += f" AND {QUEUE_SK} < :before"
    return condition


# --------------------------------------------------------------------------- updates


def set_each(names: Iterable[str]) -> str:
    """SET each named attribute to the value of the same name (`:name`)."""
    return "SET " + ", ".join(f"{name} = :{name}" for name in names)


def set_all(assignments: Iterable[str]) -> str:
    """SET each of these assignments (`name = value` terms written by the caller)."""
    return "SET " + ", ".join(assignments)


def set_keeping_others(count: int, removed: int = 0) -> str:
    """SET each of `count` attributes, named #s0, #s1... to :s0, :s1..., and REMOVE `removed`
    more, named #r0, #r1...: a row written attribute by attribute, every attribute not named
    kept as stored."""
    clause = "SET " + ", ".join(f"#s{i} = :s{i}" for i in range(count))
    if removed:
        clause += " REMOVE " + ", ".join(f"#r{i}" for i in range(removed))
    return clause


def add_counters(count: int) -> str:
    """ADD each of `count` counters, named #c0, #c1... by the values :c0, :c1... (a graph
    row's counts moved)."""
    return "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(count))


# A completion's cost key (:keys) added to a graph row's set of them (#keys), after its counts.
AND_ADD_COST_KEY = ", #keys :keys"
# After a graph row's counts: its mark (#mark) set to :at, and for a copied success, the copy
# noted.
AND_SET_MARK = " SET #mark = :at"
AND_MARK_COPIED = ", success_copied = :yes"
# A subtree cancel reaching a task (its root :root), and walked at once (#walked) when it has no
# child.
REACH = "SET cancel_reached_at = :at, cancel_root = :root"
AND_WALKED = ", #walked = :at"
# Tasks: a block of task numbers reserved on the space row; a parent's first child noted.
RESERVE_TASK_NUMBERS = "ADD task_seq :count"
SET_HAS_CHILDREN = "SET has_children = :yes"
# Tokens: revoked once; its use noted.
REVOKE = "SET revoked_at = :at"
NOTE_USE = "SET last_used_at = :at"
# An idempotency record's answer (`status` is a reserved word: #s).
FINISH_REQUEST = "SET #s = :status, answer = :answer"
# The dispatch controls' pause, with who paused and when.
PAUSE = "SET paused = :paused, paused_by = :by, paused_at = :at"
# A claim record moved on to another lease, with its new lifetime.
MOVE_CLAIM = f"SET lease_id = :lease, {TTL_ATTRIBUTE} = :keep"
# A waiting-claim slot (#slot) held until :until (the row kept a while after), or given back.
TAKE_SLOT = f"SET #slot = :until, {TTL_ATTRIBUTE} = :keep"
FREE_SLOT = "REMOVE #slot"
# A pool's queue marks: one entry (#p) set, the whole map made by the first, an entry dropped.
SET_QUEUE_MARK = "SET queue_marks.#p = :now"
FIRST_QUEUE_MARKS = "SET queue_marks = :marks"
DROP_QUEUE_MARK = "REMOVE queue_marks.#p"
# A ceiling's counter moved by :delta; a minute's rate counter also kept until :keep.
ADD_ACTIVE = f"ADD {ACTIVE} :delta"
KEEP_RATE_COUNTER = f" SET {TTL_ATTRIBUTE} = :keep"
# The scheduler row's hold sets (#set): a task id added or taken out.
ADD_HOLD = "ADD #set :ids"
# A worker's signal row: its epoch one higher (from 0 when the row is new), kept a while.
RAISE_SIGNAL = "ADD #epoch :one SET #ttl = :ttl"
DROP_HOLD = "DELETE #set :ids"
# An edge counted once, and the counter (#counter) it counts toward moved by one.
COUNT_EDGE = "SET counted_at = :at"
ADD_ONE = "ADD #counter :one"
# A task's success on its graph row: alone, naming its lease, or as the rollup of its children
# (which sets the success too when not set); a later success of another lease named alone.
SUCCEED = "SET succeeded_at = :at"
SUCCEED_NAMING = "SET succeeded_at = :at, succeeded_lease = :lease"
ROLL_UP = "SET rollup_at = :at, succeeded_at = if_not_exists(succeeded_at, :at)"
NAME_SUCCESS = "SET succeeded_lease = :lease"
# A success copied onto a graph row made after it (by a filing that links the task, or a run).
COPY_SUCCESS = "SET succeeded_at = :at, success_copied = :yes, succeeded_lease = :lease"
# A graph row made for a link (kept as it was when it exists).
LINK = "SET linked_at = if_not_exists(linked_at, :at)"
# A graph row's named mark (#mark) set to :at, or a forward-only cursor (#mark) moved to :to.
SET_MARK = "SET #mark = :at"
ADVANCE_MARK = "SET #mark = :to"
# A rule's firings in an hour, counted (the row kept until :expires); the hour's refusal noted.
COUNT_FIRING = f"ADD firings :one SET {TTL_ATTRIBUTE} = :expires"
NOTE_LIMITED = "SET limited_at = :hour"
# A lease's attachments and their bytes counted; the log containers it ships from counted.
COUNT_ATTACHMENT = "ADD attachments :one, attached_bytes :size"
COUNT_CONTAINERS = "ADD containers :new"
# An attachment's status (`status` is a reserved word: #status).
SET_STATUS = "SET #status = :status"
# A lease entered in the ended index (its partition key set), or taken out of it.
INDEX_ENDED = f"SET {ENDED_PK} = :p"
UNINDEX_ENDED = f"REMOVE {ENDED_PK}"

# ---------------------------------------------------------------- a space's rule count

# One more rule; the first create after the count row was introduced starts it from the rules
# the creator counted by reading (:counted).
COUNT_RULE = "SET rule_count = if_not_exists(rule_count, :counted) + :one, entity = :entity"
UNCOUNT_RULE = "SET rule_count = rule_count - :one"
