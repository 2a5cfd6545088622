"""Lease states and their groups, revoke signals, end reasons, and the other closed sets of
words (subject, pool and report kinds, task statuses). The moves between lease states are a
table in transitions.py; docs/states.md walks it."""

from __future__ import annotations

from enum import StrEnum


class LeaseState(StrEnum):
    PENDING = "pending"
    DISPATCHING = "dispatching"
    DISPATCHED = "dispatched"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"
    KILLED = "killed"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def active(self) -> bool:
        return self not in TERMINAL


TERMINAL = frozenset(
    {
        LeaseState.COMPLETED,
        LeaseState.FAILED,
        LeaseState.CANCELLED,
        LeaseState.LOST,
        LeaseState.KILLED,
    }
)
# Not yet held by a worker: cancel ends these at once.
QUEUED = frozenset({LeaseState.PENDING, LeaseState.DISPATCHING})
# Held by a worker: reports, heartbeats and expiry apply.
HELD = frozenset({LeaseState.DISPATCHED, LeaseState.RUNNING, LeaseState.PAUSED})
# Held, including the window in which the worker is being asked to stop.
REPORTABLE = HELD | {LeaseState.CANCELLING}


class Revoke(StrEnum):
    CANCEL = "cancel"
    KILL = "kill"
    PAUSE = "pause"


class SubjectKind(StrEnum):
    TASK = "task"
    WORKFLOW = "workflow"
    SPACE = "space"


class PoolKind(StrEnum):
    AGENT = "agent"
    CLASSIFIER = "classifier"
    COMMAND = "command"


class OnExpiry(StrEnum):
    REQUEUE = "requeue"
    FAIL = "fail"


class ReportKind(StrEnum):
    COMPLETE = "complete"
    FAIL = "fail"
    RELEASE = "release"


class EndReason(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    RELEASED = "released"
    CANCELLED = "cancelled"
    KILLED = "killed"
    EXPIRED = "expired"
    WORKER_LOST = "worker_lost"
    TTL_EXPIRED = "ttl_expired"  # a delegated child's ttl_seconds passed
    PARENT_STOPPED = "parent_stopped"  # a delegated child's creator lease was stopped or lost
    QUEUE_TIMEOUT = "queue_timeout"  # pending past its expires_in_seconds, never claimed
    TIMED_OUT = "timed_out"  # ran past its max_run_seconds: asked to stop, then killed


class TaskStatus(StrEnum):
    READY = "ready"
    BLOCKED = "blocked"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NEEDS_ATTENTION = "needs_attention"
