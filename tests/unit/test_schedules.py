"""EventBridge Scheduler expressions: the validation table and next fire times (DST included)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tenure.domain.rules.schedules import (
    AtSchedule,
    CronSchedule,
    InvalidSchedule,
    RateSchedule,
    ScheduledFiring,
    next_fire_times,
    parse_schedule,
    validate,
    validate_timezone,
)

EVENTS = Path(__file__).resolve().parents[2] / "samplesources" / "events"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "rate(1 minute)",
        "rate(5 minutes)",
        "rate(1 hour)",
        "rate(12 hours)",
        "rate(1 day)",
        "rate(7 days)",
        "cron(0 10 * * ? *)",
        "cron(15 12 * * ? *)",
        "cron(0 18 ? * MON-FRI *)",
        "cron(0 8 1 * ? *)",
        "cron(0/15 * * * ? *)",
        "cron(0/10 * ? * MON-FRI *)",
        "cron(0/5 8-17 ? * MON-FRI *)",
        "cron(0 9 ? * 2#1 *)",
        "cron(0 9 ? * MON#1 *)",
        "cron(0 12 L * ? *)",
        "cron(0 12 LW * ? *)",
        "cron(0 12 15W * ? *)",
        "cron(0 12 ? * L *)",
        "cron(0 12 ? * 6L *)",
        "cron(5,35 14 * * ? *)",
        "cron(0 0 1 JAN,JUL ? 2027-2030)",
        "cron(30 2 ? * sun *)",  # names in any case
        "cron(*/5 * * * ? *)",
        "cron(0 0 29 FEB ? *)",
        "cron(59 23 31 12 ? 2199)",
        "cron(0 0 ? JAN-MAR 1,7 *)",
        "at(2026-12-01T09:30:00)",
        "at(2028-02-29T00:00:00)",
        "  rate(5 minutes)  ",
    ],
)
def test_valid_expressions(expression: str) -> None:
    parse_schedule(expression)


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("", "rate(…), cron(…) or at(…)"),
        ("every 5 minutes", "rate(…), cron(…) or at(…)"),
        ("RATE(5 minutes)", "rate(…), cron(…) or at(…)"),
        ("rate(5 minute)", "unit must be minutes for a value of 5"),
        ("rate(1 minutes)", "unit must be minute for a value of 1"),
        ("rate(2 day)", "unit must be days"),
        ("rate(1 hours)", "unit must be hour"),
        ("rate(0 minutes)", "positive whole number"),
        ("rate(5 seconds)", "not one of minute(s), hour(s), day(s)"),
        ("rate(1 week)", "not one of"),
        ("rate(-5 minutes)", "rate(value unit)"),
        ("rate(1.5 hours)", "rate(value unit)"),
        ("rate(5minutes)", "rate(value unit)"),
        ("rate(5 minutes", "rate(value unit)"),
        ("cron(0 10 * * *)", "six fields"),
        ("cron(0 10 * * ? * *)", "six fields"),
        ("cron(0 10 * * * *)", "? in exactly one"),
        ("cron(0 10 ? * ? *)", "? in exactly one"),
        ("cron(0 10 1 * MON *)", "? in exactly one"),
        ("cron(60 10 * * ? *)", "minutes value 60 is outside 0-59"),
        ("cron(0 24 * * ? *)", "hours value 24 is outside 0-23"),
        ("cron(0 10 0 * ? *)", "day-of-month value 0 is outside 1-31"),
        ("cron(0 10 32 * ? *)", "day-of-month value 32"),
        ("cron(0 10 * 13 ? *)", "month value 13"),
        ("cron(0 10 * FOO ? *)", "month value 'FOO'"),
        ("cron(0 10 ? * 8 *)", "day-of-week value 8"),
        ("cron(0 10 ? * 0 *)", "day-of-week value 0"),
        ("cron(0 10 * * ? 1969)", "year value 1969"),
        ("cron(0 10 * * ? 2200)", "year value 2200"),
        ("cron(0 10 ? * 3#1,6#3 *)", "single expression"),
        ("cron(0 10 ? * 3#6 *)", "1-5"),
        ("cron(0 10 # * ? *)", "does not take #"),
        ("cron(0 10 L,15 * ? *)", "L and W stand alone"),
        ("cron(0 10 32W * ? *)", "outside 1-31"),
        ("cron(0 10 ? * 8L *)", "L stands alone"),
        ("cron(0 10 ? * W *)", "day-of-week value 'W'"),
        ("cron(0 17-9 * * ? *)", "runs backwards"),
        ("cron(0/0 10 * * ? *)", "increment"),
        ("cron(0/61 10 * * ? *)", "larger than the field's range"),
        ("cron(0,,5 10 * * ? *)", "empty list item"),
        ("cron(? 10 * * ? *)", "minutes value '?'"),
        ("cron(0 10 * * ? *", "closed by )"),
        ("at(2026-12-01 09:30:00)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2026-12-01T09:30)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2026-12-01T09:30:00Z)", "at(yyyy-mm-ddThh:mm:ss)"),
        ("at(2026-02-30T09:30:00)", "not a real date"),
        ("at(2027-02-29T09:30:00)", "not a real date"),
        ("at(2026-12-01T24:00:00)", "not a real date"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression: str, says: str) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        parse_schedule(expression)
    assert says in str(refused.value)
    assert refused.value.field == "schedule"
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize("value", [None, 5, ["rate(5 minutes)"]])
def test_a_schedule_that_is_not_a_string_is_refused(value: object) -> None:
    with pytest.raises(InvalidSchedule):
        parse_schedule(value)


def test_parsed_shapes() -> None:
    assert parse_schedule("rate(1 hour)") == RateSchedule(1, "hours")
    assert parse_schedule("rate(10 minutes)").period == timedelta(minutes=10)  # type: ignore[union-attr]
    assert parse_schedule("at(2026-12-01T09:30:00)") == AtSchedule(datetime(2026, 12, 1, 9, 30))
    cron = parse_schedule("cron(0/20 9-11 ? * MON-FRI 2027)")
    assert isinstance(cron, CronSchedule)
    assert cron.minutes == {0, 20, 40} and cron.hours == {9, 10, 11} and cron.years == {2027}
    assert cron.day_of_month is None and cron.day_of_week is not None
    assert cron.day_of_week.values == {2, 3, 4, 5, 6}


@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Etc/GMT+5"]
)
def test_iana_time_zones_are_accepted(zone: str) -> None:
    assert validate_timezone(zone).key == zone


@pytest.mark.parametrize(
    "zone", ["", "Mars/Olympus", "europe/paris", "localtime", "../etc/passwd", "+02:00", None, 1]
)
def test_other_time_zones_are_refused_on_the_timezone_field(zone: object) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        validate_timezone(zone)
    assert refused.value.field == "timezone"
    assert "IANA" in str(refused.value)


def test_validate_checks_both_parts() -> None:
    assert validate("rate(5 minutes)") == RateSchedule(5, "minutes")
    with pytest.raises(InvalidSchedule) as refused:
        validate("rate(5 minutes)", "Nowhere/Town")
    assert refused.value.field == "timezone"


# --- fire times -------------------------------------------------------------------------------


def test_rate_without_start_fires_one_period_after_and_on() -> None:
    assert next_fire_times("rate(5 minutes)", "UTC", utc(2026, 11, 30, 7, 0, 30), 3) == [
        utc(2026, 11, 30, 7, 5, 30),
        utc(2026, 11, 30, 7, 10, 30),
        utc(2026, 11, 30, 7, 15, 30),
    ]


def test_rate_with_start_keeps_its_phase() -> None:
    start = utc(2026, 11, 30, 6, 0, 0)
    after = utc(2026, 11, 30, 7, 7, 0)
    assert next_fire_times("rate(10 minutes)", "UTC", after, 2, start=start) == [
        utc(2026, 11, 30, 7, 10),
        utc(2026, 11, 30, 7, 20),
    ]
    # Exactly on a fire instant: strictly after, so the next one.
    assert next_fire_times("rate(10 minutes)", "UTC", utc(2026, 11, 30, 7, 10), 1, start=start) == [
        utc(2026, 11, 30, 7, 20)
    ]
    # A start still ahead is the first fire.
    assert next_fire_times("rate(1 hour)", "UTC", start - timedelta(hours=3), 1, start=start) == [
        start
    ]


def test_rate_in_days_is_24_hours_across_a_dst_change() -> None:
    after = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)
    times = next_fire_times("rate(1 day)", "America/New_York", after, 3)
    assert [b - a for a, b in zip([after, *times], times, strict=False)] == [timedelta(days=1)] * 3


def test_cron_fires_on_whole_minutes_strictly_after() -> None:
    assert next_fire_times("cron(0/15 * * * ? *)", "UTC", utc(2026, 11, 30, 7, 0, 0), 3) == [
        utc(2026, 11, 30, 7, 15),
        utc(2026, 11, 30, 7, 30),
        utc(2026, 11, 30, 7, 45),
    ]


def test_cron_weekdays_skip_the_weekend() -> None:
    # 2026-12-04 is a Friday.
    assert next_fire_times("cron(0 18 ? * MON-FRI *)", "UTC", utc(2026, 12, 4, 18, 0), 2) == [
        utc(2026, 12, 7, 18, 0),
        utc(2026, 12, 8, 18, 0),
    ]


def test_cron_in_a_timezone_is_read_on_that_wall_clock() -> None:
    # 09:00 in Kolkata (UTC+05:30) is 03:30 UTC.
    assert next_fire_times("cron(0 9 * * ? *)", "Asia/Kolkata", utc(2026, 11, 30, 7, 0), 1) == [
        utc(2026, 12, 1, 3, 30)
    ]


def test_cron_across_spring_forward_keeps_wall_time_and_skips_the_missing_hour() -> None:
    # America/New_York moves 02:00 EST → 03:00 EDT on Sunday 2026-03-08.
    after = utc(2026, 3, 6, 15, 0)
    daily_nine = next_fire_times("cron(0 9 * * ? *)", "America/New_York", after, 4)
    assert daily_nine == [
        utc(2026, 3, 7, 14, 0),  # 09:00 EST
        utc(2026, 3, 8, 13, 0),  # 09:00 EDT: the same wall time, an hour earlier in UTC
        utc(2026, 3, 9, 13, 0),
        utc(2026, 3, 10, 13, 0),
    ]
    half_past_two = next_fire_times("cron(30 2 * * ? *)", "America/New_York", after, 3)
    assert half_past_two == [
        utc(2026, 3, 7, 7, 30),
        # 02:30 on 03-08 never happens on that clock: no fire that day.
        utc(2026, 3, 9, 6, 30),
        utc(2026, 3, 10, 6, 30),
    ]


def test_cron_across_fall_back_fires_a_repeated_wall_time_once() -> None:
    # Europe/Berlin moves 03:00 CEST → 02:00 CET on Sunday 2026-10-25; 02:30 happens twice.
    after = utc(2026, 10, 24, 12, 0)
    assert next_fire_times("cron(30 2 * * ? *)", "Europe/Berlin", after, 2) == [
        utc(2026, 10, 25, 0, 30),  # the first 02:30 (CEST, UTC+2) only
        utc(2026, 10, 26, 1, 30),  # 02:30 CET
    ]
    hourly = next_fire_times("cron(0 * * * ? *)", "Europe/Berlin", utc(2026, 10, 24, 23, 30), 4)
    assert hourly == [
        utc(2026, 10, 25, 0, 0),  # 02:00 CEST
        utc(2026, 10, 25, 2, 0),  # 03:00 CET: the second 02:00 is not fired again
        utc(2026, 10, 25, 3, 0),
        utc(2026, 10, 25, 4, 0),
    ]


@pytest.mark.parametrize(
    ("expression", "first_three"),
    [
        ("cron(0 12 L * ? *)", [utc(2027, 1, 31, 12), utc(2027, 2, 28, 12), utc(2027, 3, 31, 12)]),
        # Last weekday: 2027-01-31 is a Sunday, 2027-02-28 a Sunday, 2027-03-31 a Wednesday.
        ("cron(0 12 LW * ? *)", [utc(2027, 1, 29, 12), utc(2027, 2, 26, 12), utc(2027, 3, 31, 12)]),
        # Nearest weekday to the 1st: 2027-05-01 is a Saturday → Monday the 3rd (stays in May).
        ("cron(0 12 1W * ? *)", [utc(2027, 1, 1, 12), utc(2027, 2, 1, 12), utc(2027, 3, 1, 12)]),
        (
            "cron(0 12 ? * 6#3 *)",
            [utc(2027, 1, 15, 12), utc(2027, 2, 19, 12), utc(2027, 3, 19, 12)],
        ),
        ("cron(0 12 ? * 2L *)", [utc(2027, 1, 25, 12), utc(2027, 2, 22, 12), utc(2027, 3, 29, 12)]),
        ("cron(0 12 ? * L *)", [utc(2027, 1, 2, 12), utc(2027, 1, 9, 12), utc(2027, 1, 16, 12)]),
        ("cron(0 0 29 FEB ? *)", [utc(2028, 2, 29), utc(2032, 2, 29), utc(2036, 2, 29)]),
        ("cron(0 0 31 * ? 2027)", [utc(2027, 1, 31), utc(2027, 3, 31), utc(2027, 5, 31)]),
    ],
)
def test_cron_special_days(expression: str, first_three: list[datetime]) -> None:
    assert next_fire_times(expression, "UTC", utc(2026, 12, 31, 23, 59), 3) == first_three


def test_nearest_weekday_does_not_leave_the_month() -> None:
    # 2027-05-01 is a Saturday: 1W is Monday 2027-05-03, not Friday 2027-04-30.
    assert next_fire_times("cron(0 12 1W 5 ? 2027)", "UTC", utc(2027, 1, 1), 1) == [
        utc(2027, 5, 3, 12)
    ]


def test_a_cron_whose_years_run_out_returns_fewer_times() -> None:
    assert next_fire_times("cron(0 0 1 1 ? 2027)", "UTC", utc(2026, 1, 1), 5) == [utc(2027, 1, 1)]
    assert next_fire_times("cron(0 0 1 1 ? 2025)", "UTC", utc(2026, 1, 1), 5) == []
    assert next_fire_times("cron(0 0 30 FEB ? *)", "UTC", utc(2026, 1, 1), 1) == []  # never


def test_at_fires_once_in_its_timezone() -> None:
    expression = "at(2026-12-01T09:30:00)"
    assert next_fire_times(expression, "Europe/Paris", utc(2026, 11, 30), 3) == [
        utc(2026, 12, 1, 8, 30)
    ]
    assert next_fire_times(expression, "Europe/Paris", utc(2026, 12, 1, 8, 30), 3) == []


def test_after_in_any_offset_is_the_same_instant() -> None:
    paris = datetime(2026, 11, 30, 8, 0, tzinfo=validate_timezone("Europe/Paris"))
    assert next_fire_times("cron(0 * * * ? *)", "UTC", paris, 1) == [utc(2026, 11, 30, 8, 0)]


def test_naive_after_and_unbounded_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire_times("rate(5 minutes)", "UTC", datetime(2026, 11, 30), 1)
    with pytest.raises(ValueError, match="count"):
        next_fire_times("rate(5 minutes)", "UTC", utc(2026, 11, 30), 10_000)
    assert next_fire_times("rate(5 minutes)", "UTC", utc(2026, 11, 30), 0) == []


def test_every_minute_for_a_thousand_fires_is_contiguous() -> None:
    times = next_fire_times("cron(* * * * ? *)", "America/New_York", utc(2026, 11, 1, 5, 0), 1000)
    assert len(times) == 1000 and times == sorted(set(times))


# --- the scheduler function's input ---------------------------------------------------------


def test_scheduler_invocation_sample_reads() -> None:
    event = json.loads((EVENTS / "scheduler-invocation.json").read_text())
    firing = ScheduledFiring.from_event(event)
    assert firing == ScheduledFiring("rule_19ad3b8e2f0c4a1d9e7b6f52", utc(2026, 11, 30, 7, 0))


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ([], "JSON object"),
        ({"scheduled_time": "2026-11-30T07:00:00Z"}, "rule_id"),
        ({"rule_id": "r", "scheduled_time": None}, "scheduled_time"),
        ({"rule_id": "r", "scheduled_time": "yesterday"}, "ISO-8601"),
        ({"rule_id": "r", "scheduled_time": "2026-11-30T07:00:00"}, "offset"),
        ({"rule_id": "r" * 201, "scheduled_time": "2026-11-30T07:00:00Z"}, "rule_id of 201"),
        ({"rule_id": "r", "scheduled_time": "2026-11-30T07:00:00Z" + " " * 99}, "of 119 char"),
    ],
)
def test_bad_scheduler_input_is_refused(event: object, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        ScheduledFiring.from_event(event)
    assert len(str(refused.value)) < 200  # a long input is named by its length, not echoed


@pytest.mark.parametrize(
    "expression",
    ["cron(" + ",".join(["0"] * 130) + " 0 * * ? *)", "cron(0\t0\n* * ? *)", "rate(1\thour)"],
    ids=["longer than Scheduler takes", "a tab and a newline", "a tab in a rate"],
)
def test_an_expression_scheduler_would_refuse_is_refused_here(expression: str) -> None:
    # Scheduler takes at most 256 characters and no whitespace but the spaces between fields:
    # accepted here, CreateSchedule would refuse it after the rule was written.
    with pytest.raises(InvalidSchedule):
        validate(expression)
