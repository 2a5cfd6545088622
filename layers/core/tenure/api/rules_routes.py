"""Routes of rules, events and the workflow and space subjects they mint leases for (DESIGN
§10), included into the one resolver of api/app.py."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import AwareDatetime, Field, StringConstraints, field_validator

from tenure.api import app as api
from tenure.api import views as v
from tenure.api.models import SpaceKey, Strict, _bounded
from tenure.api.routes import BASE
from tenure.core import errors as e
from tenure.core.rule import Rule

Topic = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
# Included by api/app.py (`app.include_router`), so these routes share its errors and auth.
router = APIGatewayHttpRouter()

EventId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class RuleCreate(Strict):
    """`subject` and `trigger` are checked field by field by the service (core/rule.py), so a
    failure names the very field (`trigger.schedule`, `trigger.match.from`, …)."""

    space: SpaceKey
    name: str
    pool: str
    subject: dict[str, Any]
    trigger: dict[str, Any]
    enabled: bool = True


class RulePatch(Strict):
    name: str | None = None
    pool: str | None = None
    subject: dict[str, Any] | None = None
    trigger: dict[str, Any] | None = None
    enabled: bool | None = None


class EventPost(Strict):
    space: SpaceKey
    topic: Topic
    data: dict[str, Any] = Field(default_factory=dict)
    occurred_at: AwareDatetime | None = None
    event_id: EventId | None = None

    _data = field_validator("data")(lambda value: _bounded(value, "data"))

    model_config = Strict.model_config | {"strict": False}


def rule_view(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "space": rule.space,
        "name": rule.name,
        "kind": rule.kind,
        "pool": rule.pool,
        "subject": rule.subject,
        "trigger": rule.trigger,
        "enabled": rule.enabled,
        "created_at": v.iso(rule.created_at),
        "updated_at": v.iso(rule.updated_at),
        "schedule_name": rule.schedule_name,
    }


@router.post(f"{BASE}/rules")
def create_rule(body: Annotated[RuleCreate, Body()]) -> Response[Any]:
    rule = api._svc().create_rule(
        api._actor(), body.space, body.name, body.pool, body.subject, body.trigger, body.enabled
    )
    return api._json({"rule": rule_view(rule)}, 201)


@router.get(f"{BASE}/rules")
def list_rules(space: Annotated[str | None, Query(max_length=64)] = None) -> Response[Any]:
    actor = api._actor()
    if not space:
        raise e.MissingScope("space is required: list the rules of one space")
    return api._json({"rules": [rule_view(rule) for rule in api._svc().list_rules(actor, space)]})


@router.get(f"{BASE}/rules/<rule_id>")
def get_rule(rule_id: str) -> Response[Any]:
    return api._json({"rule": rule_view(api._svc().get_rule(api._actor(), rule_id))})


@router.patch(f"{BASE}/rules/<rule_id>")
def update_rule(rule_id: str, body: Annotated[RulePatch, Body()]) -> Response[Any]:
    changes = body.model_dump(exclude_unset=True)
    nulls = sorted(name for name, value in changes.items() if value is None)
    if nulls:
        raise e.ValidationFailed(f"{nulls[0]}: cannot be null")
    rule = api._svc().update_rule(api._actor(), rule_id, changes)
    return api._json({"rule": rule_view(rule)})


@router.delete(f"{BASE}/rules/<rule_id>")
def delete_rule(rule_id: str) -> Response[Any]:
    api._svc().delete_rule(api._actor(), rule_id)
    return Response(status_code=204, content_type=None, body=None)


@router.post(f"{BASE}/rules/<rule_id>/fire")
def fire_rule(rule_id: str) -> Response[Any]:
    return api._json({"lease": v.lease_view(api._svc().fire_rule(api._actor(), rule_id))}, 201)


@router.post(f"{BASE}/events")
def post_event(body: Annotated[EventPost, Body()]) -> Response[Any]:
    occurred = _ms(body.occurred_at) if body.occurred_at else None
    leases = api._svc().post_event(
        api._actor(), body.space, body.topic, body.data, occurred, body.event_id
    )
    return api._json({"leases": [v.lease_view(lease) for lease in leases]}, 202)


# --------------------------------------------------------- workflow and space subjects


@router.get(f"{BASE}/workflows/<slug>/activity")
def workflow_activity(
    slug: str,
    space: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response[Any]:
    actor = api._actor()
    if not space:
        raise e.MissingScope("space is required: a workflow's slug is unique within its space")
    events = api._svc().workflow_activity(actor, space, slug, limit)
    return api._json({"events": [v.event_view(ev) for ev in events]})


@router.get(f"{BASE}/spaces/<key>/activity")
def space_activity(key: str, limit: Annotated[int, Query(ge=1, le=500)] = 100) -> Response[Any]:
    events = api._svc().space_activity(api._actor(), key, limit)
    return api._json({"events": [v.event_view(ev) for ev in events]})


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
