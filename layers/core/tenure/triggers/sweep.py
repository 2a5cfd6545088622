"""The sweeper's handler, shared by the Lambda and the local stack's loop."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from tenure import wiring
from tenure.app.sweep import PoolDepth, SweepReport
from tenure.config import settings

logger = Logger(service="tenure-sweeper")
NAMESPACE = "Tenure"
metrics = Metrics(namespace=NAMESPACE, service="sweeper")


def run_pass(gauges: bool = True) -> SweepReport:
    """One pass; `gauges` reads the pools' depths for `handle` to publish."""
    report = wiring.service().sweep.once(settings().sweep_interval_seconds, gauges)
    busy = report.expired or report.held or report.pushed or report.pushing or report.raced
    busy = busy or report.skipped or report.queue_timed_out or report.timed_out
    busy = busy or report.marks_dropped
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
    # One a pass, whatever it found: the "sweeper stopped" alarm fires on its absence.
    metrics.add_metric(name="SweeperPasses", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="MassExpiryHolds", unit=MetricUnit.Count, value=len(report.mass_holds))
    for depth in report.depths:
        emit_depth(depth)
    return {
        "expired": len(report.expired),
        "held": report.held,
        "pushed": report.pushed,
        "reclaimed": len(report.reclaimed),
        "reclaim_left": report.reclaim_left,
        "queue_timed_out": len(report.queue_timed_out),
        "timed_out": len(report.timed_out),
    }


def emit_depth(depth: PoolDepth) -> None:
    """One pool's gauges as their own EMF document: a document's dimensions apply to every
    metric in it, so `Pool` cannot share the pass's document (whose only dimension is the
    service). EphemeralMetrics keeps none of the shared Metrics' state."""
    gauges = EphemeralMetrics(namespace=NAMESPACE, service="sweeper")
    gauges.add_dimension(name="Pool", value=depth.pool)
    gauges.add_metric(name="QueuedLeases", unit=MetricUnit.Count, value=depth.queued)
    gauges.add_metric(name="HeldLeases", unit=MetricUnit.Count, value=depth.held)
    gauges.add_metric(
        name="OldestQueuedAgeSeconds", unit=MetricUnit.Seconds, value=depth.oldest_queued_age_s
    )
    gauges.flush_metrics()


__all__ = ["SweepReport", "handle", "run_pass"]
