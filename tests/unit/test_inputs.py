"""A payload's `inputs`: the results of the tasks it depends on and of its children, bounded in
count and bytes, and read only when the task row says there is something to read."""

from __future__ import annotations

import json
from typing import Any

from tenure.app.flow.inputs import MAX_INPUT_BYTES, MAX_INPUTS
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.events import TaskSucceeded
from tenure.domain.model import Task
from tenure.domain.states import SubjectKind

from tests.unit.support import MEMBER, POOL, SPACE, Rig, as_lease
from tests.unit.test_payload import _held_lease_on


def _task(rig: Rig, title: str = "t", pool: str | None = None, **links: Any) -> Task:
    task, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, title, None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _finish(rig: Rig, task: Task, body: dict[str, Any]) -> None:
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    won = rig.claim()
    assert won.lease.id == lease.id
    rig.svc.reports.complete(as_lease(lease.id), lease.id, body)


def _payload_of(rig: Rig, task: Task) -> dict[str, Any]:
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    won = rig.claim()
    assert won.lease.id == lease.id
    return rig.svc.payloads.payload(as_lease(lease.id), lease.id)


def test_a_task_with_nothing_around_it_has_empty_inputs_and_reads_nothing_for_them(
    rig: Rig,
) -> None:
    task = _task(rig)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    rig.claim()
    asked: list[str] = []
    store = rig.store
    for name in ("newest_children", "task_entries"):
        original = getattr(store, name)

        def spy(*args: Any, _name: str = name, _original: Any = original) -> Any:
            asked.append(_name)
            return _original(*args)

        setattr(store, name, spy)
    bundle = rig.svc.payloads.payload(as_lease(lease.id), lease.id)
    assert bundle["inputs"] == []
    assert "inputs_truncated" not in bundle
    assert asked == []


def test_inputs_list_dependencies_then_children_newest_first_with_results(rig: Rig) -> None:
    first = _task(rig, "first")
    second = _task(rig, "second")
    _finish(rig, first, {"outcome": "success", "result": {"rows": 3}})
    _finish(rig, second, {"outcome": "failure", "result": {"rows": 0}})
    parent = _task(rig, "parent", depends_on=(first.id, second.id))
    older = _task(rig, "older", parent_id=parent.id)
    newer = _task(rig, "newer", parent_id=parent.id)
    _finish(rig, older, {"outcome": "success", "result": "done"})
    inputs = _payload_of(rig, parent)["inputs"]
    assert [(i["task_id"], i["title"], i["result"]) for i in inputs] == [
        (first.id, "first", {"rows": 3}),
        (second.id, "second", None),  # not a successful completion: no result
        (newer.id, "newer", None),
        (older.id, "older", "done"),
    ]
    assert [i["status"] for i in inputs] == ["completed", "failed", "ready", "completed"]
    assert set(inputs[0]) == {"task_id", "key", "title", "status", "result"}
    assert inputs[0]["key"] == first.key


def test_a_payload_names_its_dependencies_from_the_same_read(rig: Rig) -> None:
    blocker = _task(rig, "blocker")
    _finish(rig, blocker, {"outcome": "success"})
    waiting = _task(rig, "waiting", depends_on=(blocker.id,))
    subject = _payload_of(rig, waiting)["subject"]
    assert subject["dependencies"] == [{"id": blocker.id, "key": blocker.key, "title": "blocker"}]


def test_the_first_child_marks_its_parent_and_later_ones_write_nothing_more(rig: Rig) -> None:
    parent = _task(rig)
    assert rig.store.get_task(parent.id).has_children is None  # type: ignore[union-attr]
    _task(rig, parent_id=parent.id)
    marked = rig.store.get_task(parent.id)
    assert marked is not None and marked.has_children is True
    assert marked.version == parent.version  # not a version bump: no rival write loses to it
    _task(rig, parent_id=parent.id)
    assert rig.store.get_task(parent.id) == marked


