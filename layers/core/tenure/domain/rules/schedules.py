"""EventBridge Scheduler expressions: validation and next fire times, pure (no boto3, no clock).

The syntax is Scheduler's own, so a rule's schedule means here what it means on AWS:
``rate(value unit)``, the six-field ``cron(minutes hours day-of-month month day-of-week
year)`` and ``at(yyyy-mm-ddThh:mm:ss)``, each evaluated in an IANA time zone. The validator
is deliberately no looser than Scheduler: an expression accepted here must not be refused
later by ``CreateSchedule``.

How fire times are computed, and why:

* Scheduler has one-minute precision, so cron and at fire on whole minutes.
* ``rate`` counts elapsed time from the schedule's start (its creation when no start date is
  set); a day is 24 hours on the clock, so a daylight-saving change does not move it.
* ``cron`` is read on the wall clock of its time zone. A wall time that does not exist (the
  hour skipped when clocks go forward) does not fire; a wall time that happens twice (clocks
  go back) fires once, at its first occurrence. This is how Scheduler documents its
  daylight-saving behaviour.
* ``at`` fires once, at that wall time in its zone (a time inside a skipped hour is read with
  the offset in force before the change, as ``zoneinfo`` does with ``fold=0``).

What an expression may say is bounded, so that every occasion it can produce is an instant
the service computes and stores (``datetime`` ends in year 9999; an occasion past it cannot
even be compared with now). Scheduler's reference documents a rate's value only as "a
positive integer", so the bounds are this service's own, and tighter than Scheduler:

* A rate's period is at most 365 days (8,760 hours, 525,600 minutes). A schedule rarer than
  yearly is better said as a cron (which names the day) or an ``at``; a rate counts elapsed
  time, so ``rate(1000000 days)`` would first fire some 2,700 years from now, and
  ``rate(100000000 days)`` past the end of the calendar.
* An ``at`` names a year from 1970 to 2199, the years a cron's year field may name, so the
  three kinds share one calendar and the instant stays representable in every time zone
  (14 hours either side of UTC at most).
"""

from __future__ import annotations

import calendar
import re
import zoneinfo
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, NoReturn, cast

from tenure.domain.fencing import MAX_ID_LENGTH
from tenure.records import record

# Scheduler's cron year field ends here, so no search ever needs to look further.
MAX_YEAR = 2199
MIN_YEAR = 1970
# The longest period a rate may have (see the module docstring).
MAX_RATE_PERIOD = timedelta(days=365)
# A caller asking for more fire times than this is a bug (the local loop needs one or two).
MAX_COUNT = 1000

MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), 1
    )
}
# Scheduler numbers days of the week 1-7 from Sunday.
DAY_NAMES = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), 1)
}


class InvalidSchedule(ValueError):
    """An expression or time zone Scheduler would refuse; ``field`` names the request field."""

    def __init__(self, message: str, *, field: str = "schedule") -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# ---------------------------------------------------------------------------------------------
# The three expression kinds


RateUnit = Literal["minutes", "hours", "days"]


@record
class RateSchedule:
    value: int
    unit: RateUnit

    @property
    def period(self) -> timedelta:
        return timedelta(**{self.unit: self.value})


@record
class AtSchedule:
    when: datetime  # naive: a wall time, read in the schedule's time zone


@record
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int]
    # Exactly one of the two day fields is "any" (``?``); the other is a DayRule.
    day_of_month: DayOfMonth | None
    day_of_week: DayOfWeek | None

    def days_in(self, year: int, month: int) -> list[int]:
        """The days of that month this expression fires on, ascending."""
        if self.day_of_month is not None:
            return self.day_of_month.days(year, month)
        if self.day_of_week is not None:
            return self.day_of_week.days(year, month)
        return list(range(1, calendar.monthrange(year, month)[1] + 1))


