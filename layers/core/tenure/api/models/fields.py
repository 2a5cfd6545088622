"""The pieces every request and answer model is made of: the field types and their bounds,
the closed bases, the error envelope, and how a time is read."""

# No `from __future__ import annotations` in this package: pydantic would then compile and
# evaluate some 360 annotation strings when the function starts (~20 ms of a cold start); a
# name defined further down is quoted instead.
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    with_config,
)
from typing_extensions import TypedDict

from tenure.domain import documents
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import (
    MAX_LEASE_SECONDS,
    MAX_PRIORITY,
    MIN_LEASE_SECONDS,
    MIN_PRIORITY,
)


def _integral(value: Any) -> Any:
    """JSON Schema counts 40.0 as an integer, so a client's encoder may send it: take it as 40.
    40.5 stays a float and is refused; strings and booleans are untouched and refused."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Every integer field carries this marker, last: a validator placed before the bounds would
# leave pydantic unable to write the bounds into the JSON Schema as minimum/maximum.
Integral = BeforeValidator(_integral)


SpaceKey = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")]


Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


Slug = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]


WorkerId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")]


def _trimmed(value: str) -> str:
    """A title less the blanks around it; all blank is no title. Trimmed after the length is
    checked, so 501 characters stay refused as the document's maxLength says, blanks or not."""
    value = value.strip()
    if not value:
        raise ValueError("must not be blank")
    return value


Title = Annotated[str, StringConstraints(min_length=1, max_length=500), AfterValidator(_trimmed)]


Text = Annotated[str, StringConstraints(max_length=65536)]


ReportId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


LeaseSeconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS), Integral]


Seconds = Annotated[int, Field(ge=1, le=MAX_LEASE_SECONDS), Integral]


# A ceiling on held leases (max_active): past a billion, no count the service keeps reaches it,
# and DynamoDB keeps no number of more than 38 digits at all.
Positive = Annotated[int, Field(ge=1, le=1_000_000_000), Integral]


# Bytes of attachments one lease may add: at least one byte, at most 1 TiB.
AttachmentQuota = Annotated[int, Field(ge=1, le=1024**4), Integral]


Attempts = Annotated[int, Field(ge=1, le=100), Integral]


# A lease's fence grows by one per handover; any larger than JSON carries exactly (2^53 - 1)
# names none, and past 38 digits the table could not even compare it.
Fence = Annotated[int, Field(ge=1, le=2**53 - 1), Integral]


ClaimId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


TaskId = Annotated[str, StringConstraints(min_length=1, max_length=128)]


Host = Annotated[str, StringConstraints(max_length=255)]


# Keyed concurrency: 1 to 128 characters, none of them a control character.
ConcurrencyKey = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$")
]


# Keyed concurrency and the rate limit: null (or left out) is unlimited.
PerKey = Annotated[int, Field(ge=1, le=10_000), Integral]


PerMinute = Annotated[int, Field(ge=1, le=1_000_000), Integral]


# Delegation's bounds (a null puts the default back): tasks one lease token may file, and
# tasks one tree of delegation may hold.
PerLease = Annotated[int, Field(ge=1, le=10_000), Integral]


PerTree = Annotated[int, Field(ge=1, le=1_000_000), Integral]


# A caller's free-form JSON document (details, result, metadata, usage…): refused unless it
# can be stored as it is (domain/documents.py), the field that holds it named in the message.
Document = AfterValidator(documents.storable)
MAX_DOCUMENT_BYTES = documents.MAX_DOCUMENT_BYTES


def _bounded(value: Any, field: str) -> Any:
    """`Document` for a validator that names its field itself (a nested one: classifier.input)."""
    wrong = documents.unstorable(value, field)
    if wrong:
        raise ValueError(wrong)
    return value


# Every model here defers building its validator to its first use (pydantic's defer_build):
# one request validates one or two of them, and building all ~90 when the function starts
# cost the API's cold start ~80 ms (`tenure bench coldstart`). Validation is the same.


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


