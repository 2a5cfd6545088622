"""Spaces, workflows, the instance and tokens: their bodies and answers."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    model_validator,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    Integral,
    Name,
    Positive,
    Slug,
    SpaceKey,
    Stamp,
    Strict,
    Text,
    Title,
    answer,
)


class SpaceCreate(Strict):
    key: SpaceKey
    name: Title
    max_active: Positive | None = None


class WorkflowCreate(Strict):
    space: SpaceKey
    slug: Slug
    name: Title
    description: Text | None = None


class InstancePatch(Strict):
    """Only the fields sent change; a null max_active is unlimited, other nulls the default."""

    max_active: Positive | None = None
    # The breaker: the block that brings its kind's count on a task to this escalates the
    # task to needs_attention; 0 turns it off.
    block_recurrence_limit: Annotated[int, Field(ge=0, le=100), Integral] | None = None
    allow_agent_force: bool | None = None
    retry_chain_cap: Annotated[int, Field(ge=1, le=100), Integral] | None = None
    # How long an event is kept to clear blocks placed after it arrived: up to 30 days.
    event_ttl_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None


class TokenCreate(Strict):
    name: Name
    kind: Literal["operator", "worker"]
    role: Literal["read", "member", "admin"] | None = None
    spaces: Annotated[list[SpaceKey], Field(min_length=1, max_length=100)] | None = None
    pools: Annotated[list[Name], Field(min_length=1, max_length=100)] | None = None
    # At most ten years; none: the token lasts until it is revoked.
    expires_in_seconds: Annotated[int, Field(ge=1, le=10 * 366 * 24 * 3600), Integral] | None = None

    @model_validator(mode="after")
    def _fits_kind(self) -> Self:
        if self.kind == "worker" and (self.role is not None or self.spaces is not None):
            raise ValueError("role and spaces are for operator tokens; a worker token has pools")
        if self.kind == "operator" and self.pools is not None:
            raise ValueError("pools are for worker tokens; an operator token has spaces")
        return self


@answer
class SpaceOut(TypedDict):
    key: str
    name: str
    max_active: int | None
    archived: bool
    created_at: Stamp


@answer
class SpaceList(TypedDict):
    spaces: list[SpaceOut]  # by key
    next_cursor: str | None  # null on the last page


@answer
class WorkflowOut(TypedDict):
    space: str
    slug: str
    name: str
    description: str | None
    created_at: Stamp


@answer
class SpaceAnswer(TypedDict):
    space: SpaceOut


@answer
class InstanceOut(TypedDict):
    max_active: int | None
    block_recurrence_limit: int
    allow_agent_force: bool
    retry_chain_cap: int
    event_ttl_seconds: int
    active: int


TokenKind = Literal["operator", "worker"]
Role = Literal["read", "member", "admin"]


@answer
class TokenOut(TypedDict):
    """The token itself is shown here once, and never again."""

    id: str
    name: str
    kind: TokenKind
    role: Role | None
    spaces: list[str] | None
    pools: list[str] | None
    created_at: Stamp
    expires_at: Stamp
    token: str


@answer
class TokenInfo(TypedDict):
    """A token as the list shows it: never the token, never its hash."""

    id: str
    name: str
    kind: TokenKind
    role: Role | None
    spaces: list[str] | None
    pools: list[str] | None
    created_at: Stamp
    expires_at: Stamp
    last_used_at: Stamp  # may lag by up to a minute
    revoked_at: Stamp


@answer
class TokenList(TypedDict):
    tokens: list[TokenInfo]
    next_cursor: str | None  # null on the last page
