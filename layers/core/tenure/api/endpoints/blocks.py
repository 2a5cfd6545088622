"""Typed blocks and recover: place, list, clear, and recover an escalated task."""

from __future__ import annotations

from typing import Annotated, Any, cast

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, lease_out, op, svc


@op("POST", f"{BASE}/tasks/<task_id>/blocks", 201, models.BlockAnswer, 404, 409, 422)
def block_task(task_id: str, body: Annotated[models.BlockBody, Body()]) -> Response[Any]:
    if isinstance(body, models.EventBlockCreate):
        block = svc().event_waits.place(actor(), task_id, body.event, body.key, body.reason)
    else:
        block = svc().blocks.block_task(
            actor(), task_id, body.kind, body.reason, body.expires_in_seconds
        )
    return json_answer(models.BlockAnswer(block=_shown(block)), 201)


@op("GET", f"{BASE}/tasks/<task_id>/blocks", 200, models.BlocksAnswer, 404)
def list_blocks(task_id: str, all: Annotated[bool, Query()] = False) -> Response[Any]:
    blocks = svc().blocks.list_blocks(actor(), task_id, all)
    return json_answer(models.BlocksAnswer(blocks=[_shown(b) for b in blocks], next_cursor=None))


@op("POST", f"{BASE}/tasks/<task_id>/blocks/<block_id>/clear", 200, models.BlockAnswer, 404, 409)
def clear_block(
    task_id: str, block_id: str, body: Annotated[models.BlockClear, Body()]
) -> Response[Any]:
    cleared = svc().blocks.clear_block(actor(), task_id, block_id, body.note)
    return json_answer(models.BlockAnswer(block=_shown(cleared)))


@op("POST", f"{BASE}/tasks/<task_id>/recover", 200, models.TaskAnswer, 404, 409)
def recover_task(task_id: str, body: Annotated[models.TaskRecover, Body()]) -> Response[Any]:
    seen = svc().breaker.recover_task(actor(), task_id, body.note)
    return json_answer(
        models.TaskAnswer(
            task=views.task_view(seen.task, seen.status, seen),
            lease=lease_out(seen.lease) if seen.lease else None,
        )
    )


def _shown(block: dict[str, Any]) -> models.BlockOut:
    """A block as the service renders it (app/autonomy/blocks.py): the shape BlockOut names, open
    for the fields of its kind (an event block's event and key)."""
    return cast(models.BlockOut, block)
