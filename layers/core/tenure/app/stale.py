"""Refusing a report from a lease whose job has moved on, and recording it on the subject's
timeline (`lease.stale_report`) so an operator sees the late worker."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tenure.app.ports import Clock, Ids
from tenure.app.rows import TimelineRows
from tenure.domain.errors import StaleLease
from tenure.domain.events import LEASE_STALE_REPORT
from tenure.domain.model import Event, Lease


class StaleReports:
    def __init__(
        self, timeline: TimelineRows, clock: Clock, ids: Ids, counters: Counter[str]
    ) -> None:
        self.timeline = timeline
        self.clock = clock
        self.ids = ids
        self.counters = counters

    def refuse_if_stale(self, lease: Lease, what: str) -> None:
        if lease.superseded:
            self.record_stale(lease, what, lease.fence)
            raise StaleLease(
                f"lease {lease.id} (fence {lease.fence}) was {lease.end_reason or lease.state}; "
                "its job has moved on"
            )

    def refuse_old_fence(self, lease: Lease, fence: int | None, what: str) -> None:
        """A report naming a fence other than the lease's is stale, whatever became of the
        lease, and is recorded on its subject's timeline (`lease.stale_report`)."""
        if fence is not None and fence != lease.fence:
            self.record_stale(lease, what, fence)
            raise StaleLease(f"fence {fence} of lease {lease.id} is not current")

    def record_stale(self, lease: Lease, what: str, fence: int) -> None:
        self.counters["stale_reports"] += 1
        self.timeline.put_event(
            self.event(lease, LEASE_STALE_REPORT, {"report": str(what), "fence": fence})
        )

    def event(self, lease: Lease, type_: str, data: dict[str, Any]) -> Event:
        """A timeline event about the lease, at its fence, now."""
        return Event(
            id=self.ids.new_id("ev"),
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            type=type_,
            at=self.clock.now_ms(),
            lease_id=lease.id,
            fence=lease.fence,
            data=data,
        )