@record
class DayOfMonth:
    """Plain days (``1,15``, ``1-7``, ``*/5``), ``L`` (last day), ``LW``, or ``nW``."""

    values: frozenset[int] = frozenset()
    last: bool = False
    nearest_weekday: int | None = None  # nW: the weekday closest to day n, within the month
    last_weekday: bool = False  # LW

    def days(self, year: int, month: int) -> list[int]:
        length = calendar.monthrange(year, month)[1]
        if self.last:
            return [length]
        if self.last_weekday:
            return [_nearest_weekday(year, month, length)]
        if self.nearest_weekday is not None:
            if self.nearest_weekday > length:
                return []
            return [_nearest_weekday(year, month, self.nearest_weekday)]
        return sorted(day for day in self.values if day <= length)


@record
class DayOfWeek:
    """Plain days (``MON-FRI``, ``1,7``), ``L`` (Saturday), ``nL`` (last n-day), ``n#k``."""

    values: frozenset[int] = frozenset()  # 1 = Sunday … 7 = Saturday
    last_of_month: int | None = None  # nL
    nth: tuple[int, int] | None = None  # (day, k) for n#k

    def days(self, year: int, month: int) -> list[int]:
        length = calendar.monthrange(year, month)[1]
        if self.last_of_month is not None:
            candidates = [d for d in range(length, length - 7, -1)]
            return [d for d in candidates if _dow(year, month, d) == self.last_of_month][:1]
        if self.nth is not None:
            weekday, k = self.nth
            matching = [d for d in range(1, length + 1) if _dow(year, month, d) == weekday]
            return [matching[k - 1]] if k <= len(matching) else []
        return [d for d in range(1, length + 1) if _dow(year, month, d) in self.values]


Schedule = RateSchedule | CronSchedule | AtSchedule


def _dow(year: int, month: int, day: int) -> int:
    """Scheduler's day-of-week number: 1 = Sunday … 7 = Saturday."""
    return (date(year, month, day).weekday() + 1) % 7 + 1


def _nearest_weekday(year: int, month: int, day: int) -> int:
    """The Monday-Friday day closest to ``day`` without leaving the month (Quartz's W)."""
    length = calendar.monthrange(year, month)[1]
    weekday = date(year, month, day).weekday()  # Monday = 0
    if weekday < 5:
        return day
    if weekday == 5:  # Saturday: the Friday before, or the Monday after on the 1st
        return day - 1 if day > 1 else day + 2
    return day + 1 if day < length else day - 2  # Sunday


# ---------------------------------------------------------------------------------------------
# Parsing

# ASCII digits only: `\d` and str.isdigit() also take other scripts' digits and superscripts,
# which Scheduler does not read and int() either reads or refuses.
_RATE = re.compile(r"rate\(([0-9]+) ([a-z]+)\)")
_AT = re.compile(r"at\(([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\)")
# A cron number or increment; more digits than any field needs is not read (int() refuses a
# string of thousands of digits with an error of its own).
_WHOLE = re.compile(r"[0-9]{1,9}")
_CRON = re.compile(r"cron\((.*)\)", re.DOTALL)
_RATE_UNITS = {"minute": "minutes", "hour": "hours", "day": "days"}


MAX_EXPRESSION_CHARS = 256


