"""Request bodies: the schema every route validates against and the OpenAPI document shows."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from tenure.core.model import MAX_LEASE_SECONDS, MIN_LEASE_SECONDS

SpaceKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")]
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]
WorkerId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]
Title = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(max_length=65536)]
ReportId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
LeaseSeconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
Seconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS)]

# A JSON document a caller may attach (details, result, properties…) stays well inside an item.
MAX_DOCUMENT_BYTES = 32 * 1024


def _bounded(value: Any, field: str) -> Any:
    if value is None:
        return value
    if len(json.dumps(value)) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"is larger than {MAX_DOCUMENT_BYTES} bytes of JSON")
    _storable_numbers(value, field)
    return value


def _storable_numbers(value: Any, field: str) -> None:
    """DynamoDB keeps numbers to 38 digits and has no NaN or infinity: refuse them here."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"holds a number that is not finite ({field})")
    if isinstance(value, int | float) and value != 0 and not 1e-129 < abs(value) < 1e125:
        raise ValueError(f"holds a number out of the storable range ({field})")
    if isinstance(value, int) and len(str(abs(value))) > 38:
        raise ValueError(f"holds a number with more than 38 digits ({field})")
    if isinstance(value, dict):
        for item in value.values():
            _storable_numbers(item, field)
    elif isinstance(value, list):
        for item in value:
            _storable_numbers(item, field)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class SpaceCreate(Strict):
    key: SpaceKey
    name: Title
    max_active: Annotated[int, Field(ge=1)] | None = None


class WorkflowCreate(Strict):
    space: SpaceKey
    slug: Slug
    name: Title
    description: Text | None = None


class PoolCreate(Strict):
    name: Name
    space: SpaceKey
    kind: Literal["agent", "classifier", "command"]
    max_active: Annotated[int, Field(ge=1)] | None = None
    renew_seconds: Seconds = 10
    grace_seconds: Seconds = 50
    toleration_seconds: Seconds = 300
    on_expiry: Literal["requeue", "fail"] = "requeue"
    keeps_logs: bool = False

    @model_validator(mode="after")
    def _timings_ordered(self) -> PoolCreate:
        if self.grace_seconds < self.renew_seconds:
            raise ValueError("grace_seconds must be at least renew_seconds")
        if self.toleration_seconds < self.grace_seconds:
            raise ValueError("toleration_seconds must be at least grace_seconds")
        return self


class TokenCreate(Strict):
    name: Name
    kind: Literal["operator", "worker"]
    role: Literal["read", "member", "admin"] | None = None
    spaces: Annotated[list[SpaceKey], Field(min_length=1, max_length=100)] | None = None
    pools: Annotated[list[Name], Field(min_length=1, max_length=100)] | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> TokenCreate:
        if self.kind == "worker" and (self.role is not None or self.spaces is not None):
            raise ValueError("role and spaces are for operator tokens; a worker token has pools")
        if self.kind == "operator" and self.pools is not None:
            raise ValueError("pools are for worker tokens; an operator token has spaces")
        return self


def _instant(value: str | None) -> str | None:
    """An ISO-8601 time with its offset (`Z` or `+hh:mm`), as `not_before` takes it."""
    if value is None:
        return value
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO-8601 time such as 2026-12-01T09:00:00Z") from None
    if parsed.tzinfo is None:
        raise ValueError("must carry its offset (Z or +hh:mm)")
    return value


def instant_ms(value: str) -> int:
    return int(datetime.fromisoformat(value).timestamp() * 1000)


class TaskCreate(Strict):
    space: SpaceKey
    title: Title
    workflow: Slug | None = None
    body: Text | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
    pool: Name | None = None
    max_attempts: Annotated[int, Field(ge=1, le=100)] | None = None
    # Deferred (DESIGN §10): the lease is pending and not claimable before this instant.
    not_before: Annotated[str, StringConstraints(max_length=64)] | None = None

    _properties = field_validator("properties")(lambda v: _bounded(v, "properties"))
    _not_before = field_validator("not_before")(_instant)


class Enqueue(Strict):
    pool: Name
    not_before: Annotated[str, StringConstraints(max_length=64)] | None = None

    _not_before = field_validator("not_before")(_instant)


class Claim(Strict):
    worker_id: WorkerId
    worker_version: Annotated[str, StringConstraints(max_length=128)] | None = None
    wait_seconds: Annotated[float, Field(ge=0, le=20)] = 0
    lease_seconds: LeaseSeconds | None = None

    model_config = ConfigDict(extra="forbid", strict=False)


class Heartbeat(Strict):
    lease_seconds: LeaseSeconds | None = None


class LeaseFence(Strict):
    id: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    fence: Annotated[int, Field(ge=1)]


class WorkerHeartbeat(Strict):
    leases: Annotated[list[LeaseFence], Field(max_length=100)]


class Complete(Strict):
    outcome: Literal["success", "failure"] = "success"
    details: dict[str, Any] | None = None
    result: Any = None
    usage: dict[str, Any] | None = None
    created_task_ids: Annotated[list[str], Field(max_length=100)] | None = None
    report_id: ReportId | None = None
    fence: Annotated[int, Field(ge=1)] | None = None

    _docs = field_validator("details", "result", "usage")(
        lambda v, info: _bounded(v, info.field_name)
    )


class Fail(Strict):
    error: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    metadata: dict[str, Any] | None = None
    report_id: ReportId | None = None
    fence: Annotated[int, Field(ge=1)] | None = None

    _docs = field_validator("metadata")(lambda v: _bounded(v, "metadata"))


class Release(Strict):
    reason: Annotated[str, StringConstraints(max_length=500)] | None = None
    report_id: ReportId | None = None
    fence: Annotated[int, Field(ge=1)] | None = None
