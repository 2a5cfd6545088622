"""Pools, spaces and the instance: read and change pools, pause and resume them,
archive and unarchive spaces, the instance settings."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, op, svc
from tenure.domain import errors
from tenure.domain.model import Pool
from tenure.domain.states import OnExpiry


def _pool_out(pool: Pool) -> models.PoolOut:
    return views.pool_view(pool, svc().pools.held(pool))


@op("GET", f"{BASE}/pools", 200, models.Pools, 404, 422)
def list_pools(space: Annotated[str, Query(max_length=32)] = "") -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space: required (the pools of one space are listed)")
    pools = svc().pools.list_pools_of(caller, space)
    return json_answer(models.Pools(pools=[_pool_out(p) for p in pools], next_cursor=None))


@op("GET", f"{BASE}/pools/<pool>", 200, models.PoolAnswer, 404)
def get_pool(pool: str) -> Response[Any]:
    return json_answer(models.PoolAnswer(pool=_pool_out(svc().pools.get_pool(actor(), pool))))


@op("PATCH", f"{BASE}/pools/<pool>", 200, models.PoolAnswer, 404, 422)
def update_pool(pool: str, body: Annotated[models.PoolPatch, Body()]) -> Response[Any]:
    changes = body.model_dump(exclude_unset=True)
    if changes.get("on_expiry") is not None:
        changes["on_expiry"] = OnExpiry(changes["on_expiry"])
    for versioned in ("agent", "classifier"):
        if changes.get(versioned) is not None:
            # As sent: an effort left out stays out (the payload then has no effort key).
            changes[versioned] = getattr(body, versioned).model_dump(exclude_none=True)
    if changes.get("accepts_delegation_from") is not None:
        changes["accepts_delegation_from"] = tuple(changes["accepts_delegation_from"])
    if changes.get("retry") is not None:
        changes["retry"] = body.retry.model_dump() if body.retry else None
    updated = svc().pools.update_pool(actor(), pool, changes)
    return json_answer(models.PoolAnswer(pool=_pool_out(updated)))


@op("POST", f"{BASE}/pools/<pool>/pause", 200, models.PoolAnswer, 404)
def pause_pool(pool: str) -> Response[Any]:
    return json_answer(models.PoolAnswer(pool=_pool_out(svc().pools.pause_pool(actor(), pool))))


@op("POST", f"{BASE}/pools/<pool>/resume", 200, models.PoolAnswer, 404)
def resume_pool(pool: str) -> Response[Any]:
    return json_answer(models.PoolAnswer(pool=_pool_out(svc().pools.resume_pool(actor(), pool))))


@op("POST", f"{BASE}/spaces/<space>/archive", 200, models.SpaceAnswer, 404)
def archive_space(space: str) -> Response[Any]:
    return json_answer(
        models.SpaceAnswer(space=views.space_view(svc().spaces.archive_space(actor(), space)))
    )


@op("POST", f"{BASE}/spaces/<space>/unarchive", 200, models.SpaceAnswer, 404)
def unarchive_space(space: str) -> Response[Any]:
    return json_answer(
        models.SpaceAnswer(space=views.space_view(svc().spaces.unarchive_space(actor(), space)))
    )


@op("GET", f"{BASE}/instance", 200, models.InstanceOut)
def get_instance() -> Response[Any]:
    instance = svc().instance.get_instance(actor())
    return json_answer(views.instance_view(instance, svc().instance.instance_held()))


@op("PATCH", f"{BASE}/instance", 200, models.InstanceOut, 422)
def update_instance(body: Annotated[models.InstancePatch, Body()]) -> Response[Any]:
    instance = svc().instance.update_instance(actor(), body.model_dump(exclude_unset=True))
    return json_answer(views.instance_view(instance, svc().instance.instance_held()))
