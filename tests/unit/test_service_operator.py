"""Operator controls: cancel, kill, pause, resume; reading and listing."""

from __future__ import annotations

import pytest
from tenure.domain.errors import (
    Forbidden,
    InvalidTransition,
    LeaseNotFound,
    LeaseTokenMismatch,
    TaskNotFound,
)
from tenure.domain.model import Lease, Principal
from tenure.domain.states import EndReason, LeaseState, Revoke, TaskStatus

from tests.unit.support import MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease


def _ended(rig: Rig, how: str) -> Lease:
    lease = rig.running()
    if how == "completed":
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    elif how == "failed":
        rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "x"})
    elif how == "released":
        rig.svc.reports.release(as_lease(lease.id), lease.id, {})
    elif how == "killed":
        rig.svc.operator.kill(MEMBER, lease.id)
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    return rig.lease(lease.id)


def test_cancel_of_a_pending_lease_cancels_it_at_once(rig: Rig) -> None:
    task, pending = rig.task()
    assert pending is not None
    done = rig.svc.operator.cancel(MEMBER, pending.id)
    assert (done.state, done.end_reason) == (LeaseState.CANCELLED, EndReason.CANCELLED)
    assert rig.lease(pending.id).state is LeaseState.CANCELLED
    assert rig.store.queue_candidates(POOL, 10) == []
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.CANCELLED
    assert rig.types(task.id)[-1] == "lease.cancelled"


@pytest.mark.parametrize("state", ["dispatched", "running", "paused"])
def test_cancel_of_a_held_lease_asks_the_worker_to_stop(rig: Rig, state: str) -> None:
    lease = rig.claimed().lease if state == "dispatched" else rig.running()
    if state == "paused":
        rig.svc.operator.pause(MEMBER, lease.id)
    asked = rig.svc.operator.cancel(MEMBER, lease.id)
    assert (asked.state, asked.revoke) == (LeaseState.CANCELLING, Revoke.CANCEL)
    assert rig.lease(lease.id).state is LeaseState.CANCELLING
    beat = rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    assert (beat.lease.state, beat.revoke) == (LeaseState.CANCELLING, Revoke.CANCEL)
    done = rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "stopped"})
    assert (done.state, done.end_reason) == (LeaseState.CANCELLED, EndReason.CANCELLED)
    assert rig.types(lease.task_id or "")[-2:] == ["lease.cancelling", "lease.cancelled"]


def test_kill_asks_the_worker_to_stop_and_its_report_ends_it_killed(rig: Rig) -> None:
    lease = rig.running()
    asked = rig.svc.operator.kill(MEMBER, lease.id)
    assert (asked.state, asked.revoke) == (LeaseState.CANCELLING, Revoke.KILL)
    assert rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None).revoke is Revoke.KILL
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert (done.state, done.end_reason) == (LeaseState.KILLED, EndReason.KILLED)
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.CANCELLED


def test_kill_escalates_a_cancelling_lease_and_cancel_does_not_soften_a_kill(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.operator.cancel(MEMBER, lease.id)
    assert rig.svc.operator.kill(MEMBER, lease.id).revoke is Revoke.KILL
    again = rig.svc.operator.cancel(MEMBER, lease.id)
    assert (again.state, again.revoke) == (LeaseState.CANCELLING, Revoke.KILL)
    assert rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None).revoke is Revoke.KILL


def test_cancel_twice_changes_nothing_the_second_time(rig: Rig) -> None:
    lease = rig.running()
    first = rig.svc.operator.cancel(MEMBER, lease.id)
    events = rig.events(lease.task_id or "")
    second = rig.svc.operator.cancel(MEMBER, lease.id)
    assert second == rig.lease(lease.id)
    assert second.version == first.version
    assert rig.events(lease.task_id or "") == events


def test_pause_and_resume_a_running_lease(rig: Rig) -> None:
    lease = rig.running()
    paused = rig.svc.operator.pause(MEMBER, lease.id)
    assert (paused.state, paused.revoke) == (LeaseState.PAUSED, Revoke.PAUSE)
    assert rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None).revoke is Revoke.PAUSE
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.RUNNING
    resumed = rig.svc.operator.resume(MEMBER, lease.id)
    assert (resumed.state, resumed.revoke) == (LeaseState.RUNNING, None)
    assert rig.lease(lease.id).state is LeaseState.RUNNING
    assert rig.types(lease.task_id or "")[-2:] == ["lease.paused", "lease.resumed"]


