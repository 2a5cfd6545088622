"""The sweeper's handler, shared by the Lambda and the local stack's loop."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from tenure import wiring
from tenure.app.sweep import SweepReport, sweep_once
from tenure.config import settings

logger = Logger(service="tenure-sweeper")
metrics = Metrics(namespace="Tenure", service="sweeper")


def run_pass() -> SweepReport:
    report = sweep_once(wiring.service(), settings().sweep_interval_seconds)
    busy = report.expired or report.held or report.pushed or report.raced or report.skipped
    if busy or report.reclaimed or report.reclaim_left:
        logger.info("sweeper pass", extra={"report": asdict(report)})
    return report


@metrics.log_metrics
def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = run_pass()
    metrics.add_metric(name="LeasesExpired", unit=MetricUnit.Count, value=len(report.expired))
    metrics.add_metric(name="ExpiriesHeld", unit=MetricUnit.Count, value=report.held)
    metrics.add_metric(name="DeadlinesPushed", unit=MetricUnit.Count, value=report.pushed)
    metrics.add_metric(name="LeasesReclaimed", unit=MetricUnit.Count, value=len(report.reclaimed))
    metrics.add_metric(name="ReclaimBacklog", unit=MetricUnit.Count, value=report.reclaim_left)
    return {
        "expired": len(report.expired),
        "held": report.held,
        "pushed": report.pushed,
        "reclaimed": len(report.reclaimed),
        "reclaim_left": report.reclaim_left,
    }


__all__ = ["SweepReport", "handle", "run_pass", "sweep_once"]
