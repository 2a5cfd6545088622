"""Rules on the fake store: managing them, schedules in step, firings once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tenure.app.rules.firings import AHEAD_SKIPS
from tenure.domain.errors import AlreadyExists, Forbidden, NotFound, Unavailable, ValidationFailed
from tenure.domain.model import Pool
from tenure.domain.rules.rule import Rule
from tenure.domain.states import LeaseState, PoolKind, SubjectKind

from tests.unit.rules_support import (
    NIGHTLY,
    FakeSchedules,
    check_rule_pages,
    event_trigger,
    inbox_trigger,
    make_rule,
)
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, Rig, as_lease

# ------------------------------------------------------------------------------ manage


def test_an_inbound_rule_is_stored_with_its_kind_and_no_schedule(rig: Rig) -> None:
    rule = make_rule(rig)
    assert (rule.kind, rule.schedule_name, rule.enabled) == ("inbound", None, True)
    assert rig.svc.rules.get_rule(READER, rule.id) == rule
    assert rule.trigger == {"topic": "email.received", "match": {"to": "support@example.com"}}


def test_a_scheduled_rule_gets_exactly_one_schedule(rig: Rig, schedules: FakeSchedules) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    assert rule.kind == "scheduled" and rule.schedule_name is not None
    assert schedules.held == {
        rule.schedule_name: {
            "expression": "cron(0 2 * * ? *)",
            "timezone": "Europe/Paris",
            "rule_id": rule.id,
            "state": "ENABLED",
        }
    }


@pytest.mark.parametrize(
    ("trigger", "field"),
    [
        ({"schedule": "cron(0 2 * * *)"}, "trigger.schedule"),
        ({"schedule": "rate(0 minutes)"}, "trigger.schedule"),
        ({"schedule": "at(2026-13-01T00:00:00)"}, "trigger.schedule"),
        ({"schedule": "rate(1 hour)", "timezone": "Mars/Olympus"}, "trigger.timezone"),
        ({"schedule": "rate(1 hour)", "extra": 1}, "trigger.extra"),
        ({"topic": "email.received", "match": {"from": "@"}}, "trigger.match.from"),
        ({"topic": "email.received", "match": {"cc": "x@y"}}, "trigger.match"),
        ({"topic": "email.received", "match": {"to": "nobody"}}, "trigger.match.to"),
        ({"topic": ""}, "trigger.topic"),
        ({}, "trigger"),
    ],
)
def test_a_bad_trigger_is_validation_failed_naming_the_field(
    rig: Rig, schedules: FakeSchedules, trigger: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        make_rule(rig, trigger=trigger)
    assert refused.value.message.startswith(f"{field}:") or refused.value.message.startswith(
        f"{field} "
    )
    assert rig.svc.rules.list_rules(READER, SPACE).rules == [] and schedules.held == {}


def test_an_unknown_pool_or_a_pool_of_another_space_is_validation_failed(rig: Rig) -> None:
    with pytest.raises(ValidationFailed, match=r"^pool: 'nope' does not exist"):
        make_rule(rig, pool="nope")
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="theirs", space="OTHER", kind=PoolKind.COMMAND, created_at=0)
    )
    with pytest.raises(ValidationFailed, match=r"^pool: 'theirs' is not a pool of space 'OPS'$"):
        make_rule(rig, pool="theirs")


@pytest.mark.parametrize(
    ("subject", "field"),
    [
        ({"kind": "job"}, "subject.kind"),
        ({"kind": "task"}, "subject.title"),
        ({"kind": "workflow", "slug": "missing"}, "subject.slug"),
        ({"kind": "task", "title": "t", "workflow": "missing"}, "subject.workflow"),
        ({"kind": "space", "slug": "x"}, "subject.slug"),
        ({"kind": "task", "title": "t", "priority": 10}, "subject.priority"),
        ({"kind": "space", "priority": "9"}, "subject.priority"),
    ],
)
def test_a_bad_subject_is_validation_failed_naming_the_field(
    rig: Rig, subject: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailed, match=rf"^{field}:"):
        make_rule(rig, subject=subject)


def test_a_taken_name_in_the_space_is_already_exists_also_on_rename(rig: Rig) -> None:
    make_rule(rig, "inbox")
    with pytest.raises(AlreadyExists):
        make_rule(rig, "inbox")
    other = make_rule(rig, "other")
    with pytest.raises(AlreadyExists):
        rig.svc.rules.update_rule(ADMIN, other.id, {"name": "inbox"})
    renamed = rig.svc.rules.update_rule(ADMIN, other.id, {"name": "renamed"})
    assert [r.name for r in rig.svc.rules.list_rules(READER, SPACE).rules] == ["inbox", "renamed"]
    assert renamed.version == other.version + 1
    make_rule(rig, "other")  # the old name is free again


def test_the_same_name_in_another_space_is_fine(rig: Rig) -> None:
    make_rule(rig, "inbox")
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="theirs", space="OTHER", kind=PoolKind.COMMAND, created_at=0)
    )
    rig.svc.rules.create_rule(ADMIN, "OTHER", "inbox", "theirs", {"kind": "space"}, event_trigger())
    assert [r.space for r in rig.svc.rules.list_rules(READER, "OTHER").rules] == ["OTHER"]


def test_unknown_rule_is_not_found(rig: Rig) -> None:
    for call in (
        lambda: rig.svc.rules.get_rule(READER, "rule_missing"),
        lambda: rig.svc.rules.update_rule(ADMIN, "rule_missing", {"enabled": False}),
        lambda: rig.svc.rules.delete_rule(ADMIN, "rule_missing"),
        lambda: rig.svc.firings.fire_rule(MEMBER, "rule_missing"),
    ):
        with pytest.raises(NotFound):
            call()


def test_only_admins_manage_rules_and_members_fire_them(rig: Rig) -> None:
    rule = make_rule(rig)
    with pytest.raises(Forbidden):
        rig.svc.rules.create_rule(MEMBER, SPACE, "x", POOL, {"kind": "space"}, inbox_trigger())
    with pytest.raises(Forbidden):
        rig.svc.rules.update_rule(MEMBER, rule.id, {"enabled": False})
    with pytest.raises(Forbidden):
        rig.svc.rules.delete_rule(MEMBER, rule.id)
    with pytest.raises(Forbidden):
        rig.svc.firings.fire_rule(READER, rule.id)
    assert rig.svc.firings.fire_rule(MEMBER, rule.id).state is LeaseState.PENDING


def test_disabling_a_scheduled_rule_disables_its_schedule_and_enabling_restores_it(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    assert rule.schedule_name is not None
    rig.svc.rules.update_rule(ADMIN, rule.id, {"enabled": False})
    assert schedules.held[rule.schedule_name]["state"] == "DISABLED"
    rig.svc.rules.update_rule(
        ADMIN, rule.id, {"enabled": True, "trigger": {"schedule": "rate(5 minutes)"}}
    )
    assert schedules.held[rule.schedule_name] == {
        "expression": "rate(5 minutes)",
        "timezone": "UTC",
        "rule_id": rule.id,
        "state": "ENABLED",
    }


def test_turning_a_scheduled_rule_inbound_deletes_its_schedule_and_back_creates_one(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    inbound = rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": event_trigger()})
    assert (inbound.kind, inbound.schedule_name, schedules.held) == ("inbound", None, {})
    again = rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": NIGHTLY})
    assert again.schedule_name in schedules.held


def test_deleting_a_rule_deletes_its_schedule_and_frees_its_name(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    rig.svc.rules.delete_rule(ADMIN, rule.id)
    assert schedules.held == {}
    with pytest.raises(NotFound):
        rig.svc.rules.get_rule(READER, rule.id)
    make_rule(rig, "nightly", trigger=NIGHTLY)


def test_a_schedule_that_cannot_be_made_leaves_no_rule_behind(
    rig: Rig, schedules: FakeSchedules
) -> None:
    schedules.fail_next = True
    with pytest.raises(RuntimeError):
        make_rule(rig, "nightly", trigger=NIGHTLY)
    assert rig.svc.rules.list_rules(READER, SPACE).rules == []
    make_rule(rig, "nightly", trigger=NIGHTLY)


def test_a_schedule_update_that_fails_puts_the_rule_back(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    schedules.fail_next = True
    with pytest.raises(RuntimeError):
        rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": {"schedule": "rate(1 hour)"}})
    assert rig.svc.rules.get_rule(READER, rule.id).trigger == NIGHTLY


# -------------------------------------------------------------------------------- fire


def test_fire_on_a_task_subject_files_a_new_task_each_time_without_a_trigger(rig: Rig) -> None:
    rule = make_rule(rig)
    first = rig.svc.firings.fire_rule(MEMBER, rule.id)
    second = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert first.task_id != second.task_id and first.subject_kind is SubjectKind.TASK
    task = rig.store.get_task(first.task_id or "")
    assert task is not None and task.title == "Reply to :"  # an event without data's fill
    won = rig.claim()
    bundle = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert "trigger" not in bundle and bundle["subject"]["kind"] == "task"


def test_a_rule_with_a_priority_mints_leases_claimed_before_the_default(rig: Rig) -> None:
    plain = rig.svc.firings.fire_rule(MEMBER, make_rule(rig, "plain").id)
    urgent_rule = make_rule(rig, "urgent", subject={"kind": "task", "title": "t", "priority": 9})
    urgent = rig.svc.firings.fire_rule(MEMBER, urgent_rule.id)
    assert urgent.priority == 9 and plain.priority is None
    assert [rig.claim().lease.id, rig.claim().lease.id] == [urgent.id, plain.id]


def test_fire_on_an_inbound_rule_fills_subject_and_from_as_an_event_without_them(
    rig: Rig, schedules: FakeSchedules
) -> None:
    subject = {"kind": "task", "title": "Mail: {subject} from {from}", "body": "{from} wrote"}
    rule = make_rule(rig, "deploys", subject=subject, trigger={"topic": "deploy.finished"})
    fired = rig.svc.firings.fire_rule(MEMBER, rule.id)
    (posted,) = rig.svc.firings.post_event(
        MEMBER, SPACE, "deploy.finished", {"sha": "1"}, None, None
    )
    tasks = [rig.store.get_task(x.task_id or "") for x in (fired, posted)]
    assert [(t.title, t.body) for t in tasks if t] == [("Mail:  from", "wrote")] * 2
    # A scheduled rule fired by hand reads as its schedule's firing: no data, as written.
    nightly = make_rule(rig, "nightly", subject=subject, trigger=NIGHTLY)
    task = rig.store.get_task(rig.svc.firings.fire_rule(MEMBER, nightly.id).task_id or "")
    assert task is not None and task.title == "Mail: {subject} from {from}"


def test_fire_on_a_workflow_subject_mints_a_workflow_lease(rig: Rig) -> None:
    rig.svc.spaces.create_workflow(ADMIN, SPACE, "triage", "Triage", "sort the inbox")
    rule = make_rule(rig, subject={"kind": "workflow", "slug": "triage"})
    lease = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert (lease.subject_kind, lease.task_id, lease.workflow) == (
        SubjectKind.WORKFLOW,
        None,
        "triage",
    )
    won = rig.claim()
    subject = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)["subject"]
    assert subject["kind"] == "workflow" and subject["slug"] == "triage"
    assert subject["description"] == "sort the inbox"


def test_fire_on_a_space_subject_mints_a_space_lease(rig: Rig) -> None:
    rule = make_rule(rig, subject={"kind": "space"})
    lease = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert (lease.subject_kind, lease.subject_id, lease.task_id, lease.workflow) == (
        SubjectKind.SPACE,
        SPACE,
        None,
        None,
    )
    won = rig.claim()
    assert rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)["subject"] == {
        "kind": "space",
        "key": SPACE,
        "name": "Operations",
        "activity": rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)["subject"][
            "activity"
        ],
    }


def test_a_scheduled_time_mints_one_lease_however_often_it_is_delivered(
    rig: Rig, schedules: FakeSchedules
) -> None:
    # Overlap allowed: the second occasion mints though the first one's lease is still open.
    rule = make_rule(rig, "nightly", trigger=NIGHTLY, subject={"kind": "space"}, overlap="allow")
    at = datetime(2026, 1, 2, 1, 0, tzinfo=UTC)
    rig.advance(at.timestamp() - rig.clock.now_ms() / 1000)  # delivered at its time
    first = rig.svc.firings.fire_scheduled(rule.id, at)
    again = rig.svc.firings.fire_scheduled(rule.id, at)
    assert first is not None and again is not None and first.id == again.id
    rig.advance(86_400)
    later = rig.svc.firings.fire_scheduled(rule.id, datetime(2026, 1, 3, 1, 0, tzinfo=UTC))
    assert later is not None and later.id != first.id
    assert len(rig.store.lease_rows) == 2


def test_a_scheduled_delivery_for_a_disabled_or_deleted_rule_mints_nothing(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    at = datetime(2026, 1, 2, 1, 0, tzinfo=UTC)
    rig.svc.rules.update_rule(ADMIN, rule.id, {"enabled": False})
    assert rig.svc.firings.fire_scheduled(rule.id, at) is None
    rig.svc.rules.delete_rule(ADMIN, rule.id)
    assert rig.svc.firings.fire_scheduled(rule.id, at) is None
    assert rig.svc.firings.fire_scheduled("x" * 300, at) is None
    assert rig.store.lease_rows == {}


def test_a_delivery_ahead_of_the_clock_mints_nothing_and_silences_no_occasion(
    rig: Rig, schedules: FakeSchedules
) -> None:
    # A hand-made invocation for a year ahead: fired, it would mark the rule fired through
    # that instant, and every real occasion before it would be judged already.
    rule = make_rule(rig, "hourly", trigger={"schedule": "rate(1 hour)"}, overlap="allow")
    now = datetime.fromtimestamp(rig.clock.now_ms() / 1000, UTC)
    assert rig.svc.firings.fire_scheduled(rule.id, now + timedelta(days=365)) is None
    assert rig.svc.counters[AHEAD_SKIPS] == 1 and rig.store.lease_rows == {}
    stored = rig.store.get_rule(rule.id)
    assert stored is not None and stored.fired_through is None
    rig.advance(3600)
    assert rig.svc.firings.fire_scheduled(rule.id, now + timedelta(hours=1)) is not None
    # A clock a little behind the scheduler's (up to a minute) is no early delivery.
    rig.advance(3600 - 59)
    assert rig.svc.firings.fire_scheduled(rule.id, now + timedelta(hours=2)) is not None
    assert rig.svc.counters[AHEAD_SKIPS] == 1 and len(rig.store.lease_rows) == 2


# ------------------------------------------------------------------------------ events


def _post(
    rig: Rig, data: dict[str, Any], event_id: str | None = None, topic: str = "mail.forwarded"
) -> list[Any]:
    return rig.svc.firings.post_event(MEMBER, SPACE, topic, data, None, event_id)


def test_an_event_mints_one_lease_per_enabled_rule_whose_match_holds(rig: Rig) -> None:
    make_rule(rig, "support", trigger=event_trigger(to="support@example.com"))
    make_rule(rig, "vip", trigger=event_trigger(**{"from": "@vip.example"}))
    make_rule(rig, "billing", trigger=event_trigger(to="billing@example.com"))
    off = make_rule(rig, "off", trigger=event_trigger())
    rig.svc.rules.update_rule(ADMIN, off.id, {"enabled": False})
    make_rule(rig, "deploys", trigger={"topic": "deploy.finished"})
    data = {"from": "Ann <ann@vip.example>", "to": ["Support@Example.com"], "subject": "Help"}
    leases = _post(rig, data)
    names = sorted(rig.store.get_job(x.job_id).rule_id for x in leases)  # type: ignore[union-attr]
    assert len(leases) == 2 and len(set(names)) == 2
    task = rig.store.get_task(leases[0].task_id or "")
    assert task is not None and task.title == "Reply to Ann <ann@vip.example>: Help"


def test_the_same_event_id_answers_the_same_leases_and_mints_nothing(rig: Rig) -> None:
    make_rule(rig, "support", trigger=event_trigger())
    first = _post(rig, {"subject": "a"}, "ev-1")
    make_rule(rig, "late", trigger=event_trigger())
    again = _post(rig, {"subject": "a"}, "ev-1")
    assert [x.id for x in again] == [x.id for x in first] and len(first) == 1
    assert len(rig.store.lease_rows) == 1
    assert len(_post(rig, {"subject": "a"}, "ev-2")) == 2


def test_an_event_lease_carries_its_trigger_in_the_payload(rig: Rig) -> None:
    make_rule(rig, "deploys", trigger={"topic": "deploy.finished"}, subject={"kind": "space"})
    rig.svc.firings.post_event(
        MEMBER, SPACE, "deploy.finished", {"sha": "abc"}, rig.clock.now_ms(), None
    )
    won = rig.claim()
    bundle = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert bundle["trigger"] == {
        "topic": "deploy.finished",
        "occurred_at": "2026-01-01T00:00:00Z",
        "data": {"sha": "abc"},
    }


def test_an_event_of_another_space_does_not_fire_this_space_rules(rig: Rig) -> None:
    make_rule(rig, "support", trigger=event_trigger())
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    assert rig.svc.firings.post_event(MEMBER, "OTHER", "mail.forwarded", {}, None, None) == []


def test_an_email_matches_rules_of_the_space_that_owns_each_recipient(rig: Rig) -> None:
    make_rule(rig, "support", trigger=inbox_trigger(to="support@example.com"))
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="theirs", space="OTHER", kind=PoolKind.COMMAND, created_at=0)
    )
    rig.svc.addresses.add_address(ADMIN, "OTHER", "sales@example.com")
    rig.svc.rules.create_rule(
        ADMIN, "OTHER", "sales", "theirs", {"kind": "space"}, inbox_trigger(to="sales@example.com")
    )
    data = {
        "message_id": "m1",
        "from": "a@b.c",
        "to": ["sales@example.com"],
        "cc": [],
        "recipients": ["sales@example.com"],
        "subject": "quote",
        "verdicts": {},
    }
    leases = rig.svc.firings.fire_email(rig.clock.now_ms(), data).leases
    assert [x.space for x in leases] == ["OTHER"]
    again = rig.svc.firings.fire_email(rig.clock.now_ms(), data).leases
    assert [x.id for x in again] == [x.id for x in leases]
    bcc = {**data, "message_id": "m2", "to": [], "recipients": ["support@example.com"]}
    assert [x.space for x in rig.svc.firings.fire_email(rig.clock.now_ms(), bcc).leases] == [SPACE]


def test_both_rule_stores_implement_every_rule_store_method_with_the_same_parameters() -> None:
    import inspect

    from tenure.app.rules.ports import RuleStore
    from tenure.store.dynamo.rules import DynamoRules

    from tests.unit.fake_store import FakeStore

    wanted = {n: inspect.signature(f) for n, f in vars(RuleStore).items() if callable(f)}
    wanted = {n: s for n, s in wanted.items() if not n.startswith("_")}
    assert wanted
    for impl in (FakeStore, DynamoRules):
        for name, signature in wanted.items():
            ours = getattr(impl, name, None)
            assert ours is not None, f"{impl.__name__} lacks {name}"
            assert list(inspect.signature(ours).parameters) == list(signature.parameters)


def test_resync_remakes_every_scheduled_rules_schedule_in_its_state(
    rig: Rig, schedules: FakeSchedules
) -> None:
    nightly = make_rule(rig, "nightly", trigger=NIGHTLY)
    paused = make_rule(rig, "paused", trigger={"schedule": "rate(1 hour)"})
    rig.svc.rules.update_rule(ADMIN, paused.id, {"enabled": False})
    make_rule(rig, "inbox")
    gone = make_rule(rig, "gone", trigger=NIGHTLY)
    rig.svc.rules.delete_rule(ADMIN, gone.id)
    schedules.held.clear()  # what a restarted moto remembers
    assert rig.svc.rules.resync_schedules() == 2
    assert {name: s["state"] for name, s in schedules.held.items()} == {
        nightly.id: "ENABLED",
        paused.id: "DISABLED",
    }


def test_a_delete_that_loses_to_a_concurrent_change_deletes_the_rule_as_it_now_is(
    rig: Rig, schedules: FakeSchedules, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenure.domain.errors import Conflict

    rule = make_rule(rig, "nightly", trigger=NIGHTLY)
    real = rig.store.delete_rule
    calls = []

    def racing(seen: Rule) -> None:
        calls.append(seen.version)
        if len(calls) == 1:  # someone re-enabled it in between: its schedule is back
            rig.svc.rules.update_rule(ADMIN, rule.id, {"trigger": {"schedule": "rate(2 hours)"}})
            raise Conflict("rule moved on")
        real(seen)

    monkeypatch.setattr(rig.store, "delete_rule", racing)
    rig.svc.rules.delete_rule(ADMIN, rule.id)
    assert calls == [1, 2] and schedules.held == {}
    assert rig.store.get_rule(rule.id) is None


@pytest.mark.parametrize("copy_visible", [True, False], ids=["copy-visible", "copy-not-yet"])
def test_a_claims_payload_reads_the_trigger_off_any_copy_of_the_job(
    rig: Rig, copy_visible: bool
) -> None:
    """The trigger is written once, with the job: an eventually consistent copy has it, and
    a copy not visible yet (a job just minted) is read again consistently."""
    make_rule(rig, "deploys", trigger={"topic": "deploy.finished"}, subject={"kind": "space"})
    rig.svc.firings.post_event(
        MEMBER, SPACE, "deploy.finished", {"sha": "abc"}, rig.clock.now_ms(), None
    )
    table = rig.store.get_job
    reads: list[bool] = []

    def get_job(job_id: str, consistent: bool = True) -> Any:
        reads.append(consistent)
        return table(job_id) if consistent or copy_visible else None

    rig.store.get_job = get_job  # type: ignore[method-assign]
    won = rig.claim()
    reads.clear()
    bundle = rig.svc.payloads.claimed_payload(won.lease)
    assert bundle is not None and bundle["trigger"]["data"] == {"sha": "abc"}
    assert reads == ([False] if copy_visible else [False, True])


def test_a_spaces_rules_page_by_limit_and_by_weight(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="others", space="OTHER", kind=PoolKind.COMMAND, created_at=0)
    )
    check_rule_pages(rig.svc, ADMIN, {SPACE: POOL, "OTHER": "others"}, SPACE, "OTHER")


def test_a_resync_and_a_resume_reach_every_scheduled_rule_page_after_page(
    rig: Rig, schedules: FakeSchedules, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduled rules are read a page at a time: a group of more rules than a page holds is
    re-made and caught up whole (a single read of 1,000 left the rest without a schedule
    after a restart, and never caught up)."""
    from tenure.app.rules import rules as rules_module

    monkeypatch.setattr(rules_module, "SCHEDULED_PAGE", 2)
    reads: list[int] = []
    real = rig.store.scheduled_rules

    def counted(limit: int, after: Rule | None = None) -> list[Rule]:
        reads.append(limit)
        return real(limit, after)

    monkeypatch.setattr(rig.store, "scheduled_rules", counted)
    made = [
        make_rule(
            rig, f"every-{n}", trigger={"schedule": "rate(1 hour)"}, catchup_window_seconds=7200
        )
        for n in range(5)
    ]
    schedules.held.clear()
    assert rig.svc.rules.resync_schedules() == 5
    assert set(schedules.held) == {rule.id for rule in made}
    assert reads == [2, 2, 2]  # 2 + 2 + 1: the short page is the last
    rig.advance(3 * 3600 + 60)
    assert rig.svc.firings.catch_up() == 5


def test_a_create_that_loses_a_race_on_the_spaces_count_counts_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every create in a space moves its count row: one that loses to another at the same
    instant (a transaction conflict, not a taken name nor a full space) tries again."""
    from tenure.domain.errors import Conflict

    real = rig.store.put_rule
    lost: list[int] = []

    def racing(rule: Rule, counted: int, cap: int) -> None:
        if len(lost) < 2:
            lost.append(counted)
            raise Conflict("a conditional write lost", reasons=["None", "None", "None"])
        real(rule, counted, cap)

    monkeypatch.setattr(rig.store, "put_rule", racing)
    rule = make_rule(rig, "raced")
    assert len(lost) == 2 and rig.svc.rules.get_rule(READER, rule.id) == rule

    def always(rule: Rule, counted: int, cap: int) -> None:
        raise Conflict("a conditional write lost", reasons=["None", "None", "TransactionConflict"])

    monkeypatch.setattr(rig.store, "put_rule", always)
    with pytest.raises(Unavailable):
        make_rule(rig, "never")
