"""Rules on DynamoDB Local: the rule store's conditions, and firings raced by
8 threads at once minting exactly one lease per (rule, occasion)."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.errors import AlreadyExists, Conflict, ValidationFailed
from tenure.domain.model import Pool, Principal
from tenure.domain.rules.rule import MAX_RULES_PER_SPACE
from tenure.domain.states import PoolKind
from tenure.store import codec, keys
from tenure.store.dynamo import OneTable
from tenure.triggers.inbound.service import InboundEmail
from tenure.wiring import RandomIds, SystemClock
from tenure_cli.local.email_send import notification

from tests.conftest import ADMIN, Rig
from tests.unit.rules_support import check_rule_pages

THREADS = 8
MEMBER = Principal(kind="operator", token_id="t-member", role="member")
T = TypeVar("T")


class NoSchedules:
    """Scheduler is not under test here (tests/aws covers it): accept every change."""

    def put(self, name: str, expression: str, timezone: str, rule_id: str, enabled: bool) -> None:
        return None

    def delete(self, name: str) -> None:
        return None


def _world(rig: Rig) -> Tenure:
    rig.svc.rules.schedules = NoSchedules()
    rig.svc.spaces.create_space(ADMIN, "OPS", "Operations", None)
    rig.svc.spaces.create_space(ADMIN, "SALES", "Sales", None)
    for name, space in (("ops", "OPS"), ("sales", "SALES")):
        rig.svc.pools.create_pool(
            ADMIN, Pool(name=name, space=space, kind=PoolKind.COMMAND, created_at=0)
        )
    return rig.svc


def _race(rig: Rig, call: Callable[[Tenure], T]) -> list[T | Exception]:
    """`call` by THREADS threads at once, each on its own service (as concurrent Lambdas)."""
    barrier = threading.Barrier(THREADS)
    assert isinstance(rig.store, OneTable)

    def one(_: int) -> T | Exception:
        store = OneTable(rig.store.client, rig.store.table)
        svc = compose(Rows.of(store, store), SystemClock(), RandomIds())
        barrier.wait()
        try:
            return call(svc)
        except Exception as err:
            return err

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(one, range(THREADS)))


def _leases(svc: Tenure, space: str = "OPS") -> list[Any]:
    return svc.operator.list_leases(ADMIN, space, 100, None, None, None).leases


def test_the_same_scheduled_time_from_8_threads_mints_exactly_one_lease(rig: Rig) -> None:
    svc = _world(rig)
    subject = {"kind": "task", "title": "nightly report"}
    rule = svc.rules.create_rule(
        ADMIN, "OPS", "nightly", "ops", subject, {"schedule": "rate(1 day)"}
    )
    # An occasion of this minute: one days old would be a missed one, judged by the window.
    at = datetime.now(UTC).replace(second=0, microsecond=0)
    answers = _race(rig, lambda s: s.firings.fire_scheduled(rule.id, at))
    ids = {a.id for a in answers if not isinstance(a, Exception) and a is not None}
    assert len(ids) == 1 and not [a for a in answers if isinstance(a, Exception)], answers
    assert [x.id for x in _leases(svc)] == list(ids)


def test_the_same_email_from_8_threads_mints_one_lease_per_matching_rule(rig: Rig) -> None:
    svc = _world(rig)
    for space, address in (("OPS", "help@example.com"), ("OPS", "x@example.com")):
        svc.addresses.add_address(ADMIN, space, address)
    svc.addresses.add_address(ADMIN, "SALES", "sales@example.com")
    inbox = {"topic": "email.received", "match": {"to": "help@example.com"}}
    sales = {"topic": "email.received", "match": {"to": "sales@example.com"}}
    svc.rules.create_rule(ADMIN, "OPS", "help", "ops", {"kind": "space"}, inbox)
    svc.rules.create_rule(ADMIN, "SALES", "help", "sales", {"kind": "space"}, sales)
    svc.rules.create_rule(ADMIN, "OPS", "all", "ops", {"kind": "task", "title": "{subject}"}, inbox)
    svc.rules.create_rule(
        ADMIN,
        "OPS",
        "other",
        "ops",
        {"kind": "space"},
        {"topic": "email.received", "match": {"to": "x@example.com"}},
    )
    data = {
        "message_id": "msg-1",
        "from": "a@b.example",
        "to": ["help@example.com"],
        "cc": [],
        "recipients": ["help@example.com", "sales@example.com"],
        "subject": "Hi",
    }

    def receive(s: Tenure) -> list[str]:
        leases = s.firings.fire_email(0, data).leases
        return sorted(x.id for x in leases)

    answers = _race(rig, receive)
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len({tuple(a) for a in answers if isinstance(a, list)}) == 1
    assert len(_leases(svc, "OPS")) == 2 and len(_leases(svc, "SALES")) == 1


def test_the_same_event_id_from_8_threads_answers_the_same_leases(rig: Rig) -> None:
    svc = _world(rig)
    svc.rules.create_rule(ADMIN, "OPS", "deploys", "ops", {"kind": "space"}, {"topic": "deploy"})
    answers = _race(
        rig,
        lambda s: [x.id for x in s.firings.post_event(MEMBER, "OPS", "deploy", {}, None, "ev-1")],
    )
    assert len({tuple(a) for a in answers if isinstance(a, list)}) == 1, answers
    assert len(_leases(svc)) == 1


def test_one_name_raced_by_8_creates_makes_one_rule(rig: Rig) -> None:
    _world(rig)

    def create(s: Tenure) -> str:
        s.rules.schedules = NoSchedules()
        return s.rules.create_rule(
            ADMIN, "OPS", "inbox", "ops", {"kind": "space"}, {"topic": "t"}
        ).id

    answers = _race(rig, create)
    assert sum(isinstance(a, str) for a in answers) == 1
    assert all(isinstance(a, str | AlreadyExists) for a in answers), answers


def test_rule_rows_follow_renames_disables_and_deletes(rig: Rig) -> None:
    svc = _world(rig)
    store = rig.store
    assert isinstance(store, OneTable)
    inbox = {"topic": "email.received", "match": {"to": "Help@Example.com"}}
    svc.addresses.add_address(ADMIN, "OPS", "help@example.com")
    rule = svc.rules.create_rule(ADMIN, "OPS", "help", "ops", {"kind": "space"}, inbox)
    assert [
        r.id for r in store.inbound_rules("email.received", ["help@example.com"], None, 10)
    ] == [rule.id]
    assert store.inbound_rules("email.received", ["help@example.com"], "SALES", 10) == []
    renamed = svc.rules.update_rule(ADMIN, rule.id, {"name": "helpdesk"})
    assert [r.name for r in store.list_rules("OPS", 10).rules] == ["helpdesk"]
    with pytest.raises(Conflict):
        store.replace_rule(rule, rule)  # an old version cannot overwrite a newer one
    svc.rules.update_rule(ADMIN, rule.id, {"enabled": False})
    assert store.inbound_rules("email.received", ["help@example.com"], None, 10) == []
    svc.rules.update_rule(ADMIN, rule.id, {"enabled": True, "trigger": {"topic": "mail.fwd"}})
    # No `to` any more: the rule is now a candidate for every recipient (its index row moved).
    assert store.inbound_rules("email.received", ["help@example.com"], None, 10) == []
    assert [r.id for r in store.inbound_rules("mail.fwd", ["z@y.example"], None, 10)] == [rule.id]
    assert [r.id for r in store.inbound_rules("mail.fwd", [], "OPS", 10)] == [rule.id]
    svc.rules.update_rule(ADMIN, rule.id, {"trigger": {"schedule": "rate(1 day)"}})
    assert store.inbound_rules("mail.fwd", [], None, 10) == []
    assert [r.id for r in store.scheduled_rules(10)] == [rule.id]
    svc.rules.delete_rule(ADMIN, renamed.id)
    assert store.scheduled_rules(10) == []
    assert (
        store.list_rules("OPS", 10).rules == []
        and store.inbound_rules("email.received", [], None, 10) == []
    )
    svc.rules.create_rule(ADMIN, "OPS", "helpdesk", "ops", {"kind": "space"}, inbox)


def test_two_spaces_racing_for_one_address_leave_it_to_exactly_one(rig: Rig) -> None:
    _world(rig)

    def claim(svc: Tenure) -> str:
        space = "OPS" if threading.get_ident() % 2 else "SALES"
        return svc.addresses.add_address(ADMIN, space, "Shared@In.Example").space

    answers = _race(rig, claim)
    winners = {a for a in answers if isinstance(a, str)}
    assert len(winners) == 1, answers
    assert all(isinstance(a, str | AlreadyExists) for a in answers), answers
    (owner,) = winners
    store = rig.store
    assert isinstance(store, OneTable)
    assert store.address_owners(["shared@in.example", "none@in.example"]) == {
        "shared@in.example": owner
    }
    assert [a.address for a in store.list_addresses(owner, 10)] == ["shared@in.example"]
    store.delete_address(owner, "shared@in.example")
    assert store.get_address("shared@in.example") is None
    assert store.list_addresses(owner, 10) == []


def test_an_hours_firing_counter_lets_exactly_its_cap_through_8_threads(rig: Rig) -> None:
    store = rig.store
    assert isinstance(store, OneTable)
    answers = _race(rig, lambda svc: svc.rules.rule_store.count_firing("rule_x", "h", 3, 0))
    assert sorted(map(str, answers)) == ["counted"] * 3 + ["limited"] * 4 + ["limited_first"]
    assert store.count_firing("rule_x", "h2", 3, 0) == "counted"


def test_a_claim_reads_only_due_leases_from_the_queue_index(rig: Rig) -> None:
    svc = _world(rig)
    now = rig.clock.now_ms()
    _, later = svc.filing.create_task(
        ADMIN, "OPS", "later", None, None, {}, "ops", None, now + 60_000
    )
    _, due = svc.filing.create_task(ADMIN, "OPS", "now", None, None, {}, "ops", None, None)
    assert later is not None and due is not None
    assert rig.store.queue_candidates("ops", 10, due_by=now) == [due.id]
    assert rig.store.queue_candidates("ops", 10) == [due.id, later.id]
    worker = Principal(kind="worker", token_id="t-worker")
    won = svc.claims.claim(worker, "ops", "w1", None, 0, None)
    assert won is not None and won.lease.id == due.id
    assert svc.claims.claim(worker, "ops", "w2", None, 0, None) is None
    rig.clock.advance(60)
    won = svc.claims.claim(worker, "ops", "w2", None, 0, None)
    assert won is not None and won.lease.id == later.id


class MemoryS3:
    """The two S3 calls the inbound service makes, in memory and thread-safe (S3 is not
    what is raced here; DynamoDB Local is)."""

    def __init__(self, objects: dict[tuple[str, str], bytes]) -> None:
        self.objects = dict(objects)
        self._lock = threading.Lock()

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        with self._lock:
            return {"Body": io.BytesIO(self.objects[(Bucket, Key)])}

    def put_object(self, Bucket: str, Key: str, Body: bytes, **_: Any) -> None:
        with self._lock:
            self.objects[(Bucket, Key)] = Body


def test_the_same_sqs_record_handled_by_8_threads_mints_one_lease_per_matching_rule(
    rig: Rig,
) -> None:
    svc = _world(rig)
    svc.addresses.add_address(ADMIN, "OPS", "invoices@inbound.tenure.example")
    svc.addresses.add_address(ADMIN, "SALES", "sales@inbound.tenure.example")
    inbox = {"topic": "email.received", "match": {"to": "invoices@inbound.tenure.example"}}
    sales = {"topic": "email.received", "match": {"to": "sales@inbound.tenure.example"}}
    svc.rules.create_rule(
        ADMIN, "OPS", "ops-copy", "ops", {"kind": "task", "title": "{subject}"}, inbox
    )
    svc.rules.create_rule(ADMIN, "SALES", "sales-copy", "sales", {"kind": "space"}, sales)
    raw = (
        Path(__file__).resolve().parents[2]
        / "samplesources"
        / "email"
        / "multipart-attachments.eml"
    ).read_bytes()
    recipients = ["invoices@inbound.tenure.example", "sales@inbound.tenure.example"]
    note = notification(raw, "race0000message", "inbound", "arn:aws:sns:us-east-1:1:t", recipients)
    s3 = MemoryS3({("inbound", "inbound/race0000message"): raw})
    body = json.dumps(note)

    answers = _race(
        rig, lambda s: sorted(x.id for x in InboundEmail(s, s3, "attachments").receive(body).leases)
    )
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len({tuple(a) for a in answers if isinstance(a, list)}) == 1
    assert len(_leases(svc, "OPS")) == 1 and len(_leases(svc, "SALES")) == 1
    stored = sorted(key for bucket, key in s3.objects if bucket == "attachments")
    assert len(stored) == 2 and all(k.startswith("email/race0000message/att_") for k in stored)


def test_an_event_ids_record_expires_and_a_record_past_its_time_is_written_anew(
    rig: Rig,
) -> None:
    """`POST /events` remembers an event_id's leases for a week, then the row expires like
    every row nobody needs any more: a member posting endless ids leaves nothing behind for
    good. DynamoDB's TTL deletes late, so a record past its time reads as absent and is
    written over."""
    from tenure.app.rules.firings import EVENT_ID_KEPT_S
    from tenure.store.keys import TTL_ATTRIBUTE, event_record_key

    svc = _world(rig)
    svc.rules.create_rule(ADMIN, "OPS", "deploys", "ops", {"kind": "space"}, {"topic": "deploy"})
    first = [x.id for x in svc.firings.post_event(MEMBER, "OPS", "deploy", {}, None, "ev-ttl")]
    row = rig.store.rows.get(event_record_key("OPS", "ev-ttl"))
    assert row is not None
    assert row[TTL_ATTRIBUTE] == rig.clock.now_ms() // 1000 + EVENT_ID_KEPT_S
    rig.clock.advance(EVENT_ID_KEPT_S - 60)
    again = [x.id for x in svc.firings.post_event(MEMBER, "OPS", "deploy", {}, None, "ev-ttl")]
    assert again == first, "within its week a repeat answers the same leases"
    rig.clock.advance(120)
    store = svc.rules.rule_store
    now_s = rig.clock.now_ms() // 1000
    assert store.get_event_record("OPS", "ev-ttl", now_s) is None, "past its time: absent"
    store.put_event_record("OPS", "ev-ttl", ["lease_x"], now_s + 60, now_s)
    assert store.get_event_record("OPS", "ev-ttl", now_s) == ["lease_x"]


def test_a_spaces_rules_page_by_limit_and_by_weight_on_dynamodb_local(rig: Rig) -> None:
    svc = _world(rig)
    check_rule_pages(svc, ADMIN, {"OPS": "ops", "SALES": "sales"}, "OPS", "SALES")


def test_creates_from_8_threads_at_once_never_pass_the_spaces_cap(rig: Rig) -> None:
    """Each create counts the space's rules before it writes: without a count moved in its
    own transaction, 8 creates at 196 rules each read 196 and all 8 land (204 rules)."""
    svc = _world(rig)
    subject, trigger = {"kind": "space"}, {"topic": "cap.test"}
    for n in range(MAX_RULES_PER_SPACE - 4):
        svc.rules.create_rule(ADMIN, "OPS", f"r{n:03}", "ops", subject, trigger)
    answers = _race(
        rig,
        lambda s: s.rules.create_rule(
            ADMIN, "OPS", f"raced-{threading.get_ident()}", "ops", subject, trigger
        ),
    )
    refused = [a for a in answers if isinstance(a, Exception)]
    assert len(refused) == THREADS - 4, answers
    assert all(isinstance(a, ValidationFailed) and "200 rules" in str(a) for a in refused)
    assert isinstance(rig.store, OneTable)
    assert rig.store.count_rules("OPS", 1000) == MAX_RULES_PER_SPACE
    assert _count_row(rig) == MAX_RULES_PER_SPACE


def _count_row(rig: Rig, space: str = "OPS") -> int | None:
    assert isinstance(rig.store, OneTable)
    row = rig.store.rows.get(keys.rule_count_key(space))
    return None if row is None else int(row["rule_count"])


def test_a_space_whose_rules_predate_the_count_starts_it_from_what_it_reads(rig: Rig) -> None:
    """Rules an earlier release made have no count row: a delete then leaves the count alone
    (there is none to move), and the next create starts it from the rules it counts."""
    svc = _world(rig)
    subject, trigger = {"kind": "space"}, {"topic": "cap.test"}
    made = [svc.rules.create_rule(ADMIN, "OPS", f"r{n}", "ops", subject, trigger) for n in range(5)]
    assert isinstance(rig.store, OneTable)
    assert _count_row(rig) == 5
    rig.store.client.delete_item(
        TableName=rig.store.table, Key=codec.dump(keys.rule_count_key("OPS"))
    )
    svc.rules.delete_rule(ADMIN, made[0].id)
    assert _count_row(rig) is None
    svc.rules.create_rule(ADMIN, "OPS", "after", "ops", subject, trigger)
    assert _count_row(rig) == 5
    svc.rules.delete_rule(ADMIN, made[1].id)
    assert _count_row(rig) == 4 == rig.store.count_rules("OPS", 1000)


def test_scheduled_rules_page_from_the_one_after_on_dynamodb_local(rig: Rig) -> None:
    svc = _world(rig)
    subject = {"kind": "space"}
    made = {
        svc.rules.create_rule(ADMIN, space, f"s{n}", pool, subject, {"schedule": "rate(1 day)"}).id
        for n in range(3)
        for space, pool in (("OPS", "ops"), ("SALES", "sales"))
    }
    assert isinstance(rig.store, OneTable)
    first = rig.store.scheduled_rules(4)
    rest = rig.store.scheduled_rules(4, first[-1])
    assert len(first) == 4 and len(rest) == 2
    assert {r.id for r in first + rest} == made and rig.store.scheduled_rules(4, rest[-1]) == []