def test_inputs_past_fifty_entries_are_cut_and_say_so(rig: Rig) -> None:
    parent = _task(rig, "parent")
    kids = [_task(rig, f"kid {n}", parent_id=parent.id) for n in range(MAX_INPUTS + 1)]
    bundle = _payload_of(rig, parent)
    assert len(bundle["inputs"]) == MAX_INPUTS
    assert bundle["inputs_truncated"] is True
    assert bundle["inputs"][0]["task_id"] == kids[-1].id  # the newest kept, the oldest cut
    assert kids[0].id not in {i["task_id"] for i in bundle["inputs"]}


def test_inputs_past_256_kb_are_cut_dependencies_kept_first(rig: Rig) -> None:
    big = "x" * (100 * 1024)
    blockers = [_task(rig, f"b{n}") for n in range(3)]
    for blocker in blockers:
        _finish(rig, blocker, {"outcome": "success", "result": big})
    parent = _task(rig, "parent", depends_on=tuple(b.id for b in blockers))
    child = _task(rig, "child", parent_id=parent.id)
    bundle = _payload_of(rig, parent)
    assert [i["task_id"] for i in bundle["inputs"]] == [blockers[0].id, blockers[1].id]
    assert child.id not in {i["task_id"] for i in bundle["inputs"]}
    assert bundle["inputs_truncated"] is True
    assert len(json.dumps(bundle["inputs"]).encode()) <= MAX_INPUT_BYTES


def test_a_space_payload_carries_empty_inputs(rig: Rig) -> None:
    lease_id = _held_lease_on(rig, SubjectKind.SPACE, SPACE, None)
    bundle = rig.svc.payloads.payload(as_lease(lease_id), lease_id)
    assert (bundle["subject"]["kind"], bundle["inputs"]) == ("space", [])


def test_a_rerun_after_success_keeps_the_last_successful_result(rig: Rig) -> None:
    blocker = _task(rig, "blocker")
    _finish(rig, blocker, {"outcome": "success", "result": {"run": 1}})
    parent = _task(rig, "parent")
    child = _task(rig, "child", parent_id=parent.id)
    _finish(rig, child, {"outcome": "success", "result": "first"})
    # Both run again, and the new runs fail: what they handed on stays the first run's.
    _finish(rig, blocker, {"outcome": "failure", "result": {"run": 2}})
    _finish(rig, child, {"outcome": "failure", "result": "second"})
    dependent = _task(rig, "dependent", depends_on=(blocker.id,))
    waiting = _payload_of(rig, dependent)["inputs"]
    assert [(i["task_id"], i["result"]) for i in waiting] == [(blocker.id, {"run": 1})]
    above = _payload_of(rig, parent)["inputs"]
    assert [(i["task_id"], i["result"]) for i in above] == [(child.id, "first")]


def test_a_second_success_replaces_the_first_and_a_replay_of_the_first_does_not(
    rig: Rig,
) -> None:
    blocker = _task(rig, "blocker")
    _finish(rig, blocker, {"outcome": "success", "result": 1})
    # Linked to nothing, the task keeps its success on its lease: no graph row is written.
    assert rig.store.get_graph(blocker.id).succeeded_lease is None
    ran = rig.svc.filing.enqueue(MEMBER, blocker.id, POOL)
    # Its next run copies that success to its graph row first, naming the lease.
    first = rig.store.get_graph(blocker.id).succeeded_lease
    assert first is not None and first != ran.id
    assert rig.claim().lease.id == ran.id
    rig.svc.reports.complete(as_lease(ran.id), ran.id, {"outcome": "success", "result": 2})
    second = rig.store.get_graph(blocker.id).succeeded_lease
    assert second == ran.id and second > first
    older = rig.store.get_lease(first)
    assert older is not None
    rig.svc.graph.after_lease(TaskSucceeded(older), rig.svc.reactions.context())  # a replay
    assert rig.store.get_graph(blocker.id).succeeded_lease == second
    dependent = _task(rig, "dependent", depends_on=(blocker.id,))
    assert [i["result"] for i in _payload_of(rig, dependent)["inputs"]] == [2]


def test_a_task_that_never_succeeded_has_a_null_result(rig: Rig) -> None:
    blocker = _task(rig, "blocker")
    _finish(rig, blocker, {"outcome": "failure", "result": {"partial": True}})
    dependent = _task(rig, "dependent", depends_on=(blocker.id,))
    assert [i["result"] for i in _payload_of(rig, dependent)["inputs"]] == [None]
