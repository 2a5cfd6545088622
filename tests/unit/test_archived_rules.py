"""An archived space takes no new work through its rules either: fire now is
refused, events, emails and schedules skip the space's rules and say so; unarchived, the same
rules fire again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tenure.app.rules.firings import ARCHIVED_SKIPS
from tenure.domain.errors import InvalidTransition
from tenure.domain.model import Pool
from tenure.domain.rules.rule import MAX_RULES_PER_EVENT, MAX_RULES_PER_SPACE
from tenure.domain.states import PoolKind

from tests.unit.rules_support import FakeSchedules, inbox_trigger, make_rule
from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, Rig

AT = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)


def _nothing_minted(rig: Rig) -> bool:
    return rig.store.lease_rows == {} and rig.store.tasks == {}


def test_fire_in_an_archived_space_is_an_invalid_transition_and_mints_nothing(rig: Rig) -> None:
    rule = make_rule(rig)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    with pytest.raises(InvalidTransition, match="archived"):
        rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert _nothing_minted(rig)
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert rig.svc.firings.fire_rule(MEMBER, rule.id).space == SPACE


def test_an_event_skips_the_rules_of_an_archived_space(rig: Rig) -> None:
    make_rule(rig, trigger={"topic": "deploy.finished"})
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert rig.svc.firings.post_event(MEMBER, SPACE, "deploy.finished", {}, None, None) == []
    assert _nothing_minted(rig) and rig.svc.counters[ARCHIVED_SKIPS] == 1
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert len(rig.svc.firings.post_event(MEMBER, SPACE, "deploy.finished", {}, None, None)) == 1


def test_an_email_fires_the_live_spaces_rules_and_names_the_archived_ones(rig: Rig) -> None:
    live = make_rule(rig)
    rig.svc.spaces.create_space(ADMIN, "OLD", "Old", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="old", space="OLD", kind=PoolKind.COMMAND, created_at=0)
    )
    rig.svc.addresses.add_address(ADMIN, "OLD", "old@example.com")
    old = rig.svc.rules.create_rule(
        ADMIN, "OLD", "inbox", "old", {"kind": "space"}, inbox_trigger(to="old@example.com")
    )
    rig.svc.spaces.archive_space(ADMIN, "OLD")
    data = {
        "message_id": "m1",
        "from": "a@b.c",
        "to": ["support@example.com"],
        "recipients": ["support@example.com", "old@example.com"],
        "subject": "help",
    }
    fired = rig.svc.firings.fire_email(rig.clock.now_ms(), data)
    assert [x.space for x in fired.leases] == [SPACE]
    assert fired.skipped_archived == [old.id]
    job = rig.store.get_job(fired.leases[0].job_id)
    assert job is not None and job.rule_id == live.id
    assert len(rig.store.lease_rows) == 1
    # Redelivered after the unarchive: the live rule's lease is answered again, the other
    # rule fires now (its occasion was never minted).
    rig.svc.spaces.unarchive_space(ADMIN, "OLD")
    again = rig.svc.firings.fire_email(rig.clock.now_ms(), data)
    assert again.skipped_archived == []
    assert [x.space for x in again.leases] == ["OLD", SPACE]
    assert again.leases[1].id == fired.leases[0].id


def test_a_schedule_of_an_archived_space_fires_nothing_until_unarchived(
    rig: Rig, schedules: FakeSchedules
) -> None:
    rule = make_rule(rig, "nightly", trigger={"schedule": "rate(1 hour)"})
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    rig.advance(AT.timestamp() - rig.clock.now_ms() / 1000)  # delivered at its time
    assert rig.svc.firings.fire_scheduled(rule.id, AT) is None
    assert _nothing_minted(rig) and rig.svc.counters[ARCHIVED_SKIPS] == 1
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert rig.svc.firings.fire_scheduled(rule.id, AT) is not None


def test_a_rule_can_still_be_made_in_an_archived_space_and_fires_once_unarchived(
    rig: Rig,
) -> None:
    # A rule is configuration, not work: the space refuses what it would mint, not the rule.
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    rule = make_rule(rig)
    with pytest.raises(InvalidTransition):
        rig.svc.firings.fire_rule(MEMBER, rule.id)
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert rig.svc.firings.fire_rule(MEMBER, rule.id) is not None


def test_an_event_reads_every_rule_of_its_topic_in_the_space_before_judging_their_matches(
    rig: Rig,
) -> None:
    # Read only up to the number an event may fire, rules whose match does not hold took the
    # places of one that did: 100 of them silenced every other rule of the topic.
    subject = {"kind": "task", "title": "t"}
    for n in range(MAX_RULES_PER_EVENT + 20):
        trigger = {"topic": "deploy.finished", "match": {"subject_contains": "never"}}
        rig.svc.rules.create_rule(ADMIN, SPACE, f"quiet-{n}", POOL, subject, trigger)
    rig.svc.rules.create_rule(ADMIN, SPACE, "plain", POOL, subject, {"topic": "deploy.finished"})
    limits: list[int] = []
    read = rig.svc.firings.rules.rule_store.inbound_rules

    def counted(topic: str, recipients: list[str], space: str | None, limit: int) -> Any:
        limits.append(limit)
        return read(topic, recipients, space, limit)

    rig.svc.firings.rules.rule_store.inbound_rules = counted  # type: ignore[method-assign]
    minted = rig.svc.firings.post_event(MEMBER, SPACE, "deploy.finished", {}, None, None)
    assert len(minted) == 1
    assert limits == [MAX_RULES_PER_SPACE]
