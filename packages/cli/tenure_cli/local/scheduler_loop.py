"""Stands in for EventBridge Scheduler locally: fires the rules' schedules held in moto on time.

Each tick lists the schedules of the rules' group (list_schedules, get_schedule: the same
calls a person would make against AWS), computes each enabled schedule's fire times with
core/schedules.next_fire_times, and invokes the scheduler function's own handler with the
schedule's Input, `<aws.scheduler.scheduled-time>` substituted as Scheduler does. Because the
handler mints at most one lease per (rule, scheduled time), a tick that overlaps another (or
a restart that replays a time) cannot mint twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tenure.domain.rules.schedules import InvalidSchedule, next_fire_times
from tenure.store.schedules import SCHEDULED_TIME, EventBridgeSchedules

# At most this many firings per schedule per tick: a rate(1 minute) schedule after a long
# pause catches up a few at a time instead of flooding the queue.
MAX_FIRES_PER_TICK = 5
MAX_SCHEDULES = 1000
# Scheduler's retry policy on the target (store/schedules.py) allows 3 retries.
MAX_TRIES = 4


class SchedulerLoop:
    def __init__(
        self, schedules: EventBridgeSchedules, invoke: Callable[[dict[str, Any]], Any]
    ) -> None:
        self.schedules = schedules
        self.invoke = invoke
        # Per schedule: the instant its firings have been handled up to.
        self.fired_to: dict[str, datetime] = {}
        self.failures: dict[tuple[str, str], int] = {}

    def tick(self, now: datetime) -> list[dict[str, Any]]:
        """Fire every due time of every enabled schedule; the inputs handed to the handler."""
        fired: list[dict[str, Any]] = []
        names = self.schedules.names(MAX_SCHEDULES)
        for gone in set(self.fired_to) - set(names):
            del self.fired_to[gone]
        for name in names:
            schedule = self.schedules.describe(name)
            if schedule is None:
                continue
            created = _utc(schedule.get("CreationDate")) or now
            if schedule.get("State") != "ENABLED":
                # A disabled schedule's missed times are not made up when it is enabled again.
                self.fired_to[name] = now
                continue
            target = schedule.get("Target") or {}
            if target.get("Arn") != self.schedules.target_arn:
                continue
            after = self.fired_to.get(name, created)
            try:
                times = next_fire_times(
                    schedule["ScheduleExpression"],
                    schedule.get("ScheduleExpressionTimezone") or "UTC",
                    after,
                    MAX_FIRES_PER_TICK,
                    start=_utc(schedule.get("StartDate")) or created,
                )
            except (InvalidSchedule, OverflowError) as bad:
                # A rule stored by an earlier release, past today's bounds, or whose zone the
                # time zone database dropped: skipped, said once a tick until someone fixes or
                # deletes it, and the other schedules still fire.
                print(
                    f"[scheduler] {name} skipped: its occasions cannot be computed: {bad}",
                    flush=True,
                )
                continue
            for due in (t for t in times if t <= now):
                stamp = due.strftime("%Y-%m-%dT%H:%M:%SZ")
                event = json.loads(str(target.get("Input", "{}")).replace(SCHEDULED_TIME, stamp))
                try:
                    self.invoke(event)
                except Exception as err:  # like Scheduler: retried, a bounded number of times
                    tries = self.failures.get((name, stamp), 0) + 1
                    self.failures[(name, stamp)] = tries
                    print(f"[scheduler] {name} at {stamp} failed ({tries}): {err!r}", flush=True)
                    if tries < MAX_TRIES:
                        break
                self.failures.pop((name, stamp), None)
                fired.append(event)
                self.fired_to[name] = due
        return fired


def _utc(value: Any) -> datetime | None:
    return value.astimezone(UTC) if isinstance(value, datetime) else None
