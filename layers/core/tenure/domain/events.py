"""Every event type the service writes on a timeline or publishes on its bus, named once.

A row names its own transition (its `event_type`) and the stream reactor turns it into a
timeline event; a few events are derived by the reactor itself (a rollup, a released run)
or published without a row (a creator's wake, a task's ending). Code names an event by
these constants only, so a new one is added here, where it is found with every other."""

from __future__ import annotations

from typing import Any

from tenure.domain.model import Lease, Task, TaskGraph
from tenure.domain.states import EndReason, LeaseState
from tenure.records import record

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


# ---------------------------------------------------------------- what a record stands for
#
# A stream record is one row change; the domain events below are what it means for the
# reactions (app/reactions.py), derived once per record by `derive`. A reaction is keyed by
# the event's type, so the "did this lease just end, and how?" question is answered here
# once, not by each reaction.


@record
class LeaseEnded:
    """A lease reached a terminal state with this write (a replay of an ended row is not)."""

    before: Lease | None
    lease: Lease

    @property
    def outcome(self) -> str | None:
        return self.lease.outcome

    @property
    def reason(self) -> EndReason | None:
        return self.lease.end_reason


@record
class SuccessReported:
    """A task's lease ended on a report of success, however it ended (a report of success
    on a lease an operator was cancelling ends it cancelled, with that outcome kept)."""

    lease: Lease


@record
class TaskSucceeded:
    """A task's run completed with success: its task has succeeded, unless a parent still
    waits for its children."""

    lease: Lease


@record
class GraphMoved:
    """A task's graph row changed (its counts, its success, a rollup, a stop's or a subtree
    cancel's cursor)."""

    before: TaskGraph | None
    row: TaskGraph


@record
class TaskMoved:
    """A task row's next version, naming its transition (`task.event_type`)."""

    before: Task | None
    task: Task


DomainEvent = LeaseEnded | SuccessReported | TaskSucceeded | GraphMoved | TaskMoved


def derive(entity: str, old: Any, new: Any) -> tuple[DomainEvent, ...]:
    """The domain events one row change stands for (`entity`: "lease", "task" or "graph";
    `old`: the row before, None when new), most specific first: a task's success, the
    reported success, then the lease's end."""
    if entity == "lease":
        return _lease_events(old, new)
    if entity == "graph":
        return (GraphMoved(old, new),)
    if entity == "task":
        if new.event_type is None or (old is not None and old.version == new.version):
            return ()  # no transition (a mark), or a replay of this version
        return (TaskMoved(old, new),)
    return ()


def _lease_events(old: Lease | None, new: Lease) -> tuple[DomainEvent, ...]:
    if not new.state.terminal or (old is not None and old.state.terminal):
        return ()
    found: list[DomainEvent] = []
    if new.task_id is not None and new.outcome == "success":
        if new.state is LeaseState.COMPLETED:
            found.append(TaskSucceeded(new))
        found.append(SuccessReported(new))
    found.append(LeaseEnded(old, new))
    return tuple(found)