# A run timeout: at most 30 days.
RunSeconds = Annotated[int, Field(ge=1, le=30 * 86_400), Integral]


# The instants a caller may name, in epoch ms: from the epoch to the end of 2199 in UTC. The
# service sorts a time as 13 digits of milliseconds (enough to the year 2286) and prints it
# in four-digit years, and a rule's schedule names years to 2199: one calendar for all three.
EARLIEST_MS = 0
LATEST_MS = int(datetime(2200, 1, 1, tzinfo=UTC).timestamp() * 1000)


def caller_time(value: str) -> int:
    """The epoch ms of a time a caller sends (`not_before`, a log read's `since`): ISO 8601
    with its offset (`Z` or `+hh:mm`), within EARLIEST_MS and LATEST_MS; ValueError saying
    what is wrong otherwise."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO-8601 time such as 2026-12-01T09:00:00Z") from None
    if parsed.tzinfo is None:
        raise ValueError("must carry its offset (Z or +hh:mm)")
    return aware_ms(parsed)


def aware_ms(parsed: datetime) -> int:
    """The epoch ms of a time with its offset, within EARLIEST_MS and LATEST_MS, or
    ValueError: the bound of every time a caller sends, parsed here or by pydantic."""
    try:
        ms = int(parsed.timestamp() * 1000)
    except (OverflowError, ValueError):
        ms = -1
    if not EARLIEST_MS <= ms < LATEST_MS:
        raise ValueError("must be from 1970-01-01T00:00:00Z to 2199-12-31T23:59:59Z in UTC")
    return ms


def since_ms(value: str | None) -> int | None:
    """A log read's `since` (HTTP and MCP alike) in epoch ms; None when it is not given, 422
    naming `since` when it is not a time the caller may send."""
    if not value:
        return None
    try:
        return caller_time(value)
    except ValueError as err:
        raise ValidationFailed(f"since: {err}") from None


def _instant(value: str | None) -> str | None:
    """`caller_time`'s check as a field validator, keeping the text as it was sent."""
    if value is not None:
        caller_time(value)
    return value


# The longest ttl_seconds a delegated task may ask for (a week).
MAX_TTL_SECONDS = 7 * 86_400


# Claim priority: higher first; a lease filed without one is at the default.
Priority = Annotated[int, Field(ge=MIN_PRIORITY, le=MAX_PRIORITY), Integral]


# Queue timeout: a pending lease not claimed this many seconds after it became claimable
# ends cancelled (queue_timeout). At most a year.
MAX_QUEUE_TIMEOUT_SECONDS = 366 * 86_400


ExpiresIn = Annotated[int, Field(ge=1, le=MAX_QUEUE_TIMEOUT_SECONDS), Integral]


# An answer's shape: a TypedDict that its renderer (api/views.py, or the route) returns as a
# plain dict, so mypy checks every key it writes and no answer is validated or built as a
# model on its way out; the OpenAPI document makes its schema with pydantic. Closed (no
# unknown keys), so a renderer that grows a key without its shape fails mypy and the schema
# tests instead of drifting. A key that may be left out (or was added later) is NotRequired,
# with the default the document shows.
answer = with_config(ConfigDict(extra="forbid"))
# The few answers that carry keys of their own beyond those named (the work bundle, a block).
open_answer = with_config(ConfigDict(extra="allow"))


Stamp = str | None  # an ISO 8601 UTC time with milliseconds, or null


@answer
class ErrorDetail(TypedDict):
    code: str
    message: str


@answer
class ErrorEnvelope(TypedDict):
    """Every error, whatever its status."""

    error: ErrorDetail


@answer
class Health(TypedDict):
    status: Literal["ok"]


@open_answer
class OpenAPIDocument(TypedDict):
    """This document (OpenAPI 3.1)."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]


def parse_time(text: str) -> int | None:
    """Epoch ms of an ISO 8601 time (a time without a zone is UTC), or None."""
    try:
        stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    try:
        return aware_ms(stamp)
    except ValueError:
        return None
