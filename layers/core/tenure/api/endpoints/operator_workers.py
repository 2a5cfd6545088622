"""Operators' view of a pool's workers: the workers list (a worker's own routes are in
worker_routes.py)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, op, svc
from tenure.domain import errors


@op("GET", f"{BASE}/workers", 200, models.Workers, 404, 422)
def list_workers(
    pool: Annotated[str, Query(max_length=64)],
    limit: Annotated[int, Query(ge=1, le=200)] = 200,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response[Any]:
    caller = actor()
    if not pool:
        raise errors.ValidationFailed("pool: required (the workers of one pool are listed)")
    found, after = svc().workers.worker_page(caller, pool, limit, cursor)
    shown = [views.worker_view(x.worker, x.reachable, x.leases) for x in found]
    return json_answer(models.Workers(workers=shown, next_cursor=after))
