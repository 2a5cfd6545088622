"""The /spaces/{key}/addresses routes, and the email.received topic refused on /events."""

from __future__ import annotations

from typing import Any

from tenure.domain.model import Principal

from tests.unit.rules_support import TASK_SUBJECT, inbox_trigger
from tests.unit.support import ADMIN, MEMBER, READER, Rig
from tests.unit.test_rules_routes import http  # noqa: F401 (the fixture)

OTHER_ADMIN = Principal(kind="operator", token_id="tok-other", role="admin", spaces=("OTHER",))


def test_an_address_is_given_listed_and_taken_back(http: Any, rig: Rig) -> None:  # noqa: F811
    got = http("POST", "/spaces/OPS/addresses", {"address": "Help@In.Example.com"})
    assert got.status == 201, got.body
    body = got.json()
    assert (body["address"], body["space"]) == ("help@in.example.com", "OPS")
    assert body["created_at"].endswith("Z")
    listed = http("GET", "/spaces/OPS/addresses", actor=READER)
    assert listed.status == 200 and body in listed.json()["addresses"]
    gone = http("DELETE", "/spaces/OPS/addresses/help%40in.example.com")
    assert (gone.status, gone.body) == (204, "")
    assert body not in http("GET", "/spaces/OPS/addresses", actor=READER).json()["addresses"]
    again = http("DELETE", "/spaces/OPS/addresses/help@in.example.com")
    assert (again.status, again.code) == (404, "not_found")


def test_an_address_of_another_space_is_409_and_the_answer_names_no_space(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    assert http("POST", "/spaces/OPS/addresses", {"address": "ops@in.example.com"}).status == 201
    got = http("POST", "/spaces/OTHER/addresses", {"address": "OPS@in.example.com"})
    assert (got.status, got.code) == (409, "already_exists")
    assert "OPS" not in got.message.replace("OPS@", "")


def test_only_an_admin_of_every_space_gives_and_takes_addresses(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    for actor in (OTHER_ADMIN, MEMBER):
        got = http("POST", "/spaces/OTHER/addresses", {"address": "x@in.example.com"}, actor=actor)
        assert (got.status, got.code) == (403, "forbidden")
        got = http("DELETE", "/spaces/OTHER/addresses/x@in.example.com", actor=actor)
        assert (got.status, got.code) == (403, "forbidden")
    assert http("GET", "/spaces/OTHER/addresses", actor=OTHER_ADMIN).status == 200
    assert http("GET", "/spaces/OPS/addresses", actor=OTHER_ADMIN).status == 403
    bad = http("POST", "/spaces/OPS/addresses", {"address": "not an address"})
    assert (bad.status, bad.code) == (422, "validation_failed")


def test_an_email_rule_for_an_address_the_space_does_not_own_is_422_naming_match_to(
    http: Any,  # noqa: F811
) -> None:
    body = {
        "space": "OPS",
        "name": "inbox",
        "pool": "builders",
        "subject": TASK_SUBJECT,
        "trigger": inbox_trigger(to="stranger@in.example.com"),
    }
    got = http("POST", "/rules", body)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("trigger.match.to:")


def test_posting_the_email_received_topic_is_422_naming_topic(http: Any) -> None:  # noqa: F811
    body = {"space": "OPS", "topic": "email.received", "data": {"message_id": "m"}}
    got = http("POST", "/events", body, actor=MEMBER)
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.message.startswith("topic:")


def test_a_refusal_never_names_the_space_of_a_resource_the_caller_may_not_see(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    rig.svc.spaces.create_space(ADMIN, "OTHER", "Other", None)
    body = {
        "space": "OPS",
        "name": "ops-only",
        "pool": "builders",
        "subject": {"kind": "space"},
        "trigger": {"topic": "ticket.opened"},
    }
    rule = http("POST", "/rules", body).json()["rule"]
    for method, path in (
        ("GET", f"/rules/{rule['id']}"),
        ("PATCH", f"/rules/{rule['id']}"),
        ("DELETE", f"/rules/{rule['id']}"),
        ("POST", f"/rules/{rule['id']}/fire"),
    ):
        got = http(method, path, {"enabled": False} if method == "PATCH" else None, OTHER_ADMIN)
        assert (got.status, got.code) == (403, "forbidden"), (method, got.body)
        assert "OPS" not in got.message and "builders" not in got.message
