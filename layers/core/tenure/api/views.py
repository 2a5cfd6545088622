"""How entities read over HTTP: deterministic, so a replayed answer is the same bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from tenure.api import models
from tenure.app.conditions import Conditions, QueuedCondition
from tenure.app.ports import Attachment, LogLine
from tenure.app.usage import lease_usage
from tenure.domain.fencing import iso_ms
from tenure.domain.model import (
    DEFAULT_PRIORITY,
    Event,
    Instance,
    Lease,
    Pool,
    Space,
    Task,
    Token,
    Worker,
    Workflow,
)
from tenure.domain.retry import RetryPolicy
from tenure.domain.states import TaskStatus

if TYPE_CHECKING:  # the inspect route's and filing's: the worker function never loads them
    from tenure.app.inspect import Snapshot
    from tenure.app.tasks.filing import TaskView

iso = iso_ms  # one form for every time the API shows (the payload's too)


def lease_view(lease: Lease, condition: QueuedCondition | None = None) -> models.LeaseOut:
    """`condition` is the lease's queued condition as the service judged it. Once the lease
    has ended, what its final report said: a completion's result and details, a failure's
    error (null before, and for what it did not say)."""
    report = (lease.report or {}) if lease.state.terminal else {}
    return {
        "id": lease.id,
        "state": lease.state,
        "attempt": lease.attempt,
        "fence": lease.fence,
        "space": lease.space,
        "pool": lease.pool,
        "subject_kind": lease.subject_kind,
        "task": {"id": lease.task_id, "key": lease.task_key} if lease.task_id else None,
        "workflow": {"slug": lease.workflow} if lease.workflow else None,
        "job_id": lease.job_id,
        "priority": lease.claim_priority,
        "max_run_seconds": (
            lease.run_limit_seconds if lease.claimed_at is not None else lease.max_run_seconds
        ),
        "worker_id": lease.worker_id,
        "worker_version": lease.worker_version,
        "queued_condition": _condition_view(condition) if condition else None,
        "revoke": lease.revoke if lease.revoke else None,
        "end_reason": lease.end_reason if lease.end_reason else None,
        "outcome": lease.outcome,
        "result": report.get("result"),
        "details": report.get("details"),
        "error": report.get("error"),
        "claim_token_hash_truncated": lease.token_hash[:8] if lease.token_hash else None,
        "timing": {
            "created_at": iso(lease.created_at),
            "claimed_at": iso(lease.claimed_at),
            "started_at": iso(lease.started_at),
            "last_heartbeat_at": iso(lease.heartbeat_at),
            "deadline": iso(lease.deadline),
            "not_before": iso(lease.not_before),
            "ended_at": iso(lease.ended_at),
            "renew_seconds": lease.renew_seconds,
            "lease_seconds": lease.lease_seconds,
            "queue_expires_at": iso(lease.queue_expires_at),
            "run_deadline": iso(lease.run_deadline),
        },
        "reclaimed": lease.reclaimed_at is not None,
        "reclaimed_at": iso(lease.reclaimed_at),
        # Retry chains and operator recovery.
        "previous_lease_id": lease.previous_lease_id,
        "retry_depth": lease.retry_depth,
        "failure_kind": cast(models.FailureKind, lease.failure_kind),
        "concurrency_key": lease.concurrency_key,
        "usage": lease_usage(lease),
    }


def _condition_view(condition: QueuedCondition) -> models.QueuedConditionOut:
    return {
        "code": cast(models.QueuedCode, condition.code),
        "label": condition.label,
        "needs_person": condition.needs_person,
    }


def task_view(task: Task, status: TaskStatus, seen: TaskView | None = None) -> models.TaskOut:
    """`seen` adds what a read derives and never stores: blocked reasons, effective pause."""
    return {
        "id": task.id,
        "key": task.key,
        "space": task.space,
        "title": task.title,
        "body": task.body,
        "properties": task.properties,
        "workflow": {"slug": task.workflow} if task.workflow else None,
        "max_attempts": task.max_attempts,
        "status": status,
        # Derived by the read (app/tasks/filing.py), in the shape BlockedReason names.
        "blocked_reasons": [cast(models.BlockedReason, dict(r)) for r in seen.blocked_reasons]
        if seen
        else [],
        "created_at": iso(task.created_at),
        "checks": task.checks,
        "priority": DEFAULT_PRIORITY if task.priority is None else task.priority,
        "expires_in_seconds": task.expires_in_seconds,
        "max_run_seconds": task.max_run_seconds,
        "parent_id": task.parent_id,
        "depends_on": list(task.depends_on or ()),
        "auto_enqueue_on_ready": task.auto_enqueue_on_ready,
        "pool": task.pool,
        "paused": task.paused,
        "effective_paused": seen.effective_paused if seen else task.paused,
        "paused_by_task_id": seen.paused_by_task_id if seen else (task.id if task.paused else None),
        "children": {"total": seen.children_total, "completed": seen.children_done}
        if seen and seen.children_total
        else None,
        "usage": seen.usage if seen else None,
        "created_by_lease_id": task.created_by_lease,
        "wake_creator": task.wake_creator,
        "approval": approval_view(task.approval) if task.approval else None,
        "concurrency_key": task.concurrency_key,
    }


def approval_view(approval: dict[str, Any]) -> models.ApprovalOut:
    requested, at = approval.get("requested_at"), approval.get("at")
    return {
        "state": approval["state"],
        "requested_at": iso(int(requested)) if requested is not None else None,
        "pool": approval.get("pool"),
        "by": approval.get("by"),
        "at": iso(int(at)) if at is not None else None,
        "note": approval.get("note"),
    }


def event_view(event: Event) -> models.EventOut:
    return {
        "type": event.type,
        "at": iso(event.at),
        "lease_id": event.lease_id,
        "fence": event.fence,
        "data": event.data,
    }


def space_view(space: Space) -> models.SpaceOut:
    return {
        "key": space.key,
        "name": space.name,
        "max_active": space.max_active,
        "archived": space.archived,
        "created_at": iso(space.created_at),
    }


def workflow_view(wf: Workflow) -> models.WorkflowOut:
    return {
        "space": wf.space,
        "slug": wf.slug,
        "name": wf.name,
        "description": wf.description,
        "created_at": iso(wf.created_at),
    }


def pool_view(pool: Pool, active: int | None = None) -> models.PoolOut:
    """`active`: the held leases its ceiling counter shows (null where not read)."""
    return {
        "name": pool.name,
        "space": pool.space,
        "kind": pool.kind.value,
        "display_name": pool.label,
        "version": pool.version,
        "agent": pool.agent,
        "classifier": pool.classifier,
        "rates": pool.rates,
        "active": active,
        "max_active": pool.max_active,
        "renew_seconds": pool.renew_seconds,
        "grace_seconds": pool.grace_seconds,
        "toleration_seconds": pool.toleration_seconds,
        "on_expiry": pool.on_expiry.value,
        "keeps_logs": pool.keeps_logs,
        "paused": pool.paused,
        "created_at": iso(pool.created_at),
        "retention_seconds": pool.retention_seconds,
        "attachment_quota_bytes": pool.attachment_quota_bytes,
        "min_queued_age_seconds": pool.min_queued_age_seconds,
        "starvation_escalation_seconds": pool.starvation_escalation_seconds,
        "accepts_delegation_from": list(pool.accepts_delegation_from or ()),
        "max_delegated_per_lease": pool.max_delegated_per_lease,
        "max_delegated_per_tree": pool.max_delegated_per_tree,
        # The policy's view is the RetrySettings body it was set with, defaults filled in.
        "retry": cast(models.RetrySettings, RetryPolicy.of(pool.retry).view()),
        "max_active_per_key": pool.max_active_per_key,
        "max_claims_per_minute": pool.max_claims_per_minute,
        "max_run_seconds": pool.max_run_seconds,
    }


def token_view(token: Token, raw: str) -> models.TokenOut:
    """A token just made: the token itself is shown this once, and never again."""
    return {
        "id": token.id,
        "name": token.name,
        "kind": cast(models.TokenKind, token.kind),
        "role": cast(models.Role | None, token.role),
        "spaces": list(token.spaces) if token.spaces is not None else None,
        "pools": list(token.pools) if token.pools is not None else None,
        "created_at": iso(token.created_at),
        "expires_at": iso(token.expires_at),
        "token": raw,
    }


def token_info_view(token: Token) -> models.TokenInfo:
    """A token as the list shows it: never the token, never its hash."""
    return {
        "id": token.id,
        "name": token.name,
        "kind": cast(models.TokenKind, token.kind),
        "role": cast(models.Role | None, token.role),
        "spaces": list(token.spaces) if token.spaces is not None else None,
        "pools": list(token.pools) if token.pools is not None else None,
        "created_at": iso(token.created_at),
        "expires_at": iso(token.expires_at),
        "last_used_at": iso(token.last_used_at),
        "revoked_at": iso(token.revoked_at),
    }


def worker_view(worker: Worker, reachable: bool, leases: list[Lease]) -> models.WorkerOut:
    return {
        "worker_id": worker.worker_id,
        "worker_version": worker.worker_version,
        "pool": worker.pool,
        "last_seen": iso(worker.last_seen),
        "status": "reachable" if reachable else "unreachable",
        "leases": [
            {
                "id": lease.id,
                "state": lease.state,
                "fence": lease.fence,
                "deadline": iso(lease.deadline),
            }
            for lease in leases
        ],
        "runtime": worker.runtime,
        "credentials": worker.credentials,
    }


def instance_view(instance: Instance, active: int) -> models.InstanceOut:
    return {
        "max_active": instance.max_active,
        "block_recurrence_limit": instance.block_recurrence_limit,
        "allow_agent_force": instance.allow_agent_force,
        "retry_chain_cap": instance.retry_chain_cap,
        "event_ttl_seconds": instance.event_ttl_seconds,
        "active": active,
    }


def attachment_view(attachment: Attachment) -> models.AttachmentOut:
    return {
        "id": attachment.id,
        "kind": attachment.kind,
        "filename": attachment.filename,
        "content_type": attachment.content_type,
        "byte_size": attachment.byte_size,
        "created_at": iso(attachment.created_at),
    }


def log_line_view(line: LogLine) -> models.LogEventOut:
    return {
        "timestamp": iso(line.timestamp),
        "container": line.container,
        "stream": cast(models.Stream, line.stream),  # stored as the batch named it
        "message": line.message,
    }


def inspect_view(shot: Snapshot, conditions: Conditions) -> models.InspectOut:
    """`GET /inspect/{id}`'s answer (MCP's task_inspect answers the same)."""
    task = shot.task
    current = shot.current_lease
    recent = conditions.queued_conditions(shot.recent_leases)
    return {
        "task": task_view(task.task, task.status, task) if task else None,
        "current_lease": lease_view(current, conditions.queued_condition_of(current))
        if current
        else None,
        "recent_leases": [lease_view(x, recent[x.id]) for x in shot.recent_leases],
        "recent_events": [event_view(ev) for ev in shot.recent_events],
        "scheduler": shot.scheduler,
        "diagnostics": [
            {
                "code": cast(models.DiagnosticCode, d.code),
                "message": d.message,
                "since": iso(d.since),
            }
            for d in shot.diagnostics
        ],
        "facts": shot.facts,
        "next_action": shot.next_action.value,
        "as_of": iso(shot.as_of),
    }
