"""The conditions the table's writes are made under, each named with the reason it holds
(the key formats they guard are store.keys')."""

from __future__ import annotations

from tenure.store.keys import TTL_ATTRIBUTE

# Fencing: a lease write lands only on the (state, fence) the writer read.
LEASE_IS_AT = "#state = :expect_state AND fence = :expect_fence"
# ...and, for a whole-row write, on the very row it read: same version (no transition since)
# and same deadline (no heartbeat since), so nothing newer is overwritten with older values.
SAME_VERSION = "version = :expect_version"
SAME_DEADLINE = "deadline = :expect_deadline"
NO_DEADLINE = "attribute_not_exists(deadline)"
# An enqueue opens a run only while the task's last job still points at the ended lease the
# writer saw (a release or expiry in between would have moved it to a successor).
JOB_LEASE_IS = "lease_id = :expect_lease"
IMPLIED_JOB_LEASE_IS = f"attribute_not_exists(PK) OR {JOB_LEASE_IS}"
# A claim record still names the lease the call moving it on last saw it name.
CLAIM_NAMES = "lease_id = :expect_lease"
# Creation: a key is written once; a second create loses (already_exists, or a lost race).
# A claim record is written with this too: a second claim with the same claim_id loses.
IS_NEW = "attribute_not_exists(PK)"
# A task id a claim gave up on (its filing died between writing the first lease and the
# task): the row's kind, and the condition that takes the id — free, or given up already (a
# claim that crashed after voiding it leaves the lease's end to the next claim).
VOID_TASK = "task_void"
IS_NEW_OR_VOID = "attribute_not_exists(PK) OR entity = :void"
# An idempotency key is taken when new, when its record has expired (TTL deletes lazily), or
# when the request that took it never answered and its lock has passed.
# An event id's record: new, or one whose time has passed (TTL deletes lazily).
NEW_OR_EXPIRED = f"attribute_not_exists(PK) OR {TTL_ATTRIBUTE} < :now_s"
TAKE_REQUEST = (
    f"attribute_not_exists(PK) OR {TTL_ATTRIBUTE} < :now_s"
    " OR (attribute_not_exists(answer) AND locked_until < :now_ms)"
)
# A pool row's `queue_marks` map: an entry is set only once the map exists, the map itself
# only on a pool that exists and has none yet; an entry is dropped only while still older
# than the sweeper's cutoff (a filing that refreshed it meanwhile keeps it).
QUEUE_MARKS_EXIST = "attribute_exists(queue_marks)"
FIRST_QUEUE_MARK = "attribute_exists(PK) AND attribute_not_exists(queue_marks)"
QUEUE_MARK_OLDER = "queue_marks.#p < :before"
# A waiting claim takes a slot that is free or whose holder's time has passed (a claim that
# died waiting holds its slot only until then), and gives back only the slot it still holds.
WAIT_SLOT_FREE = "attribute_not_exists(#slot) OR #slot < :now"
WAIT_SLOT_IS_OURS = "#slot = :until"
# Filter (not a condition): TTL deletes lazily, so reads drop rows already past their end.
NOT_EXPIRED = f"attribute_not_exists({TTL_ATTRIBUTE}) OR {TTL_ATTRIBUTE} > :now"
# The job's fence counter moves only from the fence the writer saw.
JOB_FENCE_IS = "fence = :expect_fence"
# ...or, for a task's first job (domain/model.py first_job_id) expected at fence 1 or on its
# first lease, no row yet: such a job is at fence 1, on its first lease, until its row exists.
IMPLIED_JOB_FENCE_IS = f"attribute_not_exists(PK) OR {JOB_FENCE_IS}"
# At most one open run per task: the task must still point at the run the writer saw ended.
TASK_JOB_IS = "job_id = :expect_job"
TASK_HAS_NO_JOB = "attribute_exists(PK) AND attribute_not_exists(job_id)"
# A token is revoked once: the first revocation's time stands.
TOKEN_NOT_REVOKED = "attribute_exists(PK) AND attribute_not_exists(revoked_at)"
# A token's use is noted only when the note is a minute old or more (the same bound the
# service judges by, so a note it decides to write does not lose its condition at the edge):
# at most one write a minute.
TOKEN_USE_IS_OLD = (
    "attribute_exists(PK) AND (attribute_not_exists(last_used_at) OR last_used_at <= :before)"
)
# Task numbers are handed out only by spaces that exist.
EXISTS = "attribute_exists(PK)"
# The schema row moves only from the write its writer read.
SCHEMA_STEP_IS = "step = :step"

STATE_NAMES = {"#state": "state"}
# Ceilings: a held-lease counter on the pool or space row; a claim may add one only below the
# limit, in the same transaction as the lease it takes.
ACTIVE = "active"
# The limit is the row's own max_active, never the claimer's copy of it (pools, spaces and
# the instance are cached in-process): a ceiling lowered a moment ago holds at once.
BELOW_CEILING = (
    "attribute_not_exists(max_active) OR attribute_not_exists(active) OR active < max_active"
)
# A key's or a minute's counter has no setting of its own on its row: the limit is the pool's,
# as the claim read it fresh (at its start and every POOL_REFRESH_MS of a long poll).
BELOW_LIMIT = "attribute_not_exists(active) OR active < :limit"
# A settings update lands only on a row that exists (an unknown pool or space is NotFound).
# A pool's agent/classifier change lands only on the version it was judged against.
POOL_VERSION_IS = "attribute_exists(PK) AND version = :expect_version"
# One sweeper pass at a time: a pass claims the slot only from the last pass it read.
SWEEP_AFTER = "last_pass_at = :expect_last"
