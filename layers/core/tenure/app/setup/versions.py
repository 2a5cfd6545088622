"""Agent and classifier versions: what a pool's version says, what a lease pinned,
what its payload carries, and how a classifier's reported details become task checks and
properties through the version's JMESPath output document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath.exceptions import JMESPathError

from tenure.app.ports import Change, TaskWrite
from tenure.app.rows import PoolRows, TaskRows
from tenure.domain.errors import ValidationFailed
from tenure.domain.events import CLASSIFIER_OUTPUT_FAILED, TASK_CLASSIFIED
from tenure.domain.model import Lease, Pool, PoolVersion
from tenure.domain.states import EndReason, PoolKind
from tenure.domain.tasks import next_version

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.leases.ending import Ending

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


class Classifier:
    def __init__(self, kernel: Kernel, versions: Versions, *, tasks: TaskRows) -> None:
        self.kernel = kernel
        self.tasks = tasks
        self.versions = versions

    def with_classifier_output(self, ending: Ending) -> Ending:
        """Add to a successful completion's change the task's checks and properties, rendered
        from the reported details by the pinned version's output. Evaluating cannot fail (see
        `render`), and the task write only asks that the task still be on this run, which it
        is while the run's lease is held: the completion commits with it or not at all, and
        a lost race is judged again like any other (bounded, Kernel.settle)."""
        lease, ended, report = ending.before, ending.ended, ending.report
        if ended.end_reason is not EndReason.COMPLETED or ended.outcome != "success":
            return ending
        if lease.task_id is None or self.kernel.pool(lease.pool).kind is not PoolKind.CLASSIFIER:
            return ending
        output = (self.versions.pinned(lease).classifier or {}).get("output")
        if not output:
            return ending
        task = self.tasks.get_task(lease.task_id)
        if task is None or task.job_id != lease.job_id:
            return ending
        done = render(output, report.get("details") or {})
        now = self.kernel.clock.now_ms()
        data: dict[str, Any] = {
            "lease_id": lease.id,
            "pool_version": lease.pool_version,
            "checks": sorted(done.checks),
            "properties": sorted(done.properties),
        }
        if done.failed:
            data["failed"] = done.failed
        new = next_version(
            task,
            CLASSIFIER_OUTPUT_FAILED if done.failed else TASK_CLASSIFIED,
            data,
            now,
            checks={**task.checks, **done.checks},
            properties={**task.properties, **done.properties},
        )
        return ending.with_rows(Change(tasks=[TaskWrite(new, expect_job_id=task.job_id)]))
