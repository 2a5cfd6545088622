"""MCP tools that run the whole loop under a worker token (claim, heartbeat, report, block,
payload), each resolving its run from the caller (app/leases/bound.py), and the operator's
recovery tools (recover, inspect, approve). No input or result carries a lease token:
`claim_token_hash` is its hash's first 8 characters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from tenure.api import models, views
from tenure.api.mcp.tool import Tool, lease_mcp
from tenure.app.leases.bound import BOUND_WAIT_SECONDS, BoundRun
from tenure.app.tenure import Tenure
from tenure.domain import errors
from tenure.domain.model import Lease, Principal

# What a claim answer shows of the token's hash.
HASH_SHOWN = 8

RunId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TaskId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Note = Annotated[str, StringConstraints(max_length=2000)]


class ClaimNextArgs(models.Strict):
    pool: models.Name | None = Field(
        None, description="the pool (may be left out when the token has one)"
    )
    worker_id: models.WorkerId = Field(description="this worker's id, the same on every later call")
    wait: bool = Field(
        False,
        description=f"long-poll up to {BOUND_WAIT_SECONDS} s for a claimable run (answered at "
        "once while 8 claims of the token are waiting already)",
    )
    lease_seconds: models.LeaseSeconds | None = Field(None, description="this run's toleration")
    claim_id: models.ClaimId | None = Field(
        None,
        description="an idempotency key: a retry with the same key (its answer was lost) "
        "gets the same run at the same fence, never a second one",
    )


class ClaimArgs(models.Strict):
    run_id: RunId = Field(description="the queued run (its lease id) to claim")
    worker_id: models.WorkerId = Field(description="this worker's id, the same on every later call")
    lease_seconds: models.LeaseSeconds | None = Field(None, description="this run's toleration")


class RunArgs(models.Strict):
    run_id: RunId = Field(description="the run (its lease id) from task_run_claim_next")
    worker_id: models.WorkerId = Field(description="the worker_id the run was claimed with")


class RunHeartbeatArgs(RunArgs):
    lease_seconds: models.LeaseSeconds | None = None


class RunCompleteArgs(RunArgs):
    outcome: Literal["success", "failure"] = "success"
    details: Annotated[dict[str, Any] | None, models.Document] = None
    result: Annotated[Any, models.Document] = None
    usage: Annotated[dict[str, Any] | None, models.Document] = None
    created_task_ids: Annotated[list[str], Field(max_length=100)] | None = None
    report_id: models.ReportId | None = None


class RunFailArgs(RunArgs):
    error: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    metadata: Annotated[dict[str, Any] | None, models.Document] = None
    usage: Annotated[dict[str, Any] | None, models.Document] = None
    report_id: models.ReportId | None = None
    retryable: bool | None = None


class RunReleaseArgs(RunArgs):
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None
    report_id: models.ReportId | None = None


class RunBlockArgs(RunArgs, models.BlockCreate):
    pass


class RecoverArgs(models.Strict):
    task_id: TaskId = Field(description="the task's id or key")
    note: str = Field(min_length=1, max_length=2000, description="why it is safe to go on")


class InspectArgs(models.Strict):
    id: TaskId = Field(description="a task id, a task key or a lease id")


class ApproveArgs(models.Strict):
    task_id: TaskId = Field(description="the task's id or key")
    note: Note | None = None


def run_view(lease: Lease) -> dict[str, Any]:
    return {
        "run_id": lease.id,
        "state": lease.state.value,
        "fence": lease.fence,
        "deadline": views.iso(lease.deadline) if lease.deadline is not None else None,
        "attempt": lease.attempt,
    }


def _bound(svc: Tenure, actor: Principal, args: RunArgs) -> BoundRun:
    return svc.bound.resolve(actor, args.run_id, args.worker_id)


def _report(args: RunArgs) -> dict[str, Any]:
    return args.model_dump(exclude_unset=True, exclude={"run_id", "worker_id"})


def _ended(svc: Tenure, lease: Lease) -> dict[str, Any]:
    return {"run": run_view(lease), "lease": lease_mcp(svc, lease)}


def _claim_next(svc: Tenure, actor: Principal, args: ClaimNextArgs) -> dict[str, Any]:
    won = svc.bound.claim_next(
        actor, args.pool, args.worker_id, args.wait, args.lease_seconds, args.claim_id
    )
    return _claimed(svc, won)


def _claim(svc: Tenure, actor: Principal, args: ClaimArgs) -> dict[str, Any]:
    won = svc.bound.claim_exact(actor, args.run_id, args.worker_id, args.lease_seconds)
    return _claimed(svc, won)


def _claimed(svc: Tenure, won: Any) -> dict[str, Any]:
    if won is None:
        return {"run": None}
    lease = won.lease
    bundle = svc.payloads.claimed_payload(lease, won.task)
    task = None
    if lease.task_id is not None:
        read = won.task if won.task is not None else svc.kernel.task(lease.task_id)
        seen = svc.graph.describe_task(read, lease)
        task = views.task_view(seen.task, seen.status, seen)
    return {
        "run": run_view(lease),
        "task": task,
        "payload": {**bundle, "lease": lease_mcp(svc, lease)} if bundle else None,
        "claim_token_hash": (lease.token_hash or "")[:HASH_SHOWN],
    }


def _heartbeat(svc: Tenure, actor: Principal, args: RunHeartbeatArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    beat = svc.reports.heartbeat(run.holder, run.lease.id, args.lease_seconds)
    return {
        "run": run_view(beat.lease),
        "revoke": beat.revoke.value if beat.revoke else None,
    }


def _complete(svc: Tenure, actor: Principal, args: RunCompleteArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    return _ended(
        svc, svc.reports.complete(run.holder, run.lease.id, _report(args), read=run.lease)
    )


def _fail(svc: Tenure, actor: Principal, args: RunFailArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    return _ended(svc, svc.reports.fail(run.holder, run.lease.id, _report(args), read=run.lease))


def _release(svc: Tenure, actor: Principal, args: RunReleaseArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    return _ended(svc, svc.reports.release(run.holder, run.lease.id, _report(args), read=run.lease))


def _block(svc: Tenure, actor: Principal, args: RunBlockArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    if run.lease.task_id is None:
        raise errors.InvalidTransition(
            f"lease {run.lease.id} answers for a {run.lease.subject_kind.value}, not a task: "
            "only a task can be blocked"
        )
    block = svc.event_waits.block(
        run.holder,
        run.lease.task_id,
        args.kind,
        args.reason,
        args.expires_in_seconds,
        args.event,
        args.key,
    )
    return {"block": block, "run": run_view(svc.kernel.lease(run.lease.id))}


def _payload(svc: Tenure, actor: Principal, args: RunArgs) -> dict[str, Any]:
    run = _bound(svc, actor, args)
    bundle = svc.payloads.payload(run.holder, run.lease.id)
    return {**bundle, "lease": lease_mcp(svc, bundle["lease"])}


def _task_answer(svc: Tenure, seen: Any) -> dict[str, Any]:
    return {
        "task": views.task_view(seen.task, seen.status, seen),
        "lease": lease_mcp(svc, seen.lease) if seen.lease else None,
    }


def _recover(svc: Tenure, actor: Principal, args: RecoverArgs) -> dict[str, Any]:
    return _task_answer(
        svc, svc.breaker.recover_task(actor, svc.task_keys.task_id(actor, args.task_id), args.note)
    )


def _inspect(svc: Tenure, actor: Principal, args: InspectArgs) -> dict[str, Any]:
    shot = svc.inspection.inspect(actor, svc.task_keys.task_id(actor, args.id))
    return dict(views.inspect_view(shot, svc.conditions))


def _approve(svc: Tenure, actor: Principal, args: ApproveArgs) -> dict[str, Any]:
    return _task_answer(
        svc, svc.approval.approve(actor, svc.task_keys.task_id(actor, args.task_id), args.note)
    )


READ, MEMBER, WORKER = "operator:read", "operator:member", "worker"

RUN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "task_run_claim_next",
        "Claim the next run of a pool for this worker: its run (run_id, state, fence, "
        "deadline, attempt), task and payload, or run null when nothing is claimable. "
        f"`wait: true` long-polls up to {BOUND_WAIT_SECONDS} s. Send a `claim_id` to retry "
        "safely: the same key answers the same run.",
        ClaimNextArgs,
        (WORKER,),
        _claim_next,
        read_only=False,
    ),
    Tool(
        "task_run_claim",
        "Claim one named queued run for this worker: that run or nothing (run null while a "
        "pause, a ceiling or its not_before holds it); invalid_transition when it is held or "
        "has ended.",
        ClaimArgs,
        (WORKER,),
        _claim,
        read_only=False,
    ),
    Tool(
        "task_run_heartbeat",
        "Keep a run alive (a first heartbeat starts it); `revoke` says when an operator asks "
        "the work to stop (cancel, kill or pause).",
        RunHeartbeatArgs,
        (WORKER,),
        _heartbeat,
        read_only=False,
    ),
    Tool(
        "task_run_complete",
        "Report a run done: outcome (success by default), result, details, usage, the ids "
        "of tasks it created, an optional report_id. The same report again answers the same.",
        RunCompleteArgs,
        (WORKER,),
        _complete,
        read_only=False,
    ),
    Tool(
        "task_run_fail",
        "Report a run failed with an error (and optional metadata); an attempt is used.",
        RunFailArgs,
        (WORKER,),
        _fail,
        read_only=False,
    ),
    Tool(
        "task_run_release",
        "Hand a run back to the queue without using an attempt.",
        RunReleaseArgs,
        (WORKER,),
        _release,
        read_only=False,
    ),
    Tool(
        "task_run_block",
        "Say a run's task cannot go on, and why (kind transient, dependency_external, "
        "needs_input or error); the run is released in the same step, no attempt used.",
        RunBlockArgs,
        (WORKER,),
        _block,
        read_only=False,
    ),
    Tool(
        "task_run_payload",
        "Read a run's work bundle: the lease, its subject and, for a rule's run, its trigger.",
        RunArgs,
        (WORKER,),
        _payload,
    ),
    Tool(
        "task_recover",
        "Bring a task out of needs_attention: its open blocks are closed and it is ready "
        "again (enqueued when it opted in). The note says why it is safe to go on.",
        RecoverArgs,
        (MEMBER,),
        _recover,
        read_only=False,
    ),
    Tool(
        "task_inspect",
        "Diagnose a task (or a lease's task): its current and recent runs, recent events, "
        "the scheduler's state, diagnostics and the next action.",
        InspectArgs,
        (READ,),
        _inspect,
    ),
    Tool(
        "task_approve",
        "Approve a task that awaits approval, with an optional note: it may then be run.",
        ApproveArgs,
        (MEMBER,),
        _approve,
        read_only=False,
    ),
)
