"""Who may receive what: inbound addresses belong to spaces, mail is matched on the recipients
SES reports and the space owns, on SES's verdicts, and within a rule's hourly cap."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.domain.errors import AlreadyExists, Forbidden, NotFound, ValidationFailed
from tenure.domain.model import Pool, Principal
from tenure.domain.rules.rule import Rule
from tenure.domain.states import PoolKind

from tests.unit.rules_support import TASK_SUBJECT, inbox_trigger
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, Rig

OPS_ADDRESS = "ops@in.example.com"
OTHER = "OTHER"
OTHER_ADMIN = Principal(kind="operator", token_id="tok-other", role="admin", spaces=(OTHER,))


@pytest.fixture
def world(rig: Rig) -> Rig:
    rig.svc.spaces.create_space(ADMIN, OTHER, "Other", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="theirs", space=OTHER, kind=PoolKind.COMMAND, created_at=0)
    )
    rig.svc.addresses.add_address(ADMIN, SPACE, OPS_ADDRESS.upper())
    return rig


def mail(message_id: str = "m1", **kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message_id": message_id,
        "from": "alice@partner.example",
        "to": [OPS_ADDRESS],
        "cc": [],
        "recipients": [OPS_ADDRESS],
        "subject": "invoice 42",
        "body": "hello",
        "verdicts": {
            "spam": "PASS",
            "virus": "PASS",
            "spf": "PASS",
            "dkim": "PASS",
            "dmarc": "PASS",
        },
        "attachments": [],
    }
    data.update(kw)
    return data


def ops_rule(rig: Rig, name: str = "inbox", **kw: Any) -> Rule:
    trigger = kw.pop("trigger", inbox_trigger(to=OPS_ADDRESS))
    return rig.svc.rules.create_rule(ADMIN, SPACE, name, POOL, TASK_SUBJECT, trigger, **kw)


def fire(rig: Rig, data: dict[str, Any]) -> list[str]:
    return [lease.space for lease in rig.svc.firings.fire_email(rig.clock.now_ms(), data).leases]


def test_an_admin_of_another_space_cannot_make_a_rule_that_receives_ops_mail(world: Rig) -> None:
    ops_rule(world)
    for trigger in (inbox_trigger(to=OPS_ADDRESS), inbox_trigger()):
        with pytest.raises(ValidationFailed) as refused:
            world.svc.rules.create_rule(
                OTHER_ADMIN, OTHER, "steal", "theirs", {"kind": "space"}, trigger
            )
        assert "match.to" in refused.value.message
        assert SPACE not in refused.value.message  # never names the owner
    assert world.svc.rules.list_rules(OTHER_ADMIN, OTHER).rules == []
    assert fire(world, mail()) == [SPACE]


def test_a_rule_cannot_be_patched_onto_an_address_of_another_space(world: Rig) -> None:
    world.svc.addresses.add_address(ADMIN, OTHER, "other@in.example.com")
    rule = world.svc.rules.create_rule(
        OTHER_ADMIN,
        OTHER,
        "mine",
        "theirs",
        {"kind": "space"},
        inbox_trigger(to="other@in.example.com"),
    )
    with pytest.raises(ValidationFailed, match=r"match\.to"):
        world.svc.rules.update_rule(
            OTHER_ADMIN, rule.id, {"trigger": inbox_trigger(to=OPS_ADDRESS)}
        )
    assert world.svc.rules.get_rule(OTHER_ADMIN, rule.id).trigger == rule.trigger


def test_only_an_admin_of_every_space_gives_or_takes_addresses(world: Rig) -> None:
    with pytest.raises(Forbidden):
        world.svc.addresses.add_address(OTHER_ADMIN, OTHER, "mine@in.example.com")
    with pytest.raises(Forbidden):
        world.svc.addresses.remove_address(OTHER_ADMIN, SPACE, OPS_ADDRESS)
    with pytest.raises(Forbidden):
        world.svc.addresses.add_address(MEMBER, OTHER, "mine@in.example.com")
    listed = world.svc.addresses.list_addresses(READER, SPACE)
    assert [(a.address, a.space) for a in listed] == [(OPS_ADDRESS, SPACE)]


def test_an_address_another_space_owns_is_already_exists_without_naming_it(world: Rig) -> None:
    with pytest.raises(AlreadyExists) as taken:
        world.svc.addresses.add_address(ADMIN, OTHER, OPS_ADDRESS)
    assert SPACE not in taken.value.message
    again = world.svc.addresses.add_address(ADMIN, SPACE, OPS_ADDRESS)
    assert again.space == SPACE
    with pytest.raises(NotFound) as missing:
        world.svc.addresses.remove_address(ADMIN, OTHER, OPS_ADDRESS)
    assert SPACE not in missing.value.message


def test_mail_matches_the_recipients_ses_reports_never_the_to_header(world: Rig) -> None:
    ops_rule(world)
    # A sender writes OPS's address in To, but SES received the mail for another address.
    assert fire(world, mail("m1", recipients=["nobody@in.example.com"])) == []
    # Bcc: no header names OPS's address, SES's recipients do.
    assert fire(world, mail("m2", to=["x@y.example"])) == [SPACE]


def test_a_deleted_address_stops_matching_and_can_be_given_to_another_space(world: Rig) -> None:
    ops_rule(world)
    world.svc.addresses.remove_address(ADMIN, SPACE, OPS_ADDRESS)
    assert world.svc.addresses.list_addresses(READER, SPACE) == []
    assert fire(world, mail("m1")) == []
    world.svc.addresses.add_address(ADMIN, OTHER, OPS_ADDRESS)
    # OPS's old rule names it still, and does not receive OTHER's mail.
    assert fire(world, mail("m2")) == []


def test_from_holds_only_under_a_dmarc_pass(world: Rig) -> None:
    ops_rule(world, trigger=inbox_trigger(to=OPS_ADDRESS, **{"from": "@partner.example"}))
    spoofed = {"spam": "PASS", "virus": "PASS", "spf": "FAIL", "dkim": "FAIL", "dmarc": "FAIL"}
    assert fire(world, mail("m1", verdicts=spoofed)) == []
    assert fire(world, mail("m2")) == [SPACE]


def test_a_virus_mints_nothing_and_spam_only_for_rules_that_accept_it(world: Rig) -> None:
    ops_rule(world, "plain")
    ops_rule(world, "spammy", accept_spam=True)
    virus = {"spam": "PASS", "virus": "FAIL", "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"}
    fired = world.svc.firings.fire_email(world.clock.now_ms(), mail("m1", verdicts=virus))
    assert (fired.leases, fired.refused) == ([], "virus")
    spam = {"spam": "FAIL", "virus": "PASS", "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"}
    fired = world.svc.firings.fire_email(world.clock.now_ms(), mail("m2", verdicts=spam))
    plain, spammy = (r.id for r in world.svc.rules.list_rules(ADMIN, SPACE).rules)
    assert [lease.event_data["rule_id"] for lease in fired.leases] == [spammy]
    assert fired.skipped_spam == [plain]
    assert world.svc.kernel.counters["email_spam_skips"] == 1


def test_past_max_firings_per_hour_mints_nothing_and_is_recorded_once_per_hour(world: Rig) -> None:
    rule = ops_rule(world, max_firings_per_hour=2)
    minted = [fire(world, mail(f"m{n}")) for n in range(4)]
    assert minted == [[SPACE], [SPACE], [], []]
    # A redelivery of a mail that did mint answers its lease and counts nothing.
    assert fire(world, mail("m0")) == [SPACE]
    limited = [
        e for e in world.store.timeline("space", SPACE, 100) if e.type == "rule.rate_limited"
    ]
    assert [e.data["rule_id"] for e in limited] == [rule.id]
    assert world.svc.kernel.counters["rule_rate_limited"] == 2
    world.advance(3600)
    assert fire(world, mail("m9")) == [SPACE]


def test_an_email_rule_must_name_match_to_and_limits_are_validated(world: Rig) -> None:
    with pytest.raises(ValidationFailed, match=r"trigger\.match\.to"):
        ops_rule(world, trigger=inbox_trigger())
    with pytest.raises(ValidationFailed, match="max_firings_per_hour"):
        ops_rule(world, max_firings_per_hour=0)
    rule = ops_rule(
        world,
        trigger={**inbox_trigger(to=[OPS_ADDRESS]), "accept_spam": True, "max_firings_per_hour": 5},
    )
    assert (rule.spam_accepted, rule.hourly_cap) == (True, 5)


@pytest.mark.parametrize("virus", ["GRAY", "PROCESSING_FAILED", "DISABLED", None])
def test_attachments_of_a_mail_not_scanned_clean_are_withheld_and_never_stored(
    world: Rig, virus: str | None
) -> None:
    ops_rule(world)
    stored: list[str] = []
    attachment = {"attachment_id": "att_1", "filename": "a.pdf", "byte_size": 3}
    verdicts = {"spam": "PASS", "virus": virus, "spf": "PASS", "dkim": "PASS", "dmarc": "PASS"}
    data = mail("m1", verdicts=verdicts, attachments=[attachment])
    fired = world.svc.firings.fire_email(
        world.clock.now_ms(), data, None, lambda: stored.append("stored")
    )
    (lease,) = fired.leases
    job = world.store.get_job(lease.job_id)
    assert job is not None and job.trigger is not None
    assert job.trigger["data"]["attachments"] == []
    assert job.trigger["data"]["attachments_withheld"] == "virus_unscanned"
    assert (fired.attachments_withheld, stored) == ("virus_unscanned", [])
    assert world.svc.kernel.counters["email_attachments_withheld"] == 1


def test_attachments_of_a_mail_scanned_clean_are_stored_once_before_its_lease(world: Rig) -> None:
    ops_rule(world, "one")
    ops_rule(world, "two")
    stored: list[int] = []
    attachment = {"attachment_id": "att_1", "filename": "a.pdf", "byte_size": 3}
    data = mail("m1", attachments=[attachment])

    def store() -> None:
        stored.append(len(world.store.lease_rows))  # how many leases exist when it runs

    fired = world.svc.firings.fire_email(world.clock.now_ms(), data, None, store)
    assert len(fired.leases) == 2 and stored == [0] and fired.attachments_withheld is None
    world.svc.firings.fire_email(world.clock.now_ms(), data, None, store)
    assert stored == [0]  # the redelivery minted nothing new, so stored nothing