def parse_schedule(expression: Any) -> Schedule:
    """Parse a Scheduler expression; raise InvalidSchedule naming what is wrong."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidSchedule("schedule must be a rate(…), cron(…) or at(…) expression")
    text = expression.strip()
    if text.startswith("rate("):
        return _parse_rate(text)
    if text.startswith("cron("):
        return _parse_cron(text)
    if text.startswith("at("):
        return _parse_at(text)
    raise InvalidSchedule("schedule must be a rate(…), cron(…) or at(…) expression")


def validate_timezone(name: Any) -> zoneinfo.ZoneInfo:
    """An IANA zone name (``UTC``, ``Europe/Paris``); raise InvalidSchedule(field=timezone)."""
    if not isinstance(name, str) or name not in _known_zones():
        raise InvalidSchedule(f"timezone {name!r} is not an IANA time zone name", field="timezone")
    return zoneinfo.ZoneInfo(name)


def validate(expression: Any, timezone: Any = "UTC") -> Schedule:
    """Both parts of a scheduled trigger, as the rules API checks them before Scheduler does:
    as Scheduler takes an expression, at most 256 characters, its fields apart by spaces
    alone. (A stored rule's expression is parsed without these, so one an earlier release
    took still reads.)"""
    if isinstance(expression, str):
        text = expression.strip()
        if len(text) > MAX_EXPRESSION_CHARS:
            raise InvalidSchedule(f"schedule is longer than {MAX_EXPRESSION_CHARS} characters")
        if any(ch.isspace() and ch != " " for ch in text):
            raise InvalidSchedule("schedule holds whitespace other than spaces")
    schedule = parse_schedule(expression)
    validate_timezone(timezone)
    return schedule


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    # Names of the tz database only. The system's zoneinfo directory also holds files that are
    # not zone names (localtime, posixrules, the posix/ and right/ copies), which ZoneInfo opens.
    names = zoneinfo.available_timezones() | {"UTC"}
    return frozenset(
        name
        for name in names
        if name not in ("localtime", "posixrules", "Factory")
        and not name.startswith(("posix/", "right/"))
    )


def _parse_rate(text: str) -> RateSchedule:
    found = _RATE.fullmatch(text)
    if found is None:
        raise InvalidSchedule(
            "rate expression must be rate(value unit) with a positive whole value and a unit "
            "of minute(s), hour(s) or day(s)"
        )
    digits, unit = found.group(1).lstrip("0"), found.group(2)
    if len(digits) > len(str(MAX_RATE_PERIOD // timedelta(minutes=1))):
        _refuse_period()
    value = int(digits or "0")
    if value < 1:
        raise InvalidSchedule("rate value must be a positive whole number")
    if unit in _RATE_UNITS:
        if value != 1:
            raise InvalidSchedule(f"rate unit must be {_RATE_UNITS[unit]} for a value of {value}")
        return RateSchedule(1, cast(RateUnit, _RATE_UNITS[unit]))
    if unit in _RATE_UNITS.values():
        if value == 1:
            raise InvalidSchedule(f"rate unit must be {unit[:-1]} for a value of 1")
        _check_period(value, unit)
        return RateSchedule(value, cast(RateUnit, unit))
    raise InvalidSchedule(f"rate unit {unit!r} is not one of minute(s), hour(s), day(s)")


def _check_period(value: int, unit: str) -> None:
    """Compared in whole units, before any timedelta is made: a large value overflows
    timedelta itself."""
    if value > MAX_RATE_PERIOD // timedelta(**{unit: 1}):
        _refuse_period()


def _refuse_period() -> NoReturn:
    days = MAX_RATE_PERIOD.days
    raise InvalidSchedule(
        f"rate period must be at most {days} days ({days * 24} hours, "
        f"{days * 24 * 60} minutes); a rarer schedule is a cron(…) or an at(…)"
    )


def _parse_at(text: str) -> AtSchedule:
    found = _AT.fullmatch(text)
    if found is None:
        raise InvalidSchedule("at expression must be at(yyyy-mm-ddThh:mm:ss)")
    try:
        year, month, day, hour, minute, second = (int(part) for part in found.groups())
        when = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise InvalidSchedule(f"at expression is not a real date and time: {exc}") from None
    if not MIN_YEAR <= when.year <= MAX_YEAR:
        raise InvalidSchedule(
            f"at expression year must be from {MIN_YEAR} to {MAX_YEAR}, as a cron's year"
        )
    return AtSchedule(when)


@record
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_MINUTES = _Field("minutes", 0, 59)
_HOURS = _Field("hours", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, MONTH_NAMES)
_DOW = _Field("day-of-week", 1, 7, DAY_NAMES)
_YEAR = _Field("year", MIN_YEAR, MAX_YEAR)


def _parse_cron(text: str) -> CronSchedule:
    found = _CRON.fullmatch(text)
    if found is None:
        raise InvalidSchedule("cron expression must be cron(fields), closed by )")
    fields = found.group(1).split()
    if len(fields) != 6:
        raise InvalidSchedule(
            "cron expression needs six fields: minutes hours day-of-month month day-of-week "
            f"year (got {len(fields)})"
        )
    minute, hour, dom, month, dow, year = (f.upper() for f in fields)
    if (dom == "?") == (dow == "?"):
        raise InvalidSchedule(
            "cron expression needs ? in exactly one of day-of-month and day-of-week"
        )
    return CronSchedule(
        minutes=_values(minute, _MINUTES),
        hours=_values(hour, _HOURS),
        months=_values(month, _MONTH),
        years=_values(year, _YEAR),
        day_of_month=None if dom == "?" else _day_of_month(dom),
        day_of_week=None if dow == "?" else _day_of_week(dow),
    )


def _number(token: str, field: _Field) -> int:
    if field.names and token in field.names:
        return field.names[token]
    if not _WHOLE.fullmatch(token):
        raise InvalidSchedule(f"cron {field.name} value {token[:20]!r} is not valid")
    value = int(token)
    if not field.low <= value <= field.high:
        raise InvalidSchedule(
            f"cron {field.name} value {value} is outside {field.low}-{field.high}"
        )
    return value


def _values(text: str, field: _Field) -> frozenset[int]:
    """A field of ``,`` lists of ``*``, ``n``, ``a-b`` and increments (``a/s``, ``a-b/s``)."""
    chosen: set[int] = set()
    for item in text.split(","):
        if not item:
            raise InvalidSchedule(f"cron {field.name} has an empty list item")
        base, slash, step_text = item.partition("/")
        if base == "*":
            start, end = field.low, field.high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = _number(first, field), _number(last, field)
            if start > end:
                raise InvalidSchedule(f"cron {field.name} range {base} runs backwards")
        else:
            start = _number(base, field)
            # "5/15" means from 5 to the end of the field in steps of 15.
            end = field.high if slash else start
        step = 1
        if slash:
            if not _WHOLE.fullmatch(step_text) or int(step_text) < 1:
                raise InvalidSchedule(f"cron {field.name} increment in {item[:20]!r} is not valid")
            step = int(step_text)
            if step > field.high - field.low + 1:
                raise InvalidSchedule(
                    f"cron {field.name} increment {step} is larger than the field's range"
                )
        chosen.update(range(start, end + 1, step))
    return frozenset(chosen)


_NEAREST_WEEKDAY = re.compile(r"([0-9]{1,2})W")
_LAST_OF_MONTH = re.compile(r"([1-7])L")


def _day_of_month(text: str) -> DayOfMonth:
    if text == "L":
        return DayOfMonth(last=True)
    if text == "LW":
        return DayOfMonth(last_weekday=True)
    if "L" in text or "W" in text:
        found = _NEAREST_WEEKDAY.fullmatch(text)
        if found is None:
            raise InvalidSchedule(
                f"cron day-of-month {text!r}: L and W stand alone (L, LW or nW), not in lists"
            )
        return DayOfMonth(nearest_weekday=_number(found.group(1), _DOM))
    if "#" in text:
        raise InvalidSchedule("cron day-of-month does not take # (it belongs to day-of-week)")
    return DayOfMonth(values=_values(text, _DOM))


def _day_of_week(text: str) -> DayOfWeek:
    if "#" in text:
        if "," in text:
            raise InvalidSchedule("cron day-of-week with # takes a single expression, not a list")
        day, _, k = text.partition("#")
        if not _WHOLE.fullmatch(k) or not 1 <= int(k) <= 5:
            raise InvalidSchedule(f"cron day-of-week {text!r}: the week after # must be 1-5")
        return DayOfWeek(nth=(_number(day, _DOW), int(k)))
    if text == "L":
        return DayOfWeek(values=frozenset({DAY_NAMES["SAT"]}))
    found = _LAST_OF_MONTH.fullmatch(text)
    if found is not None:
        return DayOfWeek(last_of_month=int(found.group(1)))
    if "L" in text:
        raise InvalidSchedule(f"cron day-of-week {text!r}: L stands alone (L, or nL with n 1-7)")
    return DayOfWeek(values=_values(text, _DOW))


# ---------------------------------------------------------------------------------------------
# Fire times


def next_fire_times(
    expression: str,
    timezone: str,
    after: datetime,
    count: int,
    *,
    start: datetime | None = None,
) -> list[datetime]:
    """Up to ``count`` fire instants strictly after ``after``, ascending, as aware UTC times.

    ``start`` anchors a rate schedule (Scheduler's start date, or the schedule's creation);
    without it the schedule is taken to have started at ``after``, so the first fire is one
    period later. Cron and at ignore it. Fewer than ``count`` come back when the schedule ends
    (an at() that is past, a cron whose years run out).
    """
    schedule = parse_schedule(expression)
    zone = validate_timezone(timezone)
    if after.tzinfo is None or (start is not None and start.tzinfo is None):
        raise ValueError("after and start must be timezone-aware datetimes")
    if not 0 <= count <= MAX_COUNT:
        raise ValueError(f"count must be between 0 and {MAX_COUNT}")
    after = after.astimezone(UTC)
    if count == 0:
        return []
    if isinstance(schedule, RateSchedule):
        return _rate_times(schedule, after, count, start)
    if isinstance(schedule, AtSchedule):
        fire = schedule.when.replace(tzinfo=zone).astimezone(UTC)
        return [fire] if fire > after else []
    return _cron_times(schedule, zone, after, count)


def _rate_times(
    schedule: RateSchedule, after: datetime, count: int, start: datetime | None
) -> list[datetime]:
    period = schedule.period
    anchor = after if start is None else start.astimezone(UTC)
    if anchor > after:
        return [anchor + i * period for i in range(count)]
    # The first multiple of the period from the anchor that lies strictly after `after`.
    first = anchor + ((after - anchor) // period + 1) * period
    return [first + i * period for i in range(count)]


def _cron_times(
    schedule: CronSchedule, zone: zoneinfo.ZoneInfo, after: datetime, count: int
) -> list[datetime]:
    found: list[datetime] = []
    local_after = after.astimezone(zone)
    # One day of slack: the first local day that can hold a fire time after `after`.
    first_day = (local_after - timedelta(days=1)).date()
    for year in sorted(y for y in schedule.years if y >= first_day.year):
        for month in sorted(schedule.months):
            if (year, month) < (first_day.year, first_day.month):
                continue
            for day in schedule.days_in(year, month):
                if date(year, month, day) < first_day:
                    continue
                for hour in sorted(schedule.hours):
                    for minute in sorted(schedule.minutes):
                        fire = _wall_to_utc(datetime(year, month, day, hour, minute), zone)
                        if fire is None or fire <= after:
                            continue
                        found.append(fire)
                        if len(found) == count:
                            return found
    return found


def _wall_to_utc(wall: datetime, zone: zoneinfo.ZoneInfo) -> datetime | None:
    """The instant of a wall time in ``zone``: None if the clock skipped it, else its first."""
    instant = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != wall:
        return None
    return instant


# ---------------------------------------------------------------------------------------------
# The scheduler function's input

# The longest scheduled_time read (an ISO-8601 time with fractions and an offset is 32); a
# longer one is refused by its length, not echoed.
MAX_TIME_CHARS = 64


@record
class ScheduledFiring:
    """The input each schedule sends its target: which rule, and the instant it was due."""

    rule_id: str
    scheduled_time: datetime

    @classmethod
    def from_event(cls, event: Any) -> ScheduledFiring:
        """Read ``{"rule_id", "scheduled_time"}``; raise ValueError naming the bad field."""
        if not isinstance(event, dict):
            raise ValueError("scheduler input must be a JSON object")
        rule_id = event.get("rule_id")
        if not isinstance(rule_id, str) or not rule_id:
            raise ValueError("scheduler input has no rule_id")
        if len(rule_id) > MAX_ID_LENGTH:
            raise ValueError(f"scheduler input has a rule_id of {len(rule_id)} characters")
        raw_time = event.get("scheduled_time")
        if not isinstance(raw_time, str):
            raise ValueError("scheduler input has no scheduled_time")
        if len(raw_time) > MAX_TIME_CHARS:
            raise ValueError(f"scheduled_time of {len(raw_time)} characters is no time")
        try:
            scheduled = datetime.fromisoformat(raw_time)
        except ValueError:
            raise ValueError(f"scheduled_time {raw_time!r} is not an ISO-8601 time") from None
        if scheduled.tzinfo is None:
            raise ValueError("scheduled_time carries no offset")
        try:
            return cls(rule_id, scheduled.astimezone(UTC))
        except OverflowError:
            raise ValueError(f"scheduled_time {raw_time!r} is out of range in UTC") from None
