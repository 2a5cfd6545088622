"""Typed blocks, the events they wait for, and recovery."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal, NotRequired, Self

from pydantic import (
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    Integral,
    SpaceKey,
    Stamp,
    Strict,
    answer,
    open_answer,
)


class BlockCreate(Strict):
    kind: Literal["transient", "dependency_external", "needs_input", "error", "event"]
    # Required but for an `event` block, whose reason says what it waits for by default.
    reason: str | None = Field(default=None, min_length=1, max_length=2000)
    expires_in_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None
    # An `event` block waits for this event name and key (each 1-128 characters).
    event: str | None = Field(default=None, min_length=1, max_length=128)
    key: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _kind_fields(self) -> Self:
        if self.kind == "event":
            if self.event is None or self.key is None:
                raise ValueError("an event block names its event and key")
            if self.expires_in_seconds is not None:
                raise ValueError("expires_in_seconds: only a transient block expires")
        elif self.event is not None or self.key is not None:
            raise ValueError("event and key: only an event block waits for an event")
        elif self.reason is None:
            raise ValueError("reason: required")
        return self


class TypedBlockCreate(Strict):
    """`POST /tasks/{id}/blocks` for a typed block: why, in words."""

    kind: Literal["transient", "dependency_external", "needs_input", "error"]
    reason: str = Field(min_length=1, max_length=2000)
    expires_in_seconds: Annotated[int, Field(ge=1, le=2_592_000), Integral] | None = None


class EventBlockCreate(Strict):
    """`POST /tasks/{id}/blocks` for a block that waits for an event's name and key."""

    kind: Literal["event"]
    event: str = Field(min_length=1, max_length=128)
    key: str = Field(min_length=1, max_length=128)
    reason: str | None = Field(default=None, min_length=1, max_length=2000)


def _block_kind(body: Any) -> str:
    return (
        "event_block" if isinstance(body, dict) and body.get("kind") == "event" else "typed_block"
    )


# The route's body: one shape per kind, so the document says exactly what each requires.
BlockBody = Annotated[
    Annotated[TypedBlockCreate, Tag("typed_block")]
    | Annotated[EventBlockCreate, Tag("event_block")],
    Discriminator(_block_kind),
]


class EventSignal(Strict):
    """`POST /events` with `name`: the event blocks of `kind: "event"` wait for."""

    space: SpaceKey
    name: str = Field(min_length=1, max_length=128)
    key: str = Field(min_length=1, max_length=128)
    data: Any = None  # any JSON, at most 65,536 bytes

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, body: Any) -> Any:
        if isinstance(body, dict) and "topic" in body and "name" in body:
            raise ValueError(
                "send topic (an event for rules) or name (an event blocks wait for), not both"
            )
        return body


@answer
class SignalAnswer(TypedDict):
    cleared: int  # the blocks this request cleared


class BlockClear(Strict):
    note: str | None = Field(default=None, max_length=2000)


class TaskRecover(Strict):
    # Required, where a clear's note is optional: why it is safe to go on now.
    note: str = Field(min_length=1, max_length=2000)


@open_answer
class BlockOut(TypedDict):
    id: str
    task_id: str
    kind: str
    reason: str
    state: Literal["open", "cleared", "expired"]
    created_at: str  # ISO 8601, as every time the API shows
    placed_by: "PlacedBy"
    expires_at: NotRequired[Annotated[Stamp, Field(default=None)]]
    closed_at: NotRequired[Annotated[Stamp, Field(default=None)]]
    closed_by: NotRequired[Annotated[str | None, Field(default=None)]]


@answer
class PlacedBy(TypedDict):
    """Who placed a block: an operator (its token id) or a lease (its id)."""

    kind: Literal["operator", "lease"]
    id: str


@answer
class BlockAnswer(TypedDict):
    block: BlockOut


@answer
class BlocksAnswer(TypedDict):
    blocks: list[BlockOut]
    next_cursor: NotRequired[
        Annotated[None, Field(default=None)]
    ]  # always null: a task's blocks live on its one row
