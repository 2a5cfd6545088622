"""The conditions the table's writes are made under, each named with the reason it holds
(the key formats they guard are store.keys')."""

from __future__ import annotations

from tenure.store.keys import ENDED_PK, TTL_ATTRIBUTE

# Fencing: a lease write lands only on the (state, fence) the writer read.
LEASE_IS_AT = "#state = :expect_state AND fence = :expect_fence"
# ...and, for a whole-row write, on the very row it read: same version (no transition since)
# and same deadline (no heartbeat since), so nothing newer is overwritten with older values.
SAME_VERSION = "version = :expect_version"
SAME_DEADLINE = "deadline = :expect_deadline"
NO_DEADLINE = "attribute_not_exists(deadline)"
# The push after the sweeper's own absence marks each lease it moves with that absence (the
# pass that found it): a lease already carrying the mark is not moved again for it.
PUSHED_FOR = "pushed_for"
NOT_PUSHED_FOR = f"(attribute_not_exists({PUSHED_FOR}) OR {PUSHED_FOR} <> :pushed_for)"
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
# A pool row's copy of its space's and the instance's gates is written only while each row it
# copies still says so (the write that moves one copies its own value after it).
SPACE_ARCHIVED = "archived = :yes"
SPACE_NOT_ARCHIVED = "attribute_exists(PK) AND (attribute_not_exists(archived) OR archived = :no)"
HAS_CEILING = "attribute_exists(max_active)"
HAS_NO_CEILING = "attribute_not_exists(max_active)"
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


# -------------------------------------------------------------------------------- rules

# An address row is deleted only by the space that owns it.
ADDRESS_IS_OURS = "#space = :space"
SPACE_NAMES = {"#space": "space"}
# Counted only while under the cap: concurrent firings cannot go past it together.
BELOW_HOURLY_CAP = "attribute_not_exists(firings) OR firings < :cap"
# The first refusal of the hour marks the row, so `rule.rate_limited` is recorded once.
NOT_YET_LIMITED = "attribute_not_exists(limited_at)"
# A space's rule count grows only below the cap (creates at once cannot pass it together)...
RULES_BELOW_CAP = "attribute_not_exists(rule_count) OR rule_count < :cap"
# ...and shrinks only where it is kept: a space whose rules were made before the count row
# existed has none until its next create starts it.
RULES_COUNTED = "attribute_exists(rule_count)"
# A rule row is replaced only from the version the writer read (no lost PATCH).
RULE_VERSION_IS = "version = :expect_version"
# A firing notes itself on a rule that still exists (a deleted rule is not brought back).
RULE_EXISTS = "attribute_exists(PK)"
# A firing moves a rule's handled-through time only forward (a late or raced invocation for
# an earlier occasion leaves a later one noted).
RULE_FIRED_BEFORE = (
    "attribute_exists(PK) AND (attribute_not_exists(fired_through) OR fired_through < :through)"
)
# A name row is removed only while it still names the rule being changed.
NAME_IS_RULE = "rule_id = :rule_id"

# ------------------------------------------------------------ attachments and retention

# One more attachment only while the lease has fewer than the cap.
BELOW_ATTACHMENT_CAP = "attribute_not_exists(attachments) OR attachments < :cap"
# ... and only while its bytes stay within the pool's attachment_quota_bytes (:room is the
# quota less the new attachment's size, so the check and the ADD are one conditional write).
WITHIN_ATTACHMENT_QUOTA = (
    f"({BELOW_ATTACHMENT_CAP}) AND "
    "(attribute_not_exists(attached_bytes) OR attached_bytes <= :room)"
)
# A batch's containers are added only while the set stays within the cap: :room is the cap
# less how many the batch names (the batch's own condition adds what every one of them is
# already counted, so a batch of known containers passes at the cap).
WITHIN_LOG_CONTAINERS = "attribute_not_exists(containers) OR size(containers) <= :room"
# Reclaim is written once: a second pass (retried or concurrent) loses here and deletes nothing.
NOT_RECLAIMED = "attribute_exists(PK) AND attribute_not_exists(reclaimed_at)"
# A lease row not yet marked as keeping logs or attachments (the ended index's partition key
# is the mark): a whole-row write of a lease read without the mark expects it still absent.
KEEPS_NO_DETAIL = f"attribute_not_exists({ENDED_PK})"

# ----------------------------------------------------------------------- the task graph

# An edge counts toward its target once: a replayed stream record finds it counted.
EDGE_NOT_COUNTED = "attribute_exists(PK) AND attribute_not_exists(counted_at)"
# A dropped edge is deleted as it was read, so the counts that move with it stay exact.
EDGE_COUNTED = "attribute_exists(PK) AND attribute_exists(counted_at)"
# A blocker read as met (unmet) when a dependent was filed must still be so at commit.
HAS_SUCCEEDED = "attribute_exists(succeeded_at)"
NOT_SUCCEEDED = "attribute_not_exists(succeeded_at)"
# The newest lease of a task linked to while it has no graph row is still open (not ended).
LEASE_OPEN = "NOT #state IN (:completed, :failed, :cancelled, :lost, :killed)"
# A task's own success counts only once and only when no child is outstanding (a parent stays
# open until its children have all succeeded).
SUCCESS_DUE = (
    "attribute_not_exists(succeeded_at) AND "
    "(attribute_not_exists(children_total) OR children_done = children_total)"
)
# The migration marks a task that has children only where it exists and has no mark yet.
CHILDREN_UNMARKED = "attribute_exists(PK) AND attribute_not_exists(has_children)"
# A success names its lease unless the row names a later run's already (a replayed record of
# an older success changes nothing): lease ids order by the instant they were made.
NEWER_SUCCESS = "attribute_not_exists(succeeded_lease) OR succeeded_lease < :lease"
# The last child's success rolls its parent up exactly once.
ROLLUP_DUE = (
    "attribute_not_exists(rollup_at) AND children_total > :zero AND children_done = children_total"
)
# One auto-enqueue per readiness: every blocker met, and not enqueued for it before.
AUTO_ENQUEUE_DUE = (
    "attribute_not_exists(auto_enqueued_at) AND "
    "(attribute_not_exists(blockers_total) OR blockers_done = blockers_total)"
)
# A once-only mark on a graph row.
NOT_MARKED = "attribute_not_exists(#mark)"
# A cursor on a graph row moves only forward: a replayed or a rival step leaves it be.
ADVANCES = "attribute_not_exists(#mark) OR #mark < :to"
# A task write that bumps the row's version lands only on the version it read.
TASK_VERSION_IS = "version = :expect_task_version"
# A write of a task that does not carry its cancel lands only on a task not cancelled: a
# writer that read the row before the cancel (an enqueue, a pause) never wipes it out.
TASK_NOT_CANCELLED = "attribute_not_exists(cancelled)"
# A subtree cancel reaches a task once; no child is added under a task it has reached.
NOT_CANCEL_REACHED = "attribute_not_exists(cancel_reached_at)"
NO_CHILDREN = "(attribute_not_exists(children_total) OR children_total = :zero)"
