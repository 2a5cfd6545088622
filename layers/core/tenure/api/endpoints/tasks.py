"""Tasks: filing, enqueueing, reading, and their timeline."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, lease_out, leases_out, op, svc
from tenure.app.runs import RunControls
from tenure.app.tasks.filing import ACTIVITY_PAGE, TaskLinks, TaskView
from tenure.app.tasks.listing import TASK_PAGE_MAX
from tenure.domain import errors
from tenure.domain.states import TaskStatus

# The same key and body within a day answer the first answer; another body is 422.
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="idempotency-key",
        description="the same key and body within 24 h answer the first answer (same status "
        "and body); the same key with another body is 422 validation_failed",
    ),
]


@op("POST", f"{BASE}/tasks", 201, models.TaskAnswer, 404, 409, 422)
def create_task(
    body: Annotated[models.TaskCreate, Body()], idempotency_key: IdempotencyKey = None
) -> Response[Any]:
    caller = actor()
    status, answer = svc().idempotency.once(
        caller,
        "POST /tasks",
        idempotency_key,
        body.model_dump(mode="json", exclude_unset=True),
        lambda: (201, dict(_file(caller, body))),
    )
    return json_answer(answer, status)


def _file(caller: Any, body: models.TaskCreate) -> models.TaskAnswer:
    task, lease = svc().filing.create_task(
        caller,
        body.space,
        body.title,
        body.workflow,
        body.body,
        body.properties,
        body.pool,
        body.max_attempts,
        models.caller_time(body.not_before) if body.not_before else None,
        links=TaskLinks(
            body.parent_id,
            tuple(body.depends_on),
            body.auto_enqueue_on_ready,
            wake_creator=body.wake_creator,
            requires_approval=body.requires_approval,
            ttl_seconds=body.ttl_seconds,
        ),
        concurrency_key=body.concurrency_key,
        controls=RunControls(body.priority, body.expires_in_seconds, body.max_run_seconds),
    )
    seen = svc().graph.describe_filed(task, lease)
    return models.TaskAnswer(
        task=views.task_view(task, seen.status, seen), lease=lease_out(lease) if lease else None
    )


@op("POST", f"{BASE}/tasks/<task_id>/enqueue", 201, models.LeaseAnswer, 404, 409, 422)
def enqueue(
    task_id: str, body: Annotated[models.Enqueue, Body()], idempotency_key: IdempotencyKey = None
) -> Response[Any]:
    caller = actor()
    not_before = models.caller_time(body.not_before) if body.not_before else None

    def run() -> tuple[int, dict[str, Any]]:
        controls = RunControls(body.priority, body.expires_in_seconds, body.max_run_seconds)
        lease = svc().filing.enqueue(
            caller,
            task_id,
            body.pool,
            not_before,
            concurrency_key=body.concurrency_key,
            controls=controls,
        )
        return 201, dict(models.LeaseAnswer(lease=lease_out(lease)))

    status, answer = svc().idempotency.once(
        caller,
        f"POST /tasks/{task_id}/enqueue",
        idempotency_key,
        body.model_dump(mode="json", exclude_unset=True),
        run,
    )
    return json_answer(answer, status)


@op("POST", f"{BASE}/tasks/<task_id>/approve", 200, models.TaskAnswer, 404, 409)
def approve_task(
    task_id: str, body: Annotated[models.TaskApprove | None, Body()] = None
) -> Response[Any]:
    seen = svc().approval.approve(actor(), task_id, body.note if body else None)
    return json_answer(_task_answer(seen))


@op("POST", f"{BASE}/tasks/<task_id>/reject", 200, models.TaskAnswer, 404, 409)
def reject_task(task_id: str, body: Annotated[models.TaskReject, Body()]) -> Response[Any]:
    return json_answer(_task_answer(svc().approval.reject(actor(), task_id, body.note)))


@op("POST", f"{BASE}/tasks/<task_id>/cancel", 202, models.TaskCancelled, 404, 409, 422)
def cancel_task(task_id: str, body: Annotated[models.TaskCancel, Body()]) -> Response[Any]:
    done = svc().cancellation.cancel(actor(), task_id, body.reason, body.subtree)
    return json_answer(
        models.TaskCancelled(cancelled=done.cancelled, remaining=done.remaining), 202
    )


def _task_answer(seen: TaskView) -> models.TaskAnswer:
    return models.TaskAnswer(
        task=views.task_view(seen.task, seen.status, seen),
        lease=lease_out(seen.lease) if seen.lease else None,
    )


@op("GET", f"{BASE}/tasks", 200, models.TaskList, 404, 422)
def list_tasks(
    # Required, yet checked by the route too: `space=` (empty) is missing_scope as well.
    space: Annotated[str, Query()],
    status: Annotated[TaskStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=TASK_PAGE_MAX)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space is required: list the tasks of one space")
    page = svc().listing.list_tasks(caller, space, limit, cursor, status)
    leases = leases_out(x.lease for x in page.tasks if x.lease is not None)
    shown = iter(leases)
    rows = [
        models.TaskAnswer(
            task=views.task_view(x.view.task, x.view.status, x.view),
            lease=next(shown) if x.lease is not None else None,
        )
        for x in page.tasks
    ]
    return json_answer(models.TaskList(tasks=rows, next_cursor=page.next_cursor))


@op("GET", f"{BASE}/tasks/<task_id>", 200, models.TaskAnswer, 404)
def get_task(task_id: str) -> Response[Any]:
    return json_answer(_task_answer(svc().graph.get_task(actor(), task_id)))


@op("GET", f"{BASE}/tasks/<task_id>/activity", 200, models.Activity, 404)
def task_activity(
    task_id: str,
    limit: Annotated[int, Query(ge=1, le=ACTIVITY_PAGE)] = ACTIVITY_PAGE,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response[Any]:
    page = svc().filing.activity(actor(), task_id, limit, cursor)
    events = [views.event_view(ev) for ev in page.events]
    return json_answer(models.Activity(events=events, next_cursor=page.next_cursor))
