"""The task graph and operator recovery: PATCH and pause/resume of tasks, retry,
bulk force release / fail, and inspect."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, lease_out, op, svc
from tenure.app.leases.force import ForceRow
from tenure.app.tasks.filing import TaskView


def _task_answer(seen: TaskView) -> models.TaskAnswer:
    return models.TaskAnswer(
        task=views.task_view(seen.task, seen.status, seen),
        lease=lease_out(seen.lease) if seen.lease else None,
    )


@op("PATCH", f"{BASE}/tasks/<task_id>", 200, models.TaskAnswer, 404, 409)
def update_task(task_id: str, body: Annotated[models.TaskPatch, Body()]) -> Response[Any]:
    depends = tuple(body.depends_on) if body.depends_on is not None else None
    seen = svc().graph.update_task(
        actor(), task_id, body.auto_enqueue_on_ready, body.pool, depends_on=depends
    )
    return json_answer(_task_answer(seen))


@op("POST", f"{BASE}/tasks/<task_id>/pause", 200, models.TaskAnswer, 404, 409)
def pause_task(task_id: str) -> Response[Any]:
    return json_answer(_task_answer(svc().graph.pause_task(actor(), task_id)))


@op("POST", f"{BASE}/tasks/<task_id>/resume", 200, models.TaskAnswer, 404, 409)
def resume_task(task_id: str) -> Response[Any]:
    return json_answer(_task_answer(svc().graph.resume_task(actor(), task_id)))


@op("POST", f"{BASE}/leases/<lease_id>/retry", 201, models.LeaseAnswer, 404, 409)
def retry_lease(lease_id: str) -> Response[Any]:
    return json_answer(
        models.LeaseAnswer(lease=lease_out(svc().force.retry(actor(), lease_id))), 201
    )


def _rows(rows: list[ForceRow]) -> models.ForceResults:
    out: list[models.ForceRowOut] = []
    for row in rows:
        if row.ok and row.lease is not None:
            out.append(
                models.ForceRowOut(lease_id=row.lease_id, ok=row.ok, lease=lease_out(row.lease))
            )
        else:
            out.append(
                models.ForceRowOut(
                    lease_id=row.lease_id, ok=row.ok, code=row.code, message=row.message
                )
            )
    return models.ForceResults(results=out)


@op("POST", f"{BASE}/leases/bulk/release", 200, models.ForceResults, 404)
def bulk_release(body: Annotated[models.BulkRelease, Body()]) -> Response[Any]:
    return json_answer(_rows(svc().force.bulk_release(actor(), body.lease_ids, body.reason)))


@op("POST", f"{BASE}/leases/bulk/fail", 200, models.ForceResults, 404)
def bulk_fail(body: Annotated[models.BulkFail, Body()]) -> Response[Any]:
    return json_answer(_rows(svc().force.bulk_fail(actor(), body.lease_ids, body.reason)))


@op("GET", f"{BASE}/inspect/<some_id>", 200, models.InspectOut, 404)
def inspect(some_id: str) -> Response[Any]:
    shot = svc().inspection.inspect(actor(), some_id)
    return json_answer(views.inspect_view(shot, svc().conditions))
