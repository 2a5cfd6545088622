"""A lease's logs and attachments: their bodies and answers."""

# No `from __future__ import annotations` here, as in fields.py.
from typing import Annotated, Any, Literal, NotRequired, Self

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

from tenure.api.models.fields import (
    Integral,
    Stamp,
    Strict,
    answer,
    parse_time,
)

Container = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


Stream = Literal["stdout", "stderr"]
MAX_LOG_EVENTS = 1000


MAX_LOG_BYTES = 256 * 1024


# Each container is a log stream: one batch makes at most this many (app/artifacts/logs.py).
MAX_BATCH_CONTAINERS = 8


class LogEventIn(Strict):
    # ISO 8601 (as the logs read back) or epoch milliseconds; absent: when it arrived.
    timestamp: str | Annotated[int, Field(ge=0, le=10**14), Integral] | None = None
    container: Container = "main"
    stream: Literal["stdout", "stderr"]
    message: Annotated[str, StringConstraints(max_length=MAX_LOG_BYTES)]

    @field_validator("timestamp")
    @classmethod
    def _as_ms(cls, value: Any) -> Any:
        if isinstance(value, str):
            ms = parse_time(value)
            if ms is None:
                raise ValueError("is not an ISO 8601 time (or epoch milliseconds)")
            return ms
        return value


class LogBatch(Strict):
    events: Annotated[list[LogEventIn], Field(min_length=1, max_length=MAX_LOG_EVENTS)]

    @model_validator(mode="after")
    def _bounded_bytes(self) -> Self:
        size = sum(len(e.message.encode()) for e in self.events)
        if size > MAX_LOG_BYTES:
            raise ValueError(
                f"events: the messages hold {size} bytes, more than the {MAX_LOG_BYTES} "
                "(256 KB) one batch may carry"
            )
        containers = {e.container for e in self.events}
        if len(containers) > MAX_BATCH_CONTAINERS:
            raise ValueError(
                f"events: name {len(containers)} containers; one batch may name at most "
                f"{MAX_BATCH_CONTAINERS}"
            )
        return self


class AttachmentCreate(Strict):
    filename: Annotated[
        str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f/\\]+$")
    ]
    # ASCII alone (it is served back as a header): `\w` would take every alphabet's letters.
    content_type: Annotated[
        str,
        StringConstraints(
            max_length=255,
            pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*/[A-Za-z0-9_.+-]+(;[ A-Za-z0-9_.+=\"-]*)*$",
        ),
    ]
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$")] = "file"
    byte_size: Annotated[int, Field(ge=0), Integral] | None = None
    # Small files inline (at most 1 MiB once decoded); leave out for an upload URL.
    content_base64: str | None = None


@answer
class LogEventOut(TypedDict):
    timestamp: Stamp
    container: str
    stream: Stream
    message: str


@answer
class Logs(TypedDict):
    events: list[LogEventOut]
    truncated: bool
    next_cursor: str | None


@answer
class LogsAccepted(TypedDict):
    accepted: int


@answer
class AttachmentOut(TypedDict):
    id: str
    kind: str
    filename: str
    content_type: str
    byte_size: int
    created_at: Stamp


@answer
class UploadOut(TypedDict):
    """A presigned S3 PUT: send exactly `headers` and the declared bytes, within 15 minutes."""

    url: str
    method: Literal["PUT"]
    headers: dict[str, str]


@answer
class AttachmentAnswer(TypedDict):
    attachment: AttachmentOut
    upload: NotRequired[
        Annotated[UploadOut | None, Field(default=None)]
    ]  # absent when the bytes came inline


@answer
class Attachments(TypedDict):
    attachments: list[AttachmentOut]
    next_cursor: NotRequired[
        Annotated[None, Field(default=None)]
    ]  # always null: a lease's attachments are capped
