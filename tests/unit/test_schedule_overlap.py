"""Schedules behave like a scheduler: an occasion's overlap with the rule's previous lease
(skip, allow, cancel_previous), occasions missed while the service was away caught up within
the rule's window, and a manual fire that is never skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease
from tenure.domain.rules.rule import Rule, firing_job_id
from tenure.domain.states import LeaseState

from tests.unit.rules_support import FakeSchedules, event_trigger
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, T0, Rig, as_lease

HOURLY = {"schedule": "rate(1 hour)"}
SUBJECT = {"kind": "task", "title": "hourly"}
# How late after its occasion a delivery arrives in these tests (Scheduler's own delay).
DELIVERY_DELAY_S = 2


def _rule(rig: Rig, **top: Any) -> Rule:
    return rig.svc.rules.create_rule(ADMIN, SPACE, "hourly", POOL, SUBJECT, HOURLY, **top)


def _occasion(hours: int) -> datetime:
    return datetime.fromtimestamp(T0 / 1000, tz=UTC) + timedelta(hours=hours)


def _now_at(rig: Rig, hours: int, late_s: float = DELIVERY_DELAY_S) -> None:
    """Move the clock to just after the occasion `hours` after T0 (it only moves forward)."""
    target = T0 + hours * 3_600_000 + int(late_s * 1000)
    assert target >= rig.clock.now_ms()
    rig.clock.advance((target - rig.clock.now_ms()) / 1000)


def _deliver(rig: Rig, rule: Rule, hours: int) -> Any:
    """Scheduler invokes the function for the occasion `hours` after T0, on time."""
    _now_at(rig, hours)
    return rig.svc.firings.fire_scheduled(rule.id, _occasion(hours))


def _leases(rig: Rig) -> list[Lease]:
    """Every lease of the space, oldest first."""
    page = rig.svc.operator.list_leases(ADMIN, SPACE, 100, None, None, None).leases
    return sorted(page, key=lambda x: (x.created_at, x.id))


def _complete(rig: Rig, lease: Lease) -> None:
    claimed = rig.claim("w1")
    assert claimed.lease.id == lease.id
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})


@pytest.fixture(autouse=True)
def _scheduler(schedules: FakeSchedules) -> FakeSchedules:
    return schedules


# ----------------------------------------------------------------------------- overlap


def test_a_new_rule_skips_an_occasion_while_its_previous_lease_is_open(rig: Rig) -> None:
    rule = _rule(rig)
    assert rig.svc.rules.get_rule(READER, rule.id).overlap == "skip"
    first = _deliver(rig, rule, 1)
    assert isinstance(first, Lease)
    assert _deliver(rig, rule, 2) is None
    assert [x.id for x in _leases(rig)] == [first.id]
    _complete(rig, first)
    third = _deliver(rig, rule, 3)
    assert isinstance(third, Lease) and third.id != first.id
    assert len(_leases(rig)) == 2


def test_a_skipped_occasion_delivered_again_still_mints_nothing(rig: Rig) -> None:
    rule = _rule(rig)
    first = _deliver(rig, rule, 1)
    assert _deliver(rig, rule, 2) is None
    _complete(rig, first)
    # Scheduler retries the skipped occasion once the first lease has ended.
    assert rig.svc.firings.fire_scheduled(rule.id, _occasion(2)) is None
    assert len(_leases(rig)) == 1


def test_allow_mints_every_occasion(rig: Rig) -> None:
    rule = _rule(rig, overlap="allow")
    minted = [_deliver(rig, rule, h) for h in (1, 2, 3)]
    assert all(isinstance(x, Lease) for x in minted)
    assert len({x.id for x in minted}) == 3
    assert all(x.state is LeaseState.PENDING for x in _leases(rig))


def test_cancel_previous_cancels_a_pending_lease_and_mints_at_once(rig: Rig) -> None:
    rule = _rule(rig, overlap="cancel_previous")
    first = _deliver(rig, rule, 1)
    second = _deliver(rig, rule, 2)
    assert isinstance(second, Lease) and second.state is LeaseState.PENDING
    assert rig.lease(first.id).state is LeaseState.CANCELLED


def test_cancel_previous_asks_a_held_lease_to_stop(rig: Rig) -> None:
    rule = _rule(rig, overlap="cancel_previous")
    first = _deliver(rig, rule, 1)
    assert rig.claim("w1").lease.id == first.id
    second = _deliver(rig, rule, 2)
    assert isinstance(second, Lease)
    held = rig.lease(first.id)
    assert (held.state, held.revoke) == (LeaseState.CANCELLING, "cancel")
    cancelled = [e for e in rig.events(first.task_id or "") if e.type == "lease.cancelling"]
    assert cancelled and cancelled[0].data.get("by") == f"rule:{rule.id}"


def test_a_manual_fire_is_never_skipped_and_counts_as_the_previous_lease(rig: Rig) -> None:
    rule = _rule(rig)
    first = _deliver(rig, rule, 1)
    fired = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert isinstance(fired, Lease) and fired.id != first.id
    _complete(rig, first)
    # The fired lease is open: the next occasion is skipped behind it.
    assert _deliver(rig, rule, 2) is None
    assert len(_leases(rig)) == 2


def test_an_expired_previous_lease_whose_run_was_requeued_still_counts_as_open(
    rig: Rig,
) -> None:
    rule = _rule(rig)
    first = _deliver(rig, rule, 1)
    rig.claim("w1")
    rig.advance(3600)
    rig.sweep()  # the worker vanished: the lease expires and its run is requeued
    assert rig.lease(first.id).state is not LeaseState.PENDING
    assert _deliver(rig, rule, 3) is None


# ----------------------------------------------------------------------- missed occasions


def test_the_service_away_catches_up_occasions_within_the_window_oldest_first(
    rig: Rig,
) -> None:
    rule = _rule(rig, overlap="allow", catchup_window_seconds=3 * 3600)
    first = _deliver(rig, rule, 1)
    # The service is away from just after 01:00 until just after 06:00: nothing invokes it.
    sixth = _deliver(rig, rule, 6)
    assert isinstance(first, Lease) and isinstance(sixth, Lease)
    # 02:00 and 03:00 lie more than three hours before the service came back; 04:00 and 05:00
    # are caught up, oldest first, before 06:00.
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    assert occasions == [_occasion(h) for h in (1, 4, 5, 6)]


def test_missed_occasions_delivered_late_one_by_one_are_judged_by_the_window(
    rig: Rig,
) -> None:
    rule = _rule(rig, overlap="allow", catchup_window_seconds=3 * 3600)
    _deliver(rig, rule, 1)
    _now_at(rig, 6)
    # Scheduler (or the local loop) delivers what it could not while the service was away.
    answers = [rig.svc.firings.fire_scheduled(rule.id, _occasion(h)) for h in (2, 3, 4, 5, 6)]
    assert [a is not None for a in answers] == [False, False, True, True, True]
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    assert occasions == [_occasion(h) for h in (1, 4, 5, 6)]


def test_with_no_window_missed_occasions_are_not_minted(rig: Rig) -> None:
    rule = _rule(rig, overlap="allow")
    _deliver(rig, rule, 1)
    _now_at(rig, 6)
    assert rig.svc.firings.fire_scheduled(rule.id, _occasion(4)) is None  # late, not caught up
    assert isinstance(rig.svc.firings.fire_scheduled(rule.id, _occasion(6)), Lease)
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    assert occasions == [_occasion(1), _occasion(6)]


def test_caught_up_occasions_are_each_subject_to_overlap(rig: Rig) -> None:
    rule = _rule(rig, catchup_window_seconds=3 * 3600)  # skip
    first = _deliver(rig, rule, 1)
    _complete(rig, first)
    assert _deliver(rig, rule, 6) is None  # 04:00 caught up; 05:00 and 06:00 skipped behind it
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    assert occasions == [_occasion(1), _occasion(4)]


def test_an_occasion_is_caught_up_once_however_often_the_service_resumes(rig: Rig) -> None:
    rule = _rule(rig, overlap="allow", catchup_window_seconds=3 * 3600)
    _deliver(rig, rule, 1)
    _now_at(rig, 6)
    for _ in range(3):
        rig.svc.firings.fire_scheduled(rule.id, _occasion(6))
        rig.svc.firings.fire_scheduled(rule.id, _occasion(5))
    assert len(_leases(rig)) == 4


def _occasion_of(rig: Rig, lease: Lease) -> datetime:
    """The scheduled time a lease was minted for: the one whose firing job id it carries."""
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.rule_id is not None
    for hours in range(0, 48):
        at = _occasion(hours)
        occasion = "schedule:" + at.strftime("%Y-%m-%dT%H:%M:%SZ")
        if firing_job_id(job.rule_id, occasion) == lease.job_id:
            return at
    raise AssertionError(f"lease {lease.id} was not minted for an hourly occasion")


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("top", "field"),
    [
        ({"overlap": "sometimes"}, "overlap"),
        ({"overlap": ""}, "overlap"),
        ({"overlap": 1}, "overlap"),
        ({"catchup_window_seconds": -1}, "catchup_window_seconds"),
        ({"catchup_window_seconds": 86_401}, "catchup_window_seconds"),
        ({"catchup_window_seconds": True}, "catchup_window_seconds"),
        ({"catchup_window_seconds": 1.5}, "catchup_window_seconds"),
    ],
)
def test_a_bad_schedule_setting_is_validation_failed_naming_it(
    rig: Rig, top: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        _rule(rig, **top)
    assert refused.value.message.startswith(f"{field}:"), refused.value.message
    rule = _rule(rig)
    with pytest.raises(ValidationFailed):
        rig.svc.rules.update_rule(ADMIN, rule.id, top)
    assert rig.svc.rules.get_rule(READER, rule.id).overlap == "skip"


def test_an_inbound_rule_takes_no_schedule_settings(rig: Rig) -> None:
    with pytest.raises(ValidationFailed) as refused:
        rig.svc.rules.create_rule(
            ADMIN, SPACE, "events", POOL, SUBJECT, event_trigger(), overlap="allow"
        )
    assert refused.value.message.startswith("overlap:")


def test_patch_changes_the_overlap_and_the_window(rig: Rig) -> None:
    rule = _rule(rig)
    changed = rig.svc.rules.update_rule(
        ADMIN, rule.id, {"overlap": "cancel_previous", "catchup_window_seconds": 600}
    )
    assert (changed.overlap, changed.catchup_window_seconds) == ("cancel_previous", 600)
    got = rig.svc.rules.get_rule(READER, rule.id)
    assert (got.overlap, got.catchup_window_seconds) == ("cancel_previous", 600)


@pytest.mark.parametrize("schedule", ["rate(1 hour)", "cron(0 * * * ? *)"])
def test_a_resuming_service_catches_up_at_once_not_at_the_next_occasion(
    rig: Rig, schedule: str
) -> None:
    rule = rig.svc.rules.create_rule(
        ADMIN,
        SPACE,
        "hourly",
        POOL,
        SUBJECT,
        {"schedule": schedule},
        overlap="allow",
        catchup_window_seconds=3 * 3600,
    )
    _deliver(rig, rule, 1)
    _now_at(rig, 6, late_s=600)  # back ten minutes past 06:00, before any invocation
    assert rig.svc.firings.catch_up() == 1
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    assert occasions == [_occasion(h) for h in (1, 4, 5, 6)]
    assert rig.svc.firings.catch_up() == 0  # nothing missed any more
    # Scheduler's own delivery of 06:00, late, finds it minted.
    assert isinstance(rig.svc.firings.fire_scheduled(rule.id, _occasion(6)), Lease)
    assert len(_leases(rig)) == 4


def test_a_resuming_service_mints_nothing_missed_without_a_window(rig: Rig) -> None:
    rule = _rule(rig, overlap="allow")
    _deliver(rig, rule, 1)
    _now_at(rig, 6, late_s=600)
    assert rig.svc.firings.catch_up() == 0
    assert len(_leases(rig)) == 1


def test_the_previous_lease_check_is_a_bounded_read(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = _rule(rig)
    _deliver(rig, rule, 1)
    for _ in range(20):  # however many leases the rule's pool and space hold
        rig.task()
    calls: list[str] = []
    for name in ("get_lease", "get_job", "get_leases", "list_leases", "queue_page"):
        real = getattr(rig.store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(rig.store, name, counted)
    assert _deliver(rig, rule, 2) is None  # skipped: the first lease is open
    # The delivered occasion's job (not minted yet), then the rule's noted previous lease.
    assert calls == ["get_job", "get_lease"]


@pytest.mark.parametrize("change", ["disabled, then enabled again", "its schedule changed"])
def test_occasions_before_an_operators_change_are_not_caught_up(rig: Rig, change: str) -> None:
    # Catching up makes good occasions the service missed while it was away. An operator who
    # disabled a rule meant its occasions not to run, and the occasions a new schedule would
    # have had before it was given never were the rule's: neither is minted afterwards.
    rule = _rule(rig, overlap="allow", catchup_window_seconds=6 * 3600)
    _deliver(rig, rule, 1)
    if change == "disabled, then enabled again":
        rig.svc.rules.update_rule(ADMIN, rule.id, {"enabled": False})
        _now_at(rig, 4, late_s=30)
        rig.svc.rules.update_rule(ADMIN, rule.id, {"enabled": True})
    else:
        _now_at(rig, 4, late_s=30)
        rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": {"schedule": "rate(2 hours)"}})
    _deliver(rig, rule, 5 if change == "disabled, then enabled again" else 6)
    occasions = [_occasion_of(rig, x) for x in _leases(rig)]
    later = 5 if change == "disabled, then enabled again" else 6
    assert occasions == [_occasion(1), _occasion(later)]
