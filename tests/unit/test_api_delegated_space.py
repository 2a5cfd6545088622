"""POST /tasks with a lease token: the task lands in its lease's space, so
`space` may be left out; another space is refused by name, and operators still name it."""

from __future__ import annotations

from typing import Any

from tenure.domain.model import Principal

from tests.unit.support import READER, SPACE, Rig, as_lease
from tests.unit.test_api_graph import http  # noqa: F401  (the fixture)


def test_a_lease_tokens_task_without_space_lands_in_its_leases_space(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    won = rig.claimed()
    got = http("POST", "/tasks", {"title": "sub", "pool": "builders"}, actor=as_lease(won.lease.id))
    assert got.status == 201, got.data
    assert got.data["task"]["space"] == SPACE and got.data["lease"]["space"] == SPACE
    child = rig.store.get_task(got.data["task"]["id"])
    assert child is not None and child.created_by_lease == won.lease.id


def test_a_lease_token_naming_another_space_is_still_refused_by_name(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    won = rig.claimed()
    got = http("POST", "/tasks", {"space": "ELSE", "title": "s"}, actor=as_lease(won.lease.id))
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.data["error"]["message"].startswith("space:")


def test_an_operator_must_still_name_the_space(http: Any) -> None:  # noqa: F811
    got = http("POST", "/tasks", {"title": "no space"})
    assert (got.status, got.code) == (422, "validation_failed")
    assert got.data["error"]["message"].startswith("space:")


def test_a_token_that_may_not_file_is_forbidden_before_the_missing_space(
    http: Any,  # noqa: F811
) -> None:
    for who in (READER, Principal(kind="worker", token_id="tok-worker")):
        got = http("POST", "/tasks", {"title": "no space"}, actor=who)
        assert got.status == 403, (who.kind, got.data)
