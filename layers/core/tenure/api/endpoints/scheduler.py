"""The scheduler: status, pause and resume, backlog, drain."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure.api import models
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, leases_out, op, svc
from tenure.app.dispatch_controls import BACKLOG_PAGE, SchedulerStatus
from tenure.domain import errors


def _status(status: SchedulerStatus) -> models.SchedulerOut:
    return models.SchedulerOut(
        paused=status.paused,
        queued_run_count=status.queued_run_count,
        capacity_waiting_count=status.capacity_waiting_count,
        starved_run_count=status.starved_run_count,
        needs_attention_run_count=status.needs_attention_run_count,
    )


@op("GET", f"{BASE}/scheduler", 200, models.SchedulerOut)
def scheduler_status() -> Response[Any]:
    return json_answer(_status(svc().scheduler.scheduler_status(actor())))


@op("POST", f"{BASE}/scheduler/pause", 200, models.SchedulerOut, 404)
def pause_scheduler() -> Response[Any]:
    return json_answer(_status(svc().scheduler.pause_scheduler(actor())))


@op("POST", f"{BASE}/scheduler/resume", 200, models.SchedulerOut, 404)
def resume_scheduler() -> Response[Any]:
    return json_answer(_status(svc().scheduler.resume_scheduler(actor())))


@op("GET", f"{BASE}/scheduler/backlog", 200, models.Backlog, 404)
def backlog(
    space: Annotated[str, Query()],
    include_paused: Annotated[bool, Query()] = False,
    limit: Annotated[int, Query(ge=1, le=100)] = BACKLOG_PAGE,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space is required: the backlog of one space")
    entries, next_cursor = svc().scheduler.backlog(caller, space, include_paused, limit, cursor)
    shown = leases_out(x.lease for x in entries)
    rows = [
        models.BacklogLease(
            **view, effective_paused=x.effective_paused, paused_by_task_id=x.paused_by_task_id
        )
        for view, x in zip(shown, entries, strict=True)
    ]
    return json_answer(models.Backlog(leases=rows, next_cursor=next_cursor))


@op("POST", f"{BASE}/scheduler/drain", 200, models.Drained, 404)
def drain(body: Annotated[models.Drain, Body()]) -> Response[Any]:
    done = svc().scheduler.drain(actor(), body.timeout_seconds)
    return json_answer(models.Drained(drained=done.drained, active=done.active))
