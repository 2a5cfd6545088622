"""The scheduler function's handler, shared by the Lambda and the local stack's scheduler loop."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from tenure import wiring
from tenure.app.rules.firings import AHEAD_SKIPS, ARCHIVED_SKIPS
from tenure.domain.model import Task
from tenure.domain.rules.schedules import ScheduledFiring

logger = Logger(service="tenure-scheduler")
metrics = Metrics(namespace="Tenure", service="scheduler")


@metrics.log_metrics
def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Mint the lease of one (rule_id, scheduled_time), at most once however often invoked.

    An input that is not a firing raises: Scheduler retries it (bounded by the target's
    retry policy) and the error shows in the function's metrics; retrying cannot mint twice.
    """
    firing = ScheduledFiring.from_event(event)
    svc = wiring.service()
    archived_before = svc.counters[ARCHIVED_SKIPS]
    ahead_before = svc.counters[AHEAD_SKIPS]
    lease = svc.firings.fire_scheduled(firing.rule_id, firing.scheduled_time)
    at = firing.scheduled_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    if svc.counters[AHEAD_SKIPS] > ahead_before:
        # Not retried (raising would have Scheduler send it again for an hour): answered.
        logger.warning(
            "scheduled_time is ahead of the clock: a schedule delivers at its time or after; "
            "nothing fired",
            extra={"rule_id": firing.rule_id, "scheduled_time": at},
        )
        metrics.add_metric(name="ScheduledFiringsSkipped", unit=MetricUnit.Count, value=1)
        return {
            "rule_id": firing.rule_id,
            "scheduled_time": at,
            "lease_id": None,
            "skipped": "scheduled_time_ahead",
        }
    if lease is None:
        archived = svc.counters[ARCHIVED_SKIPS] > archived_before
        logger.info(
            "rule skipped: its space is archived" if archived else "nothing to fire",
            extra={"rule_id": firing.rule_id, "scheduled_time": at},
        )
        metrics.add_metric(name="ScheduledFiringsSkipped", unit=MetricUnit.Count, value=1)
        if archived:
            metrics.add_metric(name="ScheduledArchivedSkips", unit=MetricUnit.Count, value=1)
        return {"rule_id": firing.rule_id, "scheduled_time": at, "lease_id": None}
    if isinstance(lease, Task):  # filed to wait for approval: no lease until approved
        logger.info(
            "scheduled rule filed a task awaiting approval",
            extra={"rule_id": firing.rule_id, "scheduled_time": at, "task_id": lease.id},
        )
        metrics.add_metric(name="ScheduledFirings", unit=MetricUnit.Count, value=1)
        return {"rule_id": firing.rule_id, "scheduled_time": at, "lease_id": None}
    logger.info(
        "scheduled rule fired",
        extra={"rule_id": firing.rule_id, "scheduled_time": at, "lease_id": lease.id},
    )
    metrics.add_metric(name="ScheduledFirings", unit=MetricUnit.Count, value=1)
    return {"rule_id": firing.rule_id, "scheduled_time": at, "lease_id": lease.id}
