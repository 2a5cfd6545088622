"""The task graph: rollup, dependencies, auto-enqueue, pause, derived status."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.migrations import SchemaState
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import Forbidden, ValidationFailed
from tenure.domain.model import Task, TaskGraph
from tenure.domain.states import LeaseState, TaskStatus

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease


def _task(rig: Rig, pool: str | None = None, **links: object) -> Task:
    task, _ = rig.svc.filing.create_task(
        MEMBER, SPACE, "t", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _run_to(rig: Rig, task: Task, outcome: str = "success") -> None:
    """Enqueue the task, claim it and report `outcome` (success, failure, or cancel)."""
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    won = rig.claim()
    assert won.lease.id == lease.id
    if outcome == "cancel":
        rig.svc.operator.cancel(MEMBER, lease.id)
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    else:
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": outcome})


def _status(rig: Rig, task: Task) -> TaskStatus:
    return rig.svc.graph.get_task(READER, task.id).status


# ------------------------------------------------------------------------------ statuses


def test_a_new_task_with_nothing_in_its_way_is_ready(rig: Rig) -> None:
    task = _task(rig)
    view = rig.svc.graph.get_task(READER, task.id)
    assert (view.status, view.blocked_reasons) == (TaskStatus.READY, ())


def test_a_task_waiting_on_a_blocker_is_blocked_with_its_reason(rig: Rig) -> None:
    blocker = _task(rig)
    waiting = _task(rig, depends_on=(blocker.id,))
    view = rig.svc.graph.get_task(READER, waiting.id)
    assert view.status is TaskStatus.BLOCKED
    assert view.blocked_reasons == ({"source": "dependency", "depends_on_task_ids": [blocker.id]},)


# -------------------------------------------------------------------------------- rollup


def test_the_last_childs_success_completes_the_parent_once(rig: Rig) -> None:
    parent = _task(rig)
    kids = [_task(rig, parent_id=parent.id) for _ in range(3)]
    for kid in kids[:2]:
        _run_to(rig, kid)
    assert _status(rig, parent) is TaskStatus.READY
    assert "task.rollup_completed" not in rig.types(parent.id)
    _run_to(rig, kids[2])
    assert _status(rig, parent) is TaskStatus.COMPLETED
    assert rig.types(parent.id).count("task.rollup_completed") == 1
    graph = rig.store.get_graph(parent.id)
    assert (graph.children_total, graph.children_done) == (3, 3)
    # A replayed reaction changes nothing.
    rig.svc.reactions.react_to_rows([("graph", None, graph)])
    assert rig.types(parent.id).count("task.rollup_completed") == 1


@pytest.mark.parametrize("ending", ["failure", "cancel"])
def test_a_failed_or_cancelled_child_does_not_satisfy_the_rollup(rig: Rig, ending: str) -> None:
    parent = _task(rig)
    good, bad = _task(rig, parent_id=parent.id), _task(rig, parent_id=parent.id)
    _run_to(rig, good)
    _run_to(rig, bad, ending)
    assert _status(rig, parent) is not TaskStatus.COMPLETED
    assert rig.store.get_graph(parent.id).children_done == 1


def test_rollup_cascades_to_the_grandparent(rig: Rig) -> None:
    root = _task(rig)
    middle = _task(rig, parent_id=root.id)
    leaf = _task(rig, parent_id=middle.id)
    _run_to(rig, leaf)
    assert _status(rig, middle) is TaskStatus.COMPLETED
    assert _status(rig, root) is TaskStatus.COMPLETED
    assert rig.svc.graph.get_task(READER, leaf.id).task.ancestors == (root.id, middle.id)


def test_a_parent_whose_own_run_succeeded_stays_open_until_its_children_do(rig: Rig) -> None:
    parent = _task(rig)
    kid = _task(rig, parent_id=parent.id)
    _run_to(rig, parent)
    assert _status(rig, parent) is TaskStatus.RUNNING
    assert rig.store.get_graph(parent.id).succeeded_at is None
    _run_to(rig, kid)
    assert _status(rig, parent) is TaskStatus.COMPLETED


def test_a_parent_in_another_space_is_refused_naming_the_field(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "ELSE", "Elsewhere", None)
    other, _ = rig.svc.filing.create_task(MEMBER, "ELSE", "x", None, None, {}, None, None)
    with pytest.raises(ValidationFailed, match="parent_id"):
        _task(rig, parent_id=other.id)
    with pytest.raises(ValidationFailed, match="parent_id"):
        _task(rig, parent_id="task_nope")


# -------------------------------------------------------------------------- dependencies


def test_only_a_success_of_every_blocker_enqueues_an_opted_in_task_once(rig: Rig) -> None:
    a, b = _task(rig), _task(rig)
    waiting = _task(rig, pool=POOL, depends_on=(a.id, b.id), auto_enqueue_on_ready=True)
    assert rig.svc.graph.get_task(READER, waiting.id).lease is None  # blocked: not enqueued at once
    _run_to(rig, a)
    assert rig.svc.graph.get_task(READER, waiting.id).lease is None
    _run_to(rig, b, "failure")
    assert rig.svc.graph.get_task(READER, waiting.id).status is TaskStatus.BLOCKED
    _run_to(rig, b)
    view = rig.svc.graph.get_task(READER, waiting.id)
    assert view.lease is not None and view.lease.state is LeaseState.PENDING
    assert view.status is TaskStatus.QUEUED
    # Replays and a second readiness signal open no second run.
    rig.svc.graph.auto_enqueue(waiting.id)
    graph = rig.store.get_graph(waiting.id)
    rig.svc.reactions.react_to_rows([("graph", None, graph)])
    leases = [e for e in rig.events(waiting.id) if e.type == "lease.created"]
    assert len(leases) == 1


def test_a_task_not_opted_in_becomes_ready_without_a_run(rig: Rig) -> None:
    a = _task(rig)
    waiting = _task(rig, pool=POOL, depends_on=(a.id,))
    _run_to(rig, a)
    view = rig.svc.graph.get_task(READER, waiting.id)
    assert (view.status, view.lease) == (TaskStatus.READY, None)


def test_a_blocker_that_already_succeeded_counts_at_once(rig: Rig) -> None:
    a = _task(rig)
    _run_to(rig, a)
    waiting = _task(rig, pool=POOL, depends_on=(a.id,), auto_enqueue_on_ready=True)
    view = rig.svc.graph.get_task(READER, waiting.id)
    assert view.status is TaskStatus.QUEUED and view.lease is not None


def test_a_task_linked_to_nothing_keeps_its_success_on_its_lease(rig: Rig) -> None:
    task = _task(rig)
    _run_to(rig, task)
    assert rig.store.get_graph(task.id) == TaskGraph(task.id)  # no row written
    assert not rig.store.in_graph(task.id)
    assert _status(rig, task) is TaskStatus.COMPLETED
    # A dependent filed later copies it to the row, told once already: marked so.
    waiting = _task(rig, pool=POOL, depends_on=(task.id,), auto_enqueue_on_ready=True)
    assert _status(rig, waiting) is TaskStatus.QUEUED
    graph = rig.store.get_graph(task.id)
    assert graph.succeeded_at is not None and graph.success_copied
    assert rig.store.edges_counted(task.id, "dependent", [waiting.id]) == {waiting.id: True}


def test_below_schema_12_every_success_is_written_to_the_graph_row(rig: Rig) -> None:
    """An earlier release, still serving during a deploy, reads a success only there."""
    rig.store.schema = SchemaState(version=7, step=1)
    task = _task(rig)
    _run_to(rig, task)
    graph = rig.store.get_graph(task.id)
    assert graph.succeeded_at is not None and not graph.success_copied


def test_a_failed_blockers_dependent_waits_and_its_next_success_releases_it(rig: Rig) -> None:
    blocker = _task(rig)
    _run_to(rig, blocker, "failure")
    waiting = _task(rig, pool=POOL, depends_on=(blocker.id,), auto_enqueue_on_ready=True)
    assert _status(rig, waiting) is TaskStatus.BLOCKED
    assert rig.store.in_graph(blocker.id)  # the edge links it: its next success is written
    _run_to(rig, blocker)
    assert rig.store.get_graph(blocker.id).succeeded_at is not None
    assert _status(rig, waiting) is TaskStatus.QUEUED


def test_a_parent_whose_run_succeeded_before_its_first_child_stays_completed(rig: Rig) -> None:
    parent = _task(rig)
    _run_to(rig, parent)
    kid = _task(rig, parent_id=parent.id)
    graph = rig.store.get_graph(parent.id)
    assert (graph.children_total, graph.success_copied) == (1, True)
    assert _status(rig, parent) is TaskStatus.COMPLETED
    _run_to(rig, kid)
    graph = rig.store.get_graph(parent.id)
    assert graph.rollup_at is not None and graph.children_done == 1
    assert _status(rig, parent) is TaskStatus.COMPLETED


def test_dependency_on_an_ancestor_is_a_cycle(rig: Rig) -> None:
    parent = _task(rig)
    with pytest.raises(ValidationFailed, match=r"depends_on.*cycle"):
        _task(rig, parent_id=parent.id, depends_on=(parent.id,))


def test_cross_space_and_repeated_dependencies_are_refused(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "ELSE", "Elsewhere", None)
    other, _ = rig.svc.filing.create_task(MEMBER, "ELSE", "x", None, None, {}, None, None)
    with pytest.raises(ValidationFailed, match="depends_on"):
        _task(rig, depends_on=(other.id,))
    a = _task(rig)
    with pytest.raises(ValidationFailed, match="depends_on"):
        _task(rig, depends_on=(a.id, a.id))


def test_patch_turns_auto_enqueue_on_and_enqueues_a_ready_task(rig: Rig) -> None:
    task = _task(rig)
    view = rig.svc.graph.update_task(MEMBER, task.id, True, POOL)
    assert view.task.auto_enqueue_on_ready and view.task.pool == POOL
    assert view.lease is not None and view.status is TaskStatus.QUEUED
    off = rig.svc.graph.update_task(MEMBER, task.id, False, None)
    assert not off.task.auto_enqueue_on_ready
    assert "task.updated" in rig.types(task.id)
    with pytest.raises(Forbidden):
        rig.svc.graph.update_task(READER, task.id, True, None)


# --------------------------------------------------------------------------------- pause


def test_pause_is_inherited_and_claims_skip_the_subtree(rig: Rig) -> None:
    root = _task(rig)
    kid = _task(rig, pool=POOL, parent_id=root.id)
    rig.svc.graph.pause_task(MEMBER, root.id)
    view = rig.svc.graph.get_task(READER, kid.id)
    assert (view.effective_paused, view.paused_by_task_id) == (True, root.id)
    assert {"source": "paused", "paused_by_task_id": root.id} in view.blocked_reasons
    assert view.status is TaskStatus.BLOCKED
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    events = [e for e in rig.events(root.id) if e.type == "task.paused"]
    assert events and events[0].data["by"] == MEMBER.token_id
    rig.svc.graph.resume_task(MEMBER, root.id)
    assert rig.svc.graph.get_task(READER, kid.id).effective_paused is False
    assert rig.claim().lease.task_id == kid.id
    assert "task.resumed" in rig.types(root.id)


def test_a_lease_already_out_keeps_reporting_while_its_task_is_paused(rig: Rig) -> None:
    task, _ = rig.task()
    won = rig.claim()
    rig.svc.graph.pause_task(MEMBER, task.id)
    beat = rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert beat.lease.state is LeaseState.RUNNING
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    assert done.state is LeaseState.COMPLETED


def test_a_paused_dependent_is_skipped_until_it_resumes(rig: Rig) -> None:
    a = _task(rig)
    waiting = _task(rig, pool=POOL, depends_on=(a.id,), auto_enqueue_on_ready=True)
    rig.svc.graph.pause_task(MEMBER, waiting.id)
    _run_to(rig, a)
    assert rig.svc.graph.get_task(READER, waiting.id).lease is None
    resumed = rig.svc.graph.resume_task(MEMBER, waiting.id)
    assert resumed.lease is not None and resumed.status is TaskStatus.QUEUED


# ------------------------------------------------------------------------------ scheduler


def test_scheduler_pause_stops_every_claim_and_resume_restarts_them(rig: Rig) -> None:
    rig.task()
    status = rig.svc.scheduler.pause_scheduler(ADMIN)
    assert status.paused and status.queued_run_count == 1
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    with pytest.raises(Forbidden):
        rig.svc.scheduler.pause_scheduler(MEMBER)
    assert not rig.svc.scheduler.resume_scheduler(ADMIN).paused
    assert rig.claim() is not None
    types = [e.type for e in rig.store.timeline("system", "scheduler", None)]
    assert types == ["scheduler.paused", "scheduler.resumed"]


def test_backlog_shows_paused_leases_only_when_asked(rig: Rig) -> None:
    paused, _ = rig.task()
    free, _ = rig.task()
    rig.svc.graph.pause_task(MEMBER, paused.id)
    shown, cursor = rig.svc.scheduler.backlog(READER, SPACE, include_paused=False)
    assert [e.lease.task_id for e in shown] == [free.id] and cursor is None
    every, _ = rig.svc.scheduler.backlog(READER, SPACE, include_paused=True)
    flags = {e.lease.task_id: (e.effective_paused, e.paused_by_task_id) for e in every}
    assert flags == {paused.id: (True, paused.id), free.id: (False, None)}


def test_capacity_waiting_is_not_starved_and_starved_work_is_parked(rig: Rig) -> None:
    rig.task()
    rig.svc.claims.claim(WORKER, "builders", "w-idle", None, 0, None)  # claims it: none left
    rig.task()  # queued behind a reachable worker: capacity-waiting
    status = rig.svc.scheduler.scheduler_status(READER)
    assert (status.capacity_waiting_count, status.starved_run_count) == (1, 0)
    # The worker fell silent: unreachable 1.5 graces (75 s) after it was last seen; starving
    # counts from then, so 600 s later the lease is starved, not 600 s after it was queued.
    rig.advance(75 + 590)
    status = rig.svc.scheduler.scheduler_status(READER)
    assert (status.capacity_waiting_count, status.starved_run_count) == (0, 0)
    rig.advance(11)
    status = rig.svc.scheduler.scheduler_status(READER)
    assert (status.capacity_waiting_count, status.starved_run_count) == (0, 1)
    rig.advance(3600)
    report = rig.sweep()
    assert len(report.parked) == 1
    parked = report.parked[0]
    assert rig.svc.graph.get_task(READER, parked).status is TaskStatus.NEEDS_ATTENTION
    assert "task.starvation_escalated" in rig.types(parked)
    status = rig.svc.scheduler.scheduler_status(READER)
    assert status.needs_attention_run_count == 1
    assert rig.sweep().parked == []  # parked once


def test_drain_pauses_and_reports_what_is_still_held(rig: Rig) -> None:
    rig.running()
    drained = rig.svc.scheduler.drain(ADMIN, 1)
    assert (drained.drained, drained.active) == (False, 1)
    assert rig.svc.scheduler.scheduler_status(READER).paused
    with pytest.raises(ValidationFailed, match="timeout_seconds"):
        rig.svc.scheduler.drain(ADMIN, 21)


def test_the_payload_names_the_tasks_a_task_waited_for(rig: Rig) -> None:
    blocker = _task(rig)
    _run_to(rig, blocker)
    _task(rig, pool=POOL, depends_on=(blocker.id,))
    won = rig.claim()
    payload = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert payload["subject"]["dependencies"] == [
        {"id": blocker.id, "key": blocker.key, "title": "t"}
    ]


def test_the_rollup_settles_a_parent_parked_in_needs_attention_once(rig: Rig) -> None:
    parent = _task(rig)
    kid = _task(rig, parent_id=parent.id)
    rig.svc.filing.enqueue(MEMBER, kid.id, POOL)
    won = rig.claim()
    # Meanwhile the parent's own run used up its attempts: parked in needs_attention.
    parked = replace(rig.store.get_task(parent.id), attention=True)  # type: ignore[arg-type]
    rig.store.tasks[parent.id] = parked
    rig.store.scheduler = replace(rig.store.scheduler, attention=frozenset({parent.id}))
    assert _status(rig, parent) is TaskStatus.NEEDS_ATTENTION
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    assert _status(rig, parent) is TaskStatus.COMPLETED
    assert parent.id not in rig.store.get_scheduler().attention
    assert rig.types(parent.id).count("task.rollup_completed") == 1
    assert rig.types(parent.id).count("task.rollup_settled") == 1
    graph = rig.store.get_graph(parent.id)
    rig.svc.reactions.react_to_rows([("graph", None, graph)])
    assert rig.types(parent.id).count("task.rollup_settled") == 1
