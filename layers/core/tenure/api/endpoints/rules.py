"""Rules, events, and the workflow and space subjects they mint leases for."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from pydantic import (
    AwareDatetime,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    field_validator,
)
from typing_extensions import TypedDict

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, lease_out, leases_out, op, svc
from tenure.domain import errors
from tenure.domain.model import Task
from tenure.domain.rules.addresses import Address
from tenure.domain.rules.occasions import MAX_CATCHUP_WINDOW_SECONDS
from tenure.domain.rules.rule import MAX_RULES_PER_SPACE, Rule

Topic = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
EventId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Overlap = Literal["skip", "allow", "cancel_previous"]
CatchupWindow = Annotated[int, Field(ge=0, le=MAX_CATCHUP_WINDOW_SECONDS), models.Integral]


class RuleCreate(models.Strict):
    """`subject` and `trigger` are checked field by field by the service (domain/rules/rule.py),
    so a failure names the very field (`trigger.schedule`, `trigger.match.from`, …)."""

    space: models.SpaceKey
    name: str
    pool: str
    subject: dict[str, Any]
    trigger: dict[str, Any]
    enabled: bool = True
    accept_spam: bool = False
    max_firings_per_hour: int | None = None
    # A scheduled rule's only (422 on an inbound rule); left out: skip and 0.
    overlap: Overlap | None = None
    catchup_window_seconds: CatchupWindow | None = None


class RulePatch(models.Strict):
    name: str | None = None
    pool: str | None = None
    subject: dict[str, Any] | None = None
    trigger: dict[str, Any] | None = None
    enabled: bool | None = None
    accept_spam: bool | None = None
    max_firings_per_hour: int | None = None  # null: no limit any more
    overlap: Overlap | None = None
    catchup_window_seconds: CatchupWindow | None = None


class AddressCreate(models.Strict):
    address: Annotated[str, StringConstraints(min_length=3, max_length=254)]


@models.answer
class AddressOut(TypedDict):
    address: str
    space: str
    created_at: models.Stamp


@models.answer
class AddressList(TypedDict):
    addresses: list[AddressOut]
    # always null: a space has at most MAX_ADDRESSES_PER_SPACE
    next_cursor: NotRequired[Annotated[None, Field(default=None)]]


class EventPost(models.Strict):
    model_config = ConfigDict(extra="forbid", strict=False)

    space: models.SpaceKey
    topic: Topic
    data: dict[str, Any]  # required: `{}` when the event carries nothing
    occurred_at: AwareDatetime | None = None
    event_id: EventId | None = None

    _data = field_validator("data")(lambda value: models._bounded(value, "data"))

    @field_validator("occurred_at")
    @classmethod
    def _kept(cls, value: datetime | None) -> datetime | None:
        if value is not None:
            models.aware_ms(value)
        return value


@models.answer
class RuleOut(TypedDict):
    id: str
    space: str
    name: str
    kind: str
    pool: str
    subject: dict[str, Any]
    trigger: dict[str, Any]
    enabled: bool
    created_at: models.Stamp
    updated_at: models.Stamp
    schedule_name: str | None
    accept_spam: bool
    max_firings_per_hour: int | None
    # A scheduled rule's overlap and catch-up window; null on an inbound rule.
    overlap: str | None
    catchup_window_seconds: int | None


@models.answer
class RuleAnswer(TypedDict):
    rule: RuleOut


@models.answer
class RuleList(TypedDict):
    rules: list[RuleOut]
    # null unless the page was cut: by `limit`, or before its rules weighed past what one
    # answer carries
    next_cursor: str | None


@models.answer
class FireAnswer(TypedDict):
    """The lease minted; for a task subject that requires approval, no lease (null) and the
    task, waiting for approval."""

    lease: models.LeaseOut | None
    task: NotRequired[Annotated[models.TaskOut | None, Field(default=None)]]


def _event_kind(body: Any) -> str:
    """Which event a body is: one with `name` is an event blocks wait for; any other is an
    event for rules (so its errors name its own fields)."""
    return "signal" if isinstance(body, dict) and "name" in body else "rule_event"


EventBody = Annotated[
    Annotated[EventPost, Tag("rule_event")] | Annotated[models.EventSignal, Tag("signal")],
    Discriminator(_event_kind),
]


@models.answer
class EventAnswer(TypedDict):
    leases: list[models.LeaseOut]


def rule_view(rule: Rule) -> RuleOut:
    scheduled = rule.kind == "scheduled"
    return {
        "id": rule.id,
        "space": rule.space,
        "name": rule.name,
        "kind": rule.kind,
        "pool": rule.pool,
        "subject": rule.subject,
        "trigger": rule.trigger,
        "enabled": rule.enabled,
        "created_at": views.iso(rule.created_at),
        "updated_at": views.iso(rule.updated_at),
        "schedule_name": rule.schedule_name,
        "accept_spam": rule.spam_accepted,
        "max_firings_per_hour": rule.hourly_cap,
        "overlap": rule.overlap_mode if scheduled else None,
        "catchup_window_seconds": rule.catchup_window if scheduled else None,
    }


def address_view(address: Address) -> AddressOut:
    return {
        "address": address.address,
        "space": address.space,
        "created_at": views.iso(address.created_at),
    }


@op("POST", f"{BASE}/rules", 201, RuleAnswer, 404, 409, 422)
def create_rule(body: Annotated[RuleCreate, Body()]) -> Response[Any]:
    rule = svc().rules.create_rule(
        actor(),
        body.space,
        body.name,
        body.pool,
        body.subject,
        body.trigger,
        body.enabled,
        body.accept_spam,
        body.max_firings_per_hour,
        body.overlap,
        body.catchup_window_seconds,
    )
    return json_answer(RuleAnswer(rule=rule_view(rule)), 201)


@op("GET", f"{BASE}/rules", 200, RuleList, 422)
def list_rules(
    space: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RULES_PER_SPACE)] = MAX_RULES_PER_SPACE,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space is required: list the rules of one space")
    page = svc().rules.list_rules(caller, space, limit, cursor)
    rules = [rule_view(x) for x in page.rules]
    return json_answer(RuleList(rules=rules, next_cursor=page.next_cursor))


@op("GET", f"{BASE}/rules/<rule_id>", 200, RuleAnswer, 404)
def get_rule(rule_id: str) -> Response[Any]:
    return json_answer(RuleAnswer(rule=rule_view(svc().rules.get_rule(actor(), rule_id))))


@op("PATCH", f"{BASE}/rules/<rule_id>", 200, RuleAnswer, 404, 409, 422)
def update_rule(rule_id: str, body: Annotated[RulePatch, Body()]) -> Response[Any]:
    changes = body.model_dump(exclude_unset=True)
    nulls = sorted(
        name for name, value in changes.items() if value is None and name != "max_firings_per_hour"
    )
    if nulls:
        raise errors.ValidationFailed(f"{nulls[0]}: cannot be null")
    updated = svc().rules.update_rule(actor(), rule_id, changes)
    return json_answer(RuleAnswer(rule=rule_view(updated)))


@op("DELETE", f"{BASE}/rules/<rule_id>", 204, None, 404)
def delete_rule(rule_id: str) -> Response[Any]:
    svc().rules.delete_rule(actor(), rule_id)
    return Response(status_code=204, content_type=None, body=None)


@op("POST", f"{BASE}/rules/<rule_id>/fire", 201, FireAnswer, 404)
def fire_rule(rule_id: str) -> Response[Any]:
    fired = svc().firings.fire_rule(actor(), rule_id)
    if isinstance(fired, Task):
        seen = svc().graph.describe_filed(fired, None)
        return json_answer(
            FireAnswer(lease=None, task=views.task_view(fired, seen.status, seen)), 201
        )
    return json_answer(FireAnswer(lease=lease_out(fired)), 201)


@op("POST", f"{BASE}/events", 202, EventAnswer, 404, 422, also={200: models.SignalAnswer})
def post_event(body: Annotated[EventBody, Body()]) -> Response[Any]:
    if isinstance(body, models.EventSignal):  # an event blocks wait for (app/flow/events.py)
        cleared = svc().event_waits.send(actor(), body.space, body.name, body.key, body.data)
        return json_answer(models.SignalAnswer(cleared=cleared), 200)
    occurred = _ms(body.occurred_at) if body.occurred_at else None
    leases = svc().firings.post_event(
        actor(), body.space, body.topic, body.data, occurred, body.event_id
    )
    return json_answer(EventAnswer(leases=leases_out(leases)), 202)


@op("GET", f"{BASE}/workflows/<slug>/activity", 200, models.Activity, 404)
def workflow_activity(
    slug: str,
    space: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space is required: a workflow's slug is unique within its space")
    events = svc().subjects.workflow_activity(caller, space, slug, limit)
    return json_answer(
        models.Activity(events=[views.event_view(ev) for ev in events], next_cursor=None)
    )


@op("GET", f"{BASE}/spaces/<key>/activity", 200, models.Activity, 404)
def space_activity(key: str, limit: Annotated[int, Query(ge=1, le=500)] = 100) -> Response[Any]:
    events = svc().subjects.space_activity(actor(), key, limit)
    return json_answer(
        models.Activity(events=[views.event_view(ev) for ev in events], next_cursor=None)
    )


@op("POST", f"{BASE}/spaces/<key>/addresses", 201, AddressOut, 404, 409, 422)
def add_address(key: str, body: Annotated[AddressCreate, Body()]) -> Response[Any]:
    address = svc().addresses.add_address(actor(), key, body.address)
    return json_answer(address_view(address), 201)


@op("GET", f"{BASE}/spaces/<key>/addresses", 200, AddressList, 404)
def list_addresses(key: str) -> Response[Any]:
    found = svc().addresses.list_addresses(actor(), key)
    shown = [address_view(a) for a in found]
    return json_answer(AddressList(addresses=shown, next_cursor=None))


@op("DELETE", f"{BASE}/spaces/<key>/addresses/<address>", 204, None, 404)
def delete_address(key: str, address: str) -> Response[Any]:
    svc().addresses.remove_address(actor(), key, unquote(address))
    return Response(status_code=204, content_type=None, body=None)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
