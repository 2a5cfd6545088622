"""Every event type the service writes on a timeline or publishes on its bus, named once.

A row names its own transition (its `event_type`) and the stream reactor turns it into a
timeline event; a few events are derived by the reactor itself (a rollup, a released run)
or published without a row (a creator's wake, a task's ending). Code names an event by
these constants only, so a new one is added here, where it is found with every other."""

from __future__ import annotations

# A lease's transitions (domain/transitions.py names which move writes which).
LEASE_CREATED = "lease.created"
LEASE_CLAIMED = "lease.claimed"
LEASE_CLAIM_RETRIED = "lease.claim_retried"
LEASE_STARTED = "lease.started"
LEASE_PAUSED = "lease.paused"
LEASE_RESUMED = "lease.resumed"
LEASE_COMPLETED = "lease.completed"
LEASE_FAILED = "lease.failed"
LEASE_FORCE_FAILED = "lease.force_failed"
LEASE_RELEASED = "lease.released"
LEASE_FORCE_RELEASED = "lease.force_released"
LEASE_LOST = "lease.lost"
LEASE_CANCELLING = "lease.cancelling"
LEASE_CANCELLED = "lease.cancelled"
LEASE_KILLING = "lease.killing"
LEASE_KILLED = "lease.killed"
LEASE_TIMING_OUT = "lease.timing_out"
LEASE_TTL_EXPIRED = "lease.ttl_expired"
LEASE_PARENT_STOPPED = "lease.parent_stopped"
LEASE_QUEUE_TIMED_OUT = "lease.queue_timed_out"
LEASE_RETRIED = "lease.retried"
LEASE_RETRY_SCHEDULED = "lease.retry_scheduled"
LEASE_STALE_REPORT = "lease.stale_report"
LEASE_RECLAIMED = "lease.reclaimed"
LEASE_COUNTED = "lease.counted"

# A task's own row changes.
TASK_UPDATED = "task.updated"
TASK_PAUSED = "task.paused"
TASK_RESUMED = "task.resumed"
TASK_CANCELLED = "task.cancelled"
TASK_RETRIED = "task.retried"
TASK_APPROVED = "task.approved"
TASK_REJECTED = "task.rejected"
TASK_BLOCKED = "task.blocked"
TASK_BLOCK_CLEARED = "task.block_cleared"
TASK_BLOCK_EXPIRED = "task.block_expired"
TASK_BLOCK_COUNTS_RESET = "task.block_counts_reset"
TASK_RUN_RELEASED = "task.run_released"
TASK_ESCALATED = "task.escalated"
TASK_STARVATION_ESCALATED = "task.starvation_escalated"
TASK_RECOVERED = "task.recovered"
TASK_EVENT_RECEIVED = "task.event_received"
TASK_CLASSIFIED = "task.classified"
TASK_ROLLUP_SETTLED = "task.rollup_settled"
TASK_ROLLUP_COMPLETED = "task.rollup_completed"
CLASSIFIER_OUTPUT_FAILED = "classifier.output_failed"
TASK_RUN_LEASE_RECOVERY_EXHAUSTED = "task.run.lease_recovery_exhausted"
TASK_COMPLETION_HALLUCINATION_BLOCKED = "task.completion.hallucination_blocked"
TASK_COMPLETION_HALLUCINATION_SUSPECTED = "task.completion.hallucination_suspected"

# What the bus carries beyond the timeline: a task's endings and a creator's wake.
TASK_COMPLETED = "task.completed"
TASK_FAILED = "task.failed"
TASK_NEEDS_ATTENTION = "task.needs_attention"
TASK_WAKE_CREATOR = "task.wake_creator"

# Pools, spaces, tokens and rules.
POOL_UPDATED = "pool.updated"
POOL_PAUSED = "pool.paused"
POOL_RESUMED = "pool.resumed"
SPACE_ARCHIVED = "space.archived"
SPACE_UNARCHIVED = "space.unarchived"
TOKEN_CREATED = "token.created"
TOKEN_REVOKED = "token.revoked"
RULE_RATE_LIMITED = "rule.rate_limited"

# An approval's decision by the state it records.
TASK_DECIDED = {"approved": TASK_APPROVED, "rejected": TASK_REJECTED}

# Every name above.
ALL: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
