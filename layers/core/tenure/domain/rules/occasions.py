"""A scheduled rule's occasions: what one scheduler invocation handles (the occasion it was
invoked for, and those missed while the service was away, within the rule's catch-up
window), and what a rule does when an occasion meets its previous lease (`overlap`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tenure.domain.errors import ValidationFailed
from tenure.domain.rules.schedules import MAX_COUNT, RateSchedule, next_fire_times, parse_schedule

SKIP, ALLOW, CANCEL_PREVIOUS = "skip", "allow", "cancel_previous"
OVERLAPS = (SKIP, ALLOW, CANCEL_PREVIOUS)
DEFAULT_OVERLAP = SKIP
# The longest catch-up window: a day, as long as Scheduler keeps retrying an invocation.
MAX_CATCHUP_WINDOW_SECONDS = 86_400
# A delivery this late after its occasion still counts as on time (Scheduler's own delay and
# its first retries); a later one was missed while the service was away, and is judged by the
# rule's catch-up window like an occasion nobody delivered.
ON_TIME_SECONDS = 300
# One invocation catches up at most this many missed occasions (the latest within the
# window): the reads and writes of one invocation stay bounded.
MAX_CATCHUP_OCCASIONS = 100
_TICK = timedelta(milliseconds=1)
# How many chunks of fire times one look walks through (each MAX_COUNT long).
_CHUNKS = 3


def check_overlap(value: Any) -> str:
    if not isinstance(value, str) or value not in OVERLAPS:
        raise ValidationFailed(f"overlap: must be one of {', '.join(OVERLAPS)}")
    return value


def check_catchup_window(value: Any) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 0 <= value <= MAX_CATCHUP_WINDOW_SECONDS
    ):
        raise ValidationFailed(
            f"catchup_window_seconds: must be an integer from 0 to {MAX_CATCHUP_WINDOW_SECONDS}"
        )
    return value


def occasions_to_handle(
    expression: str,
    timezone: str,
    occasion: datetime,
    now_ms: int,
    window_seconds: int,
    handled_through_ms: int | None,
    since_ms: int,
) -> list[datetime]:
    """The occasions one invocation for `occasion` handles at `now_ms`, oldest first.

    Missed occasions first: the schedule's fire times after the last one the rule handled
    (`handled_through_ms`), and after the rule was made (`since_ms`), and before `occasion`
    and now, that lie within the window before now (at most MAX_CATCHUP_OCCASIONS, the latest). Then
    `occasion` itself, when it is on time or, delivered late, within the window. A window of 0
    catches up nothing."""
    window_ms = window_seconds * 1000
    at_ms = _ms(occasion)
    found: list[datetime] = []
    if window_ms > 0:
        floor = max(now_ms - window_ms, since_ms + 1, (handled_through_ms or 0) + 1)
        found = _between(expression, timezone, floor, occasion, now_ms)
    late = now_ms - at_ms > ON_TIME_SECONDS * 1000
    if not late or now_ms - at_ms <= window_ms:
        found.append(occasion)
    return found


def latest_missed(
    expression: str,
    timezone: str,
    now_ms: int,
    window_seconds: int,
    handled_through_ms: int | None,
    since_ms: int,
) -> datetime | None:
    """The latest fire time within the window before now that the rule has not handled
    (after `handled_through_ms` and after the rule was made, `since_ms`): what a service
    that resumes invokes itself for, so that occasions missed while it was away are caught
    up at once rather than at the next one. None with a window of 0 or nothing missed."""
    window_ms = window_seconds * 1000
    if window_ms <= 0:
        return None
    floor = max(now_ms - window_ms, since_ms + 1, (handled_through_ms or 0) + 1)
    if floor > now_ms:
        return None
    schedule = parse_schedule(expression)
    if isinstance(schedule, RateSchedule):
        # Counted from the last occasion handled, or from when the rule was made.
        anchor = _at(handled_through_ms if handled_through_ms is not None else since_ms)
        steps = (_at(now_ms) - anchor) // schedule.period
        latest = anchor + steps * schedule.period
        return latest if steps >= 1 and _ms(latest) >= floor else None
    found = _between(expression, timezone, floor, _at(now_ms) + _TICK, now_ms)
    return found[-1] if found else None


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _between(
    expression: str, timezone: str, floor_ms: int, occasion: datetime, now_ms: int
) -> list[datetime]:
    """The schedule's fire times at or after `floor_ms`, before `occasion` and not after now:
    the latest MAX_CATCHUP_OCCASIONS of them, ascending."""
    after = datetime.fromtimestamp(floor_ms / 1000, tz=UTC) - _TICK
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    if after >= occasion:
        return []
    schedule = parse_schedule(expression)
    if isinstance(schedule, RateSchedule):
        # Every period back from the occasion (Scheduler counts a rate from its start).
        span = (occasion - after) // schedule.period
        if (occasion - after) % schedule.period == timedelta(0):
            span -= 1
        # Not after now: n at least (occasion - now) / period, rounded up.
        nearest = max(1, -((now - occasion) // schedule.period))
        farthest = min(span, nearest + MAX_CATCHUP_OCCASIONS - 1)
        return [occasion - n * schedule.period for n in range(farthest, nearest - 1, -1)]
    kept: list[datetime] = []
    for _ in range(_CHUNKS):
        times = next_fire_times(expression, timezone, after, MAX_COUNT)
        fresh = [t for t in times if t < occasion and t <= now]
        kept = (kept + fresh)[-MAX_CATCHUP_OCCASIONS:]
        if len(fresh) < len(times) or len(times) < MAX_COUNT:
            break
        after = times[-1]
    return kept


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def occasion_key(at: datetime) -> str:
    """The occasion a scheduled time names, in a firing's job id."""
    return "schedule:" + at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
