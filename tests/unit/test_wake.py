"""Wake-creator: a delegated task's endings wake the lease that filed it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tenure.domain.errors import Unavailable
from tenure.domain.model import Task
from tenure.domain.states import EndReason, LeaseState, OnExpiry
from tenure.store import items
from tenure.store.codec import dump
from tenure.triggers import stream

from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, Rig, as_lease, emitted_metrics


class Bus:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        self.sent.append((source, detail_type, detail))


def _rig_with_bus(rig: Rig) -> Bus:
    bus = Bus()
    rig.svc.wake.publisher = bus
    return bus


def _delegate(rig: Rig, creator_id: str, pool: str | None = POOL, **kw: Any) -> Task:
    from tenure.app.tasks.filing import TaskLinks

    task, _ = rig.svc.filing.create_task(
        as_lease(creator_id), SPACE, "sub", None, None, {}, pool, None, links=TaskLinks(**kw)
    )
    return task


def _wakes(rig: Rig, creator_task_id: str) -> list[dict[str, Any]]:
    return [e.data for e in rig.events(creator_task_id) if e.type == "task.wake_creator"]


def test_the_childs_completion_wakes_its_creator_once(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id)
    won = rig.claim("w2")
    assert won.lease.task_id == child.id
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    assert [(s, t, d["child_task_id"], d["child_status"]) for s, t, d in bus.sent] == [
        ("tenure", "task.wake_creator", child.id, "completed")
    ]
    detail = bus.sent[0][2]
    assert detail["creator_lease_id"] == creator.id
    assert not any("token" in key for key in detail)
    assert creator.task_id is not None
    assert len(_wakes(rig, creator.task_id)) == 1
    # A redelivered stream record changes nothing.
    ended = rig.lease(won.lease.id)
    rig.svc.reactions.react_to_rows([("lease", won.lease, ended)])
    assert len(bus.sent) == 1 and len(_wakes(rig, creator.task_id)) == 1


def test_a_block_and_an_escalation_wake_the_creator(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id, pool=None)
    first = rig.svc.blocks.block_task(MEMBER, child.id, "error", "x")
    rig.svc.blocks.clear_block(MEMBER, child.id, first["id"])
    rig.svc.blocks.block_task(MEMBER, child.id, "error", "again")
    assert [d["child_status"] for _, _, d in bus.sent] == ["blocked", "needs_attention"]


def test_no_wake_for_the_creators_own_block_an_ended_creator_or_an_opt_out(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id, pool=None)
    rig.svc.blocks.block_task(as_lease(creator.id), child.id, "needs_input", "mine")
    quiet = _delegate(rig, creator.id, pool=None, wake_creator=False)
    rig.svc.blocks.block_task(MEMBER, quiet.id, "needs_input", "opted out")
    assert bus.sent == []
    rig.svc.reports.complete(as_lease(creator.id), creator.id, {})
    rig.svc.blocks.block_task(MEMBER, child.id, "error", "creator gone")
    assert bus.sent == []


def test_an_operators_task_wakes_nobody(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    rig.claimed("w1")
    task, _ = rig.task(pool=None)
    rig.svc.blocks.block_task(MEMBER, task.id, "error", "x")
    assert bus.sent == []


def test_a_second_block_on_a_blocked_child_is_no_new_transition(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id, pool=None)
    rig.svc.blocks.block_task(MEMBER, child.id, "needs_input", "a question")
    rig.svc.blocks.block_task(MEMBER, child.id, "dependency_external", "and a vendor")
    assert [d["child_status"] for _, _, d in bus.sent] == ["blocked"]
    assert creator.task_id is not None and len(_wakes(rig, creator.task_id)) == 1


def test_the_creators_own_force_fail_of_its_childs_lease_wakes_nobody(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    rig.svc.instance.update_instance(ADMIN, {"allow_agent_force": True})
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id)
    assert child.job_id is not None
    run = rig.svc.graph.get_task(MEMBER, child.id).lease
    assert run is not None
    [row] = rig.svc.force.bulk_fail(as_lease(creator.id), [run.id], "the creator gave up on it")
    assert row.ok and rig.lease(run.id).state.terminal
    assert bus.sent == []
    # The same force by an operator does wake the creator.
    other = _delegate(rig, creator.id)
    other_run = rig.svc.graph.get_task(MEMBER, other.id).lease
    assert other_run is not None
    rig.svc.force.bulk_fail(MEMBER, [other_run.id], "an operator stopped it")
    assert [d["child_status"] for _, _, d in bus.sent] == ["failed"]


def test_a_wake_for_a_failed_child_says_its_run_is_final(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    child = _delegate(rig, creator.id)
    won = rig.claim("w-child")
    assert won.lease.task_id == child.id
    rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    wakes = _wakes(rig, creator.task_id or "")
    assert [(w["child_status"], w["final"]) for w in wakes] == [("failed", True)]
    assert bus.sent[-1][2]["final"] is True


def test_a_block_wake_says_nothing_of_finality(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    child = _delegate(rig, creator.id)
    rig.svc.blocks.block_task(MEMBER, child.id, "needs_input", "which region?")
    assert [d["child_status"] for (_, _, d) in bus.sent] == ["blocked"]
    assert "final" not in bus.sent[0][2]


def _sweep_until(rig: Rig, seconds: int, beat: str) -> None:
    """Sweep once a minute for `seconds`, the creator heartbeating before each pass."""
    rig.sweep()
    for _ in range(seconds // 60):
        rig.advance(60)
        rig.svc.reports.heartbeat(as_lease(beat), beat, None)
        rig.sweep()


def test_a_child_lost_as_worker_lost_wakes_its_creator_as_a_final_failure(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    rig.make_pool("strict", on_expiry=OnExpiry.FAIL)
    creator = rig.running("w-creator", pool="strict")
    child = _delegate(rig, creator.id, pool="strict")
    won = rig.claim("w-child", pool="strict")
    assert won.lease.task_id == child.id
    _sweep_until(rig, 480, beat=creator.id)
    lost = rig.lease(won.lease.id)
    assert (lost.state, lost.end_reason) == (LeaseState.LOST, EndReason.WORKER_LOST)
    wakes = _wakes(rig, creator.task_id or "")
    assert [(w["child_status"], w["final"], w["child_lease_id"]) for w in wakes] == [
        ("failed", True, won.lease.id)
    ]
    assert len(bus.sent) == 1


def test_a_requeued_lost_child_wakes_nobody(rig: Rig) -> None:
    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    child = _delegate(rig, creator.id)
    won = rig.claim("w-child")
    assert won.lease.task_id == child.id
    _sweep_until(rig, 480, beat=creator.id)
    assert rig.lease(won.lease.id).end_reason is EndReason.EXPIRED
    assert bus.sent == [] and _wakes(rig, creator.task_id or "") == []


def test_a_parent_wakes_its_creator_once_when_its_children_roll_it_up(rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    parent = _delegate(rig, creator.id)
    own = rig.claim("w-parent")
    assert own.lease.task_id == parent.id
    kid, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "kid", None, None, {}, POOL, None, links=TaskLinks(parent_id=parent.id)
    )
    rig.svc.reports.complete(as_lease(own.lease.id), own.lease.id, {})
    assert bus.sent == []  # its own run succeeded, but a child is still open
    run = rig.claim("w-kid")
    assert run.lease.task_id == kid.id
    rig.svc.reports.complete(as_lease(run.lease.id), run.lease.id, {})
    wakes = _wakes(rig, creator.task_id or "")
    assert [(w["child_task_id"], w["child_status"], w["final"]) for w in wakes] == [
        (parent.id, "completed", True)
    ]
    assert len(bus.sent) == 1
    # A replayed graph record wakes nobody again.
    graph = rig.store.get_graph(parent.id)
    rig.svc.reactions.react_to_rows([("graph", None, graph)])
    assert len(bus.sent) == 1


def test_a_parent_with_no_run_of_its_own_wakes_once_at_rollup(rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    parent = _delegate(rig, creator.id, pool=None)
    kid, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "kid", None, None, {}, POOL, None, links=TaskLinks(parent_id=parent.id)
    )
    run = rig.claim("w-kid")
    rig.svc.reports.complete(as_lease(run.lease.id), run.lease.id, {})
    assert [(d["child_task_id"], d["child_status"]) for _, _, d in bus.sent] == [
        (parent.id, "completed")
    ]
    assert kid.id == run.lease.task_id


def test_the_reactor_reads_a_task_as_filed_at_half_price_and_never_misses_a_new_one(
    rig: Rig,
) -> None:
    """Whether to wake, and whom, was fixed when the task was filed: the reaction reads the
    task eventually consistent. A task filed so recently that such a read does not see it
    yet is read again consistently, so the wake still goes out. (A failure: on a success the
    breaker has read the task consistently for the same record, and the wake reuses that
    row: test_domain_events.py.)"""
    bus = _rig_with_bus(rig)
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id)
    won = rig.claim("w2")
    reads: list[bool] = []
    real, linked = rig.store.get_task, rig.store.linked_task

    def not_yet_visible(task_id: str, consistent: bool = True) -> Task | None:
        reads.append(consistent)
        return real(task_id) if consistent else None

    def read_with_links(task_id: str) -> tuple[Task | None, bool]:
        reads.append(True)  # the consistent read of the row, whether it is linked beside it
        return linked(task_id)

    rig.store.get_task = not_yet_visible  # type: ignore[method-assign]
    rig.store.linked_task = read_with_links  # type: ignore[method-assign]
    try:
        rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {})
    finally:
        rig.store.get_task = real  # type: ignore[method-assign]
        rig.store.linked_task = linked  # type: ignore[method-assign]
    eventual = [n for n, consistent in enumerate(reads) if not consistent]
    assert eventual, "the reactions read the filed task eventually consistent"
    assert all(reads[n + 1] for n in eventual), "a task not seen is read again consistently"
    assert [(d["child_task_id"], d["child_status"]) for _, _, d in bus.sent] == [
        (child.id, "failed")
    ]


def test_a_parent_that_succeeded_before_its_first_child_wakes_its_creator_once(rig: Rig) -> None:
    """Linked to nothing when its run succeeded, it woke its creator from its lease; the child
    filed after copies that success to its graph row, and neither a replay of the lease's
    record nor the rollup wakes the creator again."""
    from tenure.app.tasks.filing import TaskLinks

    bus = _rig_with_bus(rig)
    creator = rig.running("w-creator")
    parent = _delegate(rig, creator.id)
    own = rig.claim("w-parent")
    assert own.lease.task_id == parent.id
    rig.svc.reports.complete(as_lease(own.lease.id), own.lease.id, {})
    assert [(d["child_task_id"], d["child_status"]) for _, _, d in bus.sent] == [
        (parent.id, "completed")
    ]
    kid, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "kid", None, None, {}, POOL, None, links=TaskLinks(parent_id=parent.id)
    )
    assert rig.store.get_graph(parent.id).success_copied
    rig.svc.reactions.react_to_rows([("lease", own.lease, rig.lease(own.lease.id))])
    run = rig.claim("w-kid")
    assert run.lease.task_id == kid.id
    rig.svc.reports.complete(as_lease(run.lease.id), run.lease.id, {})
    assert rig.store.get_graph(parent.id).rollup_at is not None
    assert len(bus.sent) == 1 and len(_wakes(rig, creator.task_id or "")) == 1


class DeadBus:
    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        raise Unavailable("the event bus refused the event (ThrottlingException)")


def test_a_wake_the_bus_never_took_is_logged_by_creator_and_child_and_counted(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # It is on the creator's timeline and will not be sent again (at most once), so the log
    # line and the count are how an operator learns which creator missed its wake.
    rig.svc.wake.publisher = DeadBus()
    creator = rig.claimed("w1").lease
    child = _delegate(rig, creator.id)
    won = rig.claim("w2")
    with caplog.at_level(logging.ERROR), pytest.raises(Unavailable):
        rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    (line,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    said = line.getMessage()
    assert creator.id in said and child.id in said and "ThrottlingException" in said
    assert rig.svc.kernel.counters["wake_publish_failed"] == 1
    assert creator.task_id is not None and len(_wakes(rig, creator.task_id)) == 1


def test_the_reactor_publishes_the_wakes_the_bus_never_took_as_a_metric(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.svc.wake.publisher = DeadBus()
    creator = rig.claimed("w1").lease
    _delegate(rig, creator.id)
    won = rig.claim("w2")
    rig.store.reactor = None  # the reactions wait for the stream, as deployed
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    record = {
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "SequenceNumber": f"{1:021d}",
            "NewImage": dump(items.lease_item(done)),
            "OldImage": dump(items.lease_item(won.lease)),
        },
    }
    monkeypatch.setattr(stream.wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(stream.wiring, "publisher", lambda: None)
    with pytest.raises(Exception, match="All records failed"):
        stream.lambda_handler({"Records": [record]}, None)
    emitted = emitted_metrics(capsys.readouterr().out)
    assert (emitted["WakesUnpublished"], emitted["ReactorRecordsFailed"]) == (1, 1)
    # Delivered again, the record finds the wake written and sends nothing: no second count.
    assert stream.handle({"Records": [record]}, None) == {"batchItemFailures": []}
    assert rig.svc.kernel.counters["wake_publish_failed"] == 1
