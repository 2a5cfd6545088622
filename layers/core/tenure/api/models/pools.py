"""Pools: their bodies (settings, agent, classifier, retry) and answers."""

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
    AttachmentQuota,
    Integral,
    Name,
    PerKey,
    PerLease,
    PerMinute,
    PerTree,
    Positive,
    RunSeconds,
    Seconds,
    SpaceKey,
    Stamp,
    Strict,
    Text,
    Title,
    _bounded,
    answer,
)
from tenure.domain.model import (
    DEFAULT_ATTACHMENT_QUOTA_BYTES,
    DEFAULT_MAX_DELEGATED_PER_LEASE,
    DEFAULT_MAX_DELEGATED_PER_TREE,
    DEFAULT_RETENTION_SECONDS,
)


class AgentSettings(Strict):
    """What an agent pool's version hands its workers."""

    model: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    effort: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None


Expressions = Annotated[
    dict[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")], Text],
    Field(max_length=100),
]


class ClassifierOutput(Strict):
    """JMESPath expressions over the classifier's reported details, by the name they set."""

    checks: Expressions | None = None
    properties: Expressions | None = None


class ClassifierSettings(Strict):
    """The input document a classifier reads verbatim, and how its answers are rendered."""

    input: dict[str, Any] = Field(default_factory=dict)
    output: ClassifierOutput = Field(default_factory=ClassifierOutput)

    _input = field_validator("input")(lambda v: _bounded(v, "classifier.input"))


class RetryBackoff(Strict):
    initial_seconds: Annotated[int, Field(ge=1, le=86_400), Integral] = 10
    multiplier: Annotated[float, Field(ge=1, le=10)] = 2
    max_seconds: Annotated[int, Field(ge=1, le=86_400), Integral] = 600
    jitter: bool = True

    @model_validator(mode="after")
    def _bounded_by_max(self) -> Self:
        if self.max_seconds < self.initial_seconds:
            raise ValueError("retry.backoff.max_seconds must be at least initial_seconds")
        return self


class RetrySettings(Strict):
    """With on_failure, a failed lease with attempts left gets its next attempt at once,
    claimable after the backoff."""

    on_failure: bool = False
    backoff: RetryBackoff = Field(default_factory=RetryBackoff)


class PoolCreate(Strict):
    name: Name
    space: SpaceKey
    kind: Literal["agent", "classifier", "command"]
    display_name: Title | None = None
    agent: AgentSettings | None = None
    classifier: ClassifierSettings | None = None
    max_active: Positive | None = None
    renew_seconds: Seconds = 10
    grace_seconds: Seconds = 50
    toleration_seconds: Seconds = 300
    on_expiry: Literal["requeue", "fail"] = "requeue"
    keeps_logs: bool = True
    retention_seconds: Annotated[int, Field(ge=1, le=10 * 365 * 86_400), Integral] = (
        DEFAULT_RETENTION_SECONDS
    )
    attachment_quota_bytes: AttachmentQuota = DEFAULT_ATTACHMENT_QUOTA_BYTES
    # Starvation: queued this long with no reachable worker, a claimable lease is starved;
    # starved this much longer, the sweeper parks its task in needs_attention.
    min_queued_age_seconds: Annotated[int, Field(ge=1, le=31_536_000), Integral] = 600
    starvation_escalation_seconds: Annotated[int, Field(ge=1, le=31_536_000), Integral] = 3600
    # Per-million-token prices: {currency, input_tokens?, output_tokens?, …}.
    rates: dict[str, Any] | None = None
    accepts_delegation_from: Annotated[list[Name], Field(max_length=50)] = Field(
        default_factory=list
    )
    # How many tasks one of this pool's lease tokens may file, and how many a tree of
    # delegation may hold when one of them files.
    max_delegated_per_lease: PerLease = DEFAULT_MAX_DELEGATED_PER_LEASE
    max_delegated_per_tree: PerTree = DEFAULT_MAX_DELEGATED_PER_TREE
    retry: RetrySettings = Field(default_factory=RetrySettings)
    # At most this many held leases per task concurrency_key; at most this many claims in a
    # UTC minute (null: unlimited).
    max_active_per_key: PerKey | None = None
    max_claims_per_minute: PerMinute | None = None
    # Run timeout: a lease held longer is asked to stop and ends timed_out (null: none).
    max_run_seconds: RunSeconds | None = None

    @model_validator(mode="after")
    def _timings_ordered(self) -> Self:
        if self.grace_seconds < self.renew_seconds:
            raise ValueError("grace_seconds must be at least renew_seconds")
        if self.toleration_seconds < self.grace_seconds:
            raise ValueError("toleration_seconds must be at least grace_seconds")
        return self


class PoolPatch(Strict):
    """Only the fields sent change; a null resets that setting to its default (max_active:
    unlimited, display_name: the pool's name, agent/classifier: none)."""

    display_name: Title | None = None
    max_active: Positive | None = None
    renew_seconds: Seconds | None = None
    grace_seconds: Seconds | None = None
    toleration_seconds: Seconds | None = None
    on_expiry: Literal["requeue", "fail"] | None = None
    keeps_logs: bool | None = None
    retention_seconds: Annotated[int, Field(ge=1, le=10 * 365 * 86_400), Integral] | None = None
    attachment_quota_bytes: AttachmentQuota | None = None
    agent: AgentSettings | None = None
    classifier: ClassifierSettings | None = None
    rates: dict[str, Any] | None = None
    accepts_delegation_from: Annotated[list[Name], Field(max_length=50)] | None = None
    max_delegated_per_lease: PerLease | None = None
    max_delegated_per_tree: PerTree | None = None
    retry: RetrySettings | None = None
    max_active_per_key: PerKey | None = None
    max_claims_per_minute: PerMinute | None = None
    max_run_seconds: RunSeconds | None = None


@answer
class PoolOut(TypedDict):
    name: str
    space: str
    kind: Literal["agent", "classifier", "command"]
    display_name: str
    version: int
    agent: dict[str, Any] | None
    classifier: dict[str, Any] | None
    active: int | None
    max_active: int | None
    renew_seconds: int
    grace_seconds: int
    toleration_seconds: int
    on_expiry: Literal["requeue", "fail"]
    keeps_logs: bool
    paused: bool
    created_at: Stamp
    retention_seconds: int
    attachment_quota_bytes: int
    min_queued_age_seconds: NotRequired[Annotated[int, Field(default=600)]]
    starvation_escalation_seconds: NotRequired[Annotated[int, Field(default=3600)]]
    rates: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]
    accepts_delegation_from: NotRequired[Annotated[list[str], Field(default=[])]]
    max_delegated_per_lease: NotRequired[
        Annotated[int, Field(default=DEFAULT_MAX_DELEGATED_PER_LEASE)]
    ]
    max_delegated_per_tree: NotRequired[
        Annotated[int, Field(default=DEFAULT_MAX_DELEGATED_PER_TREE)]
    ]
    retry: NotRequired[Annotated[RetrySettings, Field(default_factory=RetrySettings)]]
    max_active_per_key: NotRequired[Annotated[int | None, Field(default=None)]]
    max_claims_per_minute: NotRequired[Annotated[int | None, Field(default=None)]]
    max_run_seconds: NotRequired[Annotated[int | None, Field(default=None)]]


@answer
class PoolAnswer(TypedDict):
    pool: PoolOut


@answer
class Pools(TypedDict):
    pools: list[PoolOut]
    next_cursor: NotRequired[
        Annotated[None, Field(default=None)]
    ]  # always null: a space has at most the instance's pool cap