def test_only_a_running_lease_pauses_and_only_a_paused_one_resumes(rig: Rig) -> None:
    dispatched = rig.claimed().lease
    with pytest.raises(InvalidTransition):
        rig.svc.operator.pause(MEMBER, dispatched.id)
    with pytest.raises(InvalidTransition):
        rig.svc.operator.resume(MEMBER, dispatched.id)
    running = rig.running("w2")
    rig.svc.operator.cancel(MEMBER, running.id)
    with pytest.raises(InvalidTransition):
        rig.svc.operator.pause(MEMBER, running.id)
    assert rig.lease(dispatched.id).state is LeaseState.DISPATCHED


@pytest.mark.parametrize("how", ["completed", "failed", "released", "killed"])
@pytest.mark.parametrize("action", ["cancel", "kill"])
def test_cancel_or_kill_of_a_terminal_lease_is_a_no_op_returning_it_unchanged(
    rig: Rig, how: str, action: str
) -> None:
    ended = _ended(rig, how)
    events = rig.events(ended.task_id or "")
    answer = getattr(rig.svc.operator, action)(MEMBER, ended.id)
    assert answer == ended
    assert rig.lease(ended.id) == ended
    assert rig.events(ended.task_id or "") == events


def test_operator_actions_need_a_member_of_the_leases_space(rig: Rig) -> None:
    lease = rig.running()
    elsewhere = Principal(kind="operator", token_id="o", role="admin", spaces=("DEV",))
    for actor, error in [
        (READER, Forbidden),
        (elsewhere, Forbidden),
        (WORKER, Forbidden),
        (as_lease(lease.id), LeaseTokenMismatch),
    ]:
        with pytest.raises(error):
            rig.svc.operator.cancel(actor, lease.id)
    assert rig.lease(lease.id).state is LeaseState.RUNNING


def test_get_lease_needs_read_in_its_space_and_an_unknown_id_is_lease_not_found(
    rig: Rig,
) -> None:
    lease = rig.running()
    assert rig.svc.operator.get_lease(READER, lease.id) == rig.lease(lease.id)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.operator.get_lease(as_lease(lease.id), lease.id)
    with pytest.raises(LeaseNotFound):
        rig.svc.operator.get_lease(READER, "lease_nope")
    with pytest.raises(LeaseNotFound):
        rig.svc.operator.cancel(MEMBER, "lease_nope")
    with pytest.raises(TaskNotFound):
        rig.svc.graph.get_task(READER, "task_nope")


def test_list_leases_is_newest_first_and_pages_with_a_cursor(rig: Rig) -> None:
    made = []
    for _ in range(5):
        _, lease = rig.task()
        assert lease is not None
        made.append(lease.id)
        rig.advance(1)
    page = rig.svc.operator.list_leases(READER, SPACE, 3, None, None, None)
    assert [x.id for x in page.leases] == made[::-1][:3]
    assert page.next_cursor is not None
    rest = rig.svc.operator.list_leases(READER, SPACE, 3, page.next_cursor, None, None)
    assert ([x.id for x in rest.leases], rest.next_cursor) == (made[::-1][3:], None)
    rig.claim()
    running = rig.svc.operator.list_leases(READER, SPACE, 50, None, LeaseState.DISPATCHED, None)
    assert [x.id for x in running.leases] == [made[0]]


def test_activity_is_the_tasks_timeline_oldest_first(rig: Rig) -> None:
    task, _ = rig.task()
    rig.advance(1)
    won = rig.claim()
    rig.advance(1)
    rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    rig.advance(1)
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"outcome": "success"})
    events = rig.svc.filing.activity(READER, task.id).events
    assert [e.type for e in events] == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        "lease.completed",
    ]
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert {e.lease_id for e in events} == {won.lease.id}


def test_activity_keeps_the_order_of_transitions_made_within_one_millisecond(rig: Rig) -> None:
    # The clock does not move: every event below carries the same `at`.
    task, _ = rig.task()
    lease = rig.claim().lease
    rig.svc.reports.start(as_lease(lease.id), lease.id)
    for _ in range(4):
        rig.svc.operator.pause(MEMBER, lease.id)
        rig.svc.operator.resume(MEMBER, lease.id)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert rig.types(task.id) == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        *["lease.paused", "lease.resumed"] * 4,
        "lease.completed",
    ]


def test_activity_pages_with_a_cursor_oldest_first(rig: Rig) -> None:
    task, _ = rig.task()
    won = rig.claim()
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    first = rig.svc.filing.activity(READER, task.id, limit=2)
    assert [e.type for e in first.events] == ["lease.created", "lease.claimed"]
    assert first.next_cursor is not None
    rest = rig.svc.filing.activity(READER, task.id, limit=2, cursor=first.next_cursor)
    assert [e.type for e in rest.events] == ["lease.completed"]
    assert rest.next_cursor is None
