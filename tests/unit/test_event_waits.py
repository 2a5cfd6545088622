"""Event waits: a block of kind `event` until POST /events names its (name, key); the kept
event that clears blocks placed after it; what is refused."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.flow.events import EVENTS_IN_PAYLOAD, PAGE, PAGES_PER_REQUEST
from tenure.domain.errors import Forbidden, LeaseTokenMismatch, ValidationFailed
from tenure.domain.model import Principal, Task
from tenure.domain.states import TaskStatus

from tests.unit.support import ADMIN, MEMBER, READER, SPACE, WORKER, Rig, as_lease

OTHER = "SEC"


def _wait(rig: Rig, task: Task, name: str = "deploy.done", key: str = "v1") -> dict[str, Any]:
    return rig.svc.event_waits.block(MEMBER, task.id, "event", None, event=name, key=key)


def _send(
    rig: Rig, name: str = "deploy.done", key: str = "v1", data: Any = None, space: str = SPACE
) -> int:
    return rig.svc.event_waits.send(MEMBER, space, name, key, data)


def _status(rig: Rig, task: Task) -> TaskStatus:
    return rig.svc.graph.get_task(READER, task.id).status


def test_an_event_clears_the_blocks_waiting_for_it_and_records_it_on_each(rig: Rig) -> None:
    first, _ = rig.task(pool=None)
    second, _ = rig.task(pool=None)
    other, _ = rig.task(pool=None)
    for task in (first, second):
        block = _wait(rig, task)
        assert (block["kind"], block["event"], block["key"], block["state"]) == (
            "event",
            "deploy.done",
            "v1",
            "open",
        )
        assert _status(rig, task) is TaskStatus.BLOCKED
    _wait(rig, other, key="v2")
    assert _send(rig, data={"sha": "abc"}) == 2
    for task in (first, second):
        assert _status(rig, task) is TaskStatus.READY
        assert rig.types(task.id).count("task.event_received") == 1
    assert _status(rig, other) is TaskStatus.BLOCKED  # another key: still waiting
    assert "task.event_received" not in rig.types(other.id)


def test_a_second_identical_event_clears_nothing_more(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    _wait(rig, task)
    assert _send(rig) == 1
    assert _send(rig) == 0
    assert rig.types(task.id).count("task.event_received") == 1


def test_every_later_payload_carries_the_events_received(rig: Rig) -> None:
    task, _ = rig.task()
    _wait(rig, task)
    _send(rig, data={"sha": "abc"})
    rig.advance(1)
    won = rig.claim()
    events = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)["events"]
    assert [(e["name"], e["key"], e["data"]) for e in events] == [
        ("deploy.done", "v1", {"sha": "abc"})
    ]
    assert events[0]["at"].endswith("Z")


def test_a_payload_carries_only_the_last_twenty_events(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    for n in range(EVENTS_IN_PAYLOAD + 2):
        _wait(rig, task, key=f"k{n}")
        rig.advance(1)
        _send(rig, key=f"k{n}", data=n)
    rig.svc.filing.enqueue(MEMBER, task.id, "builders")
    won = rig.claim()
    events = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)["events"]
    assert [e["data"] for e in events] == list(range(2, EVENTS_IN_PAYLOAD + 2))


def test_a_block_placed_after_the_event_within_the_ttl_is_cleared_at_once(rig: Rig) -> None:
    _send(rig, data={"ok": True})
    rig.advance(3599)
    task, _ = rig.task(pool=None)
    block = _wait(rig, task)
    assert (block["state"], block["closed_by"]) == ("cleared", "event")
    assert _status(rig, task) is TaskStatus.READY
    assert rig.types(task.id).count("task.event_received") == 1


def test_a_block_placed_after_the_ttl_waits_for_the_next_event(rig: Rig) -> None:
    _send(rig)
    rig.advance(3601)
    task, _ = rig.task(pool=None)
    assert _wait(rig, task)["state"] == "open"
    assert _send(rig) == 1


def test_the_ttl_is_the_instance_setting(rig: Rig) -> None:
    rig.svc.instance.update_instance(ADMIN, {"event_ttl_seconds": 10})
    _send(rig)
    rig.advance(11)
    task, _ = rig.task(pool=None)
    assert _wait(rig, task)["state"] == "open"


def test_event_blocks_never_trip_the_breaker(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    for n in range(5):  # the default limit is 2 blocks of a kind
        _wait(rig, task, key=f"k{n}")
        _send(rig, key=f"k{n}")
    seen = rig.svc.graph.get_task(READER, task.id)
    assert seen.status is TaskStatus.READY
    assert "task.escalated" not in rig.types(task.id)
    stored = rig.store.get_task(task.id)
    assert stored is not None and "event" not in (stored.block_counts or {})


def test_a_queued_run_is_held_until_the_event_and_claimable_after(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    _wait(rig, task)
    assert rig.svc.claims.claim(WORKER, "builders", "w1", "1.0", 0, None) is None
    _send(rig)
    assert rig.claim().lease.id == lease.id


def test_many_waiting_blocks_past_one_request_are_cleared_in_the_background(rig: Rig) -> None:
    in_request = PAGE * PAGES_PER_REQUEST
    tasks = [rig.task(pool=None)[0] for _ in range(in_request + 30)]
    for task in tasks:
        _wait(rig, task)
    cleared = _send(rig)
    # This request's pages, and the one clear that hands the rest on (the fake plays the
    # reactor inside that write, so the rest is already done here).
    assert cleared == in_request + 1
    for task in tasks:
        assert rig.types(task.id).count("task.event_received") == 1
        assert _status(rig, task) is TaskStatus.READY
    assert rig.store.event_waits(SPACE, "deploy.done", "v1", 10) == []


def test_an_event_of_another_space_clears_nothing(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, OTHER, "Security", None)
    task, _ = rig.task(pool=None)
    _wait(rig, task)
    assert _send(rig, space=OTHER) == 0
    assert _status(rig, task) is TaskStatus.BLOCKED


def test_a_token_limited_to_another_space_cannot_signal(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, OTHER, "Security", None)
    task, _ = rig.task(pool=None)
    _wait(rig, task)
    limited = Principal(kind="operator", token_id="tok-sec", role="member", spaces=(OTHER,))
    with pytest.raises(Forbidden):
        rig.svc.event_waits.send(limited, SPACE, "deploy.done", "v1", None)
    assert _status(rig, task) is TaskStatus.BLOCKED


def test_a_read_token_cannot_signal(rig: Rig) -> None:
    with pytest.raises(Forbidden):
        rig.svc.event_waits.send(READER, SPACE, "deploy.done", "v1", None)


def test_a_lease_token_signals_only_in_its_own_space(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, OTHER, "Security", None)
    waiting, _ = rig.task(pool=None)
    _wait(rig, waiting)
    won = rig.claimed()
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.event_waits.send(as_lease(won.lease.id), OTHER, "deploy.done", "v1", None)
    assert rig.svc.event_waits.send(as_lease(won.lease.id), SPACE, "deploy.done", "v1", 1) == 1


def test_a_lease_token_waits_for_an_event_on_its_own_task_and_its_run_is_released(
    rig: Rig,
) -> None:
    won = rig.claimed()
    task_id = won.lease.task_id or ""
    block = rig.svc.event_waits.block(
        as_lease(won.lease.id), task_id, "event", "need the build", event="build", key="42"
    )
    assert block["placed_by"] == {"kind": "lease", "id": won.lease.id}
    assert rig.lease(won.lease.id).state.terminal  # released, no attempt used
    assert rig.svc.event_waits.send(MEMBER, SPACE, "build", "42", {"artifact": "a.tgz"}) == 1
    assert _status(rig, rig.store.get_task(task_id)) is TaskStatus.QUEUED  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "key"), [("", "k"), ("n", ""), ("x" * 129, "k"), ("n", "x" * 129)]
)
def test_names_and_keys_outside_1_to_128_characters_are_refused(
    rig: Rig, name: str, key: str
) -> None:
    task, _ = rig.task(pool=None)
    with pytest.raises(ValidationFailed):
        _send(rig, name=name, key=key)
    with pytest.raises(ValidationFailed):
        _wait(rig, task, name=name, key=key)
    assert rig.store.kept_events == {}
    assert rig.store.event_wait_rows == {}


def test_data_over_65536_bytes_is_refused_and_nothing_is_kept(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    _wait(rig, task)
    with pytest.raises(ValidationFailed, match="data"):
        _send(rig, data="x" * 65_536)
    assert rig.store.kept_events == {}
    assert _status(rig, task) is TaskStatus.BLOCKED
    assert _send(rig, data="x" * 65_000) == 1


def test_an_event_block_without_its_event_or_key_is_refused(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    with pytest.raises(ValidationFailed):
        rig.svc.event_waits.block(MEMBER, task.id, "event", None, event="n", key=None)
    assert rig.svc.blocks.list_blocks(MEMBER, task.id) == []


def test_data_carrying_a_raw_token_is_refused_and_nothing_is_kept(rig: Rig) -> None:
    won = rig.claimed()
    task, _ = rig.task(pool=None)
    _wait(rig, task)
    with pytest.raises(ValidationFailed, match="data"):
        _send(rig, data={"note": f"use {won.token}"})
    with pytest.raises(ValidationFailed, match="key"):
        _send(rig, key=won.token)
    with pytest.raises(ValidationFailed, match="key"):
        _wait(rig, task, key=won.token)
    assert rig.store.kept_events == {}
    assert len(rig.store.event_wait_rows.get((SPACE, "deploy.done", "v1"), set())) == 1
    assert _status(rig, task) is TaskStatus.BLOCKED
