"""Agent and classifier versions: what a pool's version says, what a lease pinned,
what its payload carries, and how a classifier's reported details become task checks and
properties through the version's JMESPath output document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jmespath
from jmespath.exceptions import JMESPathError

from tenure.app.rows import PoolRows
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease, Pool, PoolVersion
from tenure.domain.states import PoolKind
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# The two documents a classifier's output may render, each {name: expression}.
OUTPUT_PARTS = ("checks", "properties")


def check_settings(
    kind: PoolKind, agent: dict[str, Any] | None, classifier: dict[str, Any] | None
) -> None:
    """Agent settings belong to agent pools, classifier settings to classifier pools, and
    every output expression compiles; otherwise ValidationFailed naming the field."""
    if agent is not None and kind is not PoolKind.AGENT:
        raise ValidationFailed(f"agent: only an agent pool has agent settings (this is {kind})")
    if classifier is not None and kind is not PoolKind.CLASSIFIER:
        raise ValidationFailed(
            f"classifier: only a classifier pool has classifier settings (this is {kind})"
        )
    output = (classifier or {}).get("output") or {}
    for part in OUTPUT_PARTS:
        for name, expression in (output.get(part) or {}).items():
            try:
                jmespath.compile(expression)
            except JMESPathError as bad:
                raise ValidationFailed(
                    f"classifier.output.{part}.{name}: not a JMESPath expression "
                    f"({type(bad).__name__})"
                ) from bad


def require_settings(
    kind: PoolKind, agent: dict[str, Any] | None, classifier: dict[str, Any] | None
) -> None:
    """An agent pool hands its workers a model and a classifier pool an input document
    in its payload: neither kind exists without its settings."""
    if kind is PoolKind.AGENT and not (agent or {}).get("model"):
        raise ValidationFailed("agent: an agent pool needs its settings {model, effort?}")
    if kind is PoolKind.CLASSIFIER and classifier is None:
        raise ValidationFailed("classifier: a classifier pool needs its settings {input, output}")


@record
class Rendered:
    checks: dict[str, Any]
    properties: dict[str, Any]
    failed: list[dict[str, str]]  # {field, expression, error}, one per expression that failed


def render(output: dict[str, Any] | None, details: Any) -> Rendered:
    """Every output expression evaluated over `details`. Never raises: an expression that
    fails (or no longer compiles) is named in `failed` and sets nothing."""
    found: dict[str, dict[str, Any]] = {part: {} for part in OUTPUT_PARTS}
    failed: list[dict[str, str]] = []
    for part in OUTPUT_PARTS:
        for name, expression in ((output or {}).get(part) or {}).items():
            try:
                found[part][name] = jmespath.search(str(expression), details)
            except (JMESPathError, TypeError, ValueError) as bad:
                failed.append(
                    {
                        "field": f"{part}.{name}",
                        "expression": str(expression),
                        "error": f"{type(bad).__name__}: {bad}"[:500],
                    }
                )
    return Rendered(found["checks"], found["properties"], failed)


@record
class Pinned:
    """The agent and classifier settings of the version a lease pinned."""

    version: int
    agent: dict[str, Any] | None
    classifier: dict[str, Any] | None


class Versions:
    def __init__(self, kernel: Kernel, *, pools: PoolRows) -> None:
        self.kernel = kernel
        self.pools = pools

    def pinned(self, lease: Lease) -> Pinned:
        """The settings of the version the lease pinned: the pool row's while it is still the
        current one, else the superseded version's own row (a lease made before versions were
        pinned reads the current one)."""
        pool = self.kernel.pool(lease.pool)
        wanted = lease.pool_version or pool.version
        if wanted == pool.version:
            return Pinned(pool.version, pool.agent, pool.classifier)
        past = self.pools.get_pool_version(pool.name, wanted)
        if past is not None:
            return Pinned(past.version, past.agent, past.classifier)
        fresh = self.kernel.fresh_pool(pool.name)  # the cached pool was behind the lease's version
        return Pinned(fresh.version, fresh.agent, fresh.classifier)

    def kind_fields(self, lease: Lease, pool: Pool) -> dict[str, Any]:
        """What the payload adds for an agent or a classifier lease: `model` (and `effort`
        only when the version sets one), or the version's `input` document verbatim."""
        if pool.kind is PoolKind.AGENT:
            agent = self.pinned(lease).agent or {}
            fields: dict[str, Any] = {"model": agent.get("model")}
            if agent.get("effort") is not None:
                fields["effort"] = agent["effort"]
            return fields
        if pool.kind is PoolKind.CLASSIFIER:
            classifier = self.pinned(lease).classifier or {}
            return {"input": classifier.get("input", {})}
        return {}

    @staticmethod
    def superseded(pool: Pool, now: int) -> PoolVersion:
        return PoolVersion(
            pool=pool.name,
            version=pool.version,
            created_at=now,
            agent=pool.agent,
            classifier=pool.classifier,
        )
