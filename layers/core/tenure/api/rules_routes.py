"""Routes of rules, events and the workflow and space subjects they mint leases for (DESIGN
§10), included into the one resolver of api/app.py."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import AwareDatetime, Field, StringConstraints, field_validator

from tenure import wiring
from tenure.api import views as v
from tenure.api.models import SpaceKey, Strict, _bounded
from tenure.api.routes import BASE
from tenure.core import errors as e
from tenure.core.model import Principal
from tenure.core.rule import Rule
from tenure.core.service import LeaseService

Topic = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
# Included by api/app.py (`app.include_router`), so these routes share its error table and
# the authorizer's verdict; the module needs nothing else from app.py.
router = APIGatewayHttpRouter()

# Who may call each route (DESIGN §10), in the shape of the API's route table; the service
# checks the same roles and the caller's spaces again (core/rules_ops.py).
RULE_ROUTES: dict[tuple[str, str], str] = {
    ("POST", f"{BASE}/rules"): "operator:admin",
    ("GET", f"{BASE}/rules"): "operator:read",
    ("GET", f"{BASE}/rules/<rule_id>"): "operator:read",
    ("PATCH", f"{BASE}/rules/<rule_id>"): "operator:admin",
    ("DELETE", f"{BASE}/rules/<rule_id>"): "operator:admin",
    ("POST", f"{BASE}/rules/<rule_id>/fire"): "operator:member",
    ("POST", f"{BASE}/events"): "operator:member",
    ("GET", f"{BASE}/workflows/<slug>/activity"): "operator:read",
    ("GET", f"{BASE}/spaces/<key>/activity"): "operator:read",
}
# The query parameters each GET route takes.
RULE_QUERY: dict[tuple[str, str], set[str]] = {
    ("GET", f"{BASE}/rules"): {"space"},
    ("GET", f"{BASE}/workflows/<slug>/activity"): {"space", "limit"},
    ("GET", f"{BASE}/spaces/<key>/activity"): {"limit"},
}


def _svc() -> LeaseService:
    return wiring.service()


def _actor() -> Principal:
    """The caller as the authorizer described it (functions/authorizer)."""
    ctx = router.current_event.request_context.authorizer.get_lambda
    raw = ctx.get("principal")
    if not raw:
        raise e.Unauthenticated(str(ctx.get("reason") or "a bearer token is required"))
    data = json.loads(raw)
    for key in ("spaces", "pools"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    return Principal(**data)


def _json(body: Any, status: int = 200) -> Response[Any]:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
    )


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
    rule = _svc().create_rule(
        _actor(), body.space, body.name, body.pool, body.subject, body.trigger, body.enabled
    )
    return _json({"rule": rule_view(rule)}, 201)


@router.get(f"{BASE}/rules")
def list_rules(space: Annotated[str | None, Query(max_length=64)] = None) -> Response[Any]:
    actor = _actor()
    if not space:
        raise e.MissingScope("space is required: list the rules of one space")
    return _json({"rules": [rule_view(rule) for rule in _svc().list_rules(actor, space)]})


@router.get(f"{BASE}/rules/<rule_id>")
def get_rule(rule_id: str) -> Response[Any]:
    return _json({"rule": rule_view(_svc().get_rule(_actor(), rule_id))})


@router.patch(f"{BASE}/rules/<rule_id>")
def update_rule(rule_id: str, body: Annotated[RulePatch, Body()]) -> Response[Any]:
    changes = body.model_dump(exclude_unset=True)
    nulls = sorted(name for name, value in changes.items() if value is None)
    if nulls:
        raise e.ValidationFailed(f"{nulls[0]}: cannot be null")
    rule = _svc().update_rule(_actor(), rule_id, changes)
    return _json({"rule": rule_view(rule)})


@router.delete(f"{BASE}/rules/<rule_id>")
def delete_rule(rule_id: str) -> Response[Any]:
    _svc().delete_rule(_actor(), rule_id)
    return Response(status_code=204, content_type=None, body=None)


@router.post(f"{BASE}/rules/<rule_id>/fire")
def fire_rule(rule_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().fire_rule(_actor(), rule_id))}, 201)


@router.post(f"{BASE}/events")
def post_event(body: Annotated[EventPost, Body()]) -> Response[Any]:
    occurred = _ms(body.occurred_at) if body.occurred_at else None
    leases = _svc().post_event(_actor(), body.space, body.topic, body.data, occurred, body.event_id)
    return _json({"leases": [v.lease_view(lease) for lease in leases]}, 202)


# --------------------------------------------------------- workflow and space subjects


@router.get(f"{BASE}/workflows/<slug>/activity")
def workflow_activity(
    slug: str,
    space: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response[Any]:
    actor = _actor()
    if not space:
        raise e.MissingScope("space is required: a workflow's slug is unique within its space")
    events = _svc().workflow_activity(actor, space, slug, limit)
    return _json({"events": [v.event_view(ev) for ev in events]})


@router.get(f"{BASE}/spaces/<key>/activity")
def space_activity(key: str, limit: Annotated[int, Query(ge=1, le=500)] = 100) -> Response[Any]:
    events = _svc().space_activity(_actor(), key, limit)
    return _json({"events": [v.event_view(ev) for ev in events]})


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
