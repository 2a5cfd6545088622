"""The task graph's part of the store contract, run on the fake, moto and
DynamoDB Local by the same modules that run contract.py."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.ports import Change, RequireNotSucceeded, RequireSucceeded, Unedge
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import Conflict, ValidationFailed
from tenure.domain.model import MAX_DEPENDS_ON, Task
from tenure.triggers import stream as reactor

from tests.conformance.contract import ALPHA, SPACE, ContractRig, MakeRig, make_world
from tests.conftest import ADMIN, WORKER, lease_principal


def _file(r: ContractRig, pool: str | None = None, **links: Any) -> Task:
    task, _ = r.svc.filing.create_task(
        ADMIN, SPACE, "g", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _run(r: ContractRig, task: Task) -> None:
    r.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    won = r.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.task_id == task.id
    r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
    r.drain()


def _types(r: ContractRig, task: Task) -> list[str]:
    r.drain()
    return [e.type for e in r.store.timeline("task", task.id, None)]


def _replay(r: ContractRig) -> None:
    """Every stream record so far, delivered again (where the store has a stream)."""
    if r.records is None:
        return
    for record in r.records():
        reactor.process(r.store, r.svc, {**record, "eventSourceARN": "arn"})
    r.drain()


class GraphContract:
    @pytest.fixture
    def r(self, make_rig: MakeRig) -> ContractRig:
        rig = make_rig()
        make_world(rig.svc)
        return rig

    def test_children_count_on_the_parent_and_the_last_one_rolls_it_up_once(
        self, r: ContractRig
    ) -> None:
        parent = _file(r)
        kids = [_file(r, parent_id=parent.id) for _ in range(2)]
        assert r.store.get_graph(parent.id).children_total == 2
        assert r.store.graph_edges(parent.id, "child", 10) == sorted(k.id for k in kids)
        _run(r, kids[0])
        assert r.store.get_graph(parent.id).rollup_at is None
        _run(r, kids[1])
        graph = r.store.get_graph(parent.id)
        assert (graph.children_done, graph.rollup_at is not None) == (2, True)
        _replay(r)
        assert r.store.get_graph(parent.id).children_done == 2
        assert _types(r, parent).count("task.rollup_completed") == 1

    def test_a_task_s_row_comes_with_whether_anything_links_to_it(self, r: ContractRig) -> None:
        alone, parent, blocker = _file(r), _file(r), _file(r)
        child = _file(r, parent_id=parent.id)
        _file(r, depends_on=(blocker.id,))
        for task, linked in ((alone, False), (parent, True), (blocker, True), (child, False)):
            found, said = r.store.linked_task(task.id)
            assert found is not None and found.id == task.id and found.key == task.key
            assert said is linked and said is r.store.in_graph(task.id), task.key
        assert r.store.linked_task("task_never_filed") == (None, False)
        assert r.store.void_task("task_voided", 2_000_000_000)
        assert r.store.linked_task("task_voided") == (None, False)

    def test_a_dependent_is_enqueued_once_whatever_replays(self, r: ContractRig) -> None:
        blocker = _file(r)
        waiting = _file(r, pool=ALPHA, depends_on=(blocker.id,), auto_enqueue_on_ready=True)
        assert r.store.get_graph(waiting.id).blockers_outstanding == 1
        _run(r, blocker)
        assert r.store.get_graph(waiting.id).auto_enqueued_at is not None
        _replay(r)
        assert _types(r, waiting).count("lease.created") == 1

    def test_an_edge_counts_once_and_a_met_check_holds_only_after_success(
        self, r: ContractRig
    ) -> None:
        blocker = _file(r)
        waiting = _file(r, depends_on=(blocker.id,))
        now = r.clock.now_ms()
        with pytest.raises(Conflict):
            r.store.commit(Change(graph=[RequireSucceeded(blocker.id)]))
        assert r.store.count_edge(blocker.id, "dependent", waiting.id, "blockers_done", now)
        assert not r.store.count_edge(blocker.id, "dependent", waiting.id, "blockers_done", now)
        assert not r.store.count_edge(blocker.id, "dependent", "task_nope", "blockers_done", now)
        assert r.store.get_graph(waiting.id).blockers_done == 1
        assert r.store.settle_graph(blocker.id, "succeeded_at", now)
        assert not r.store.settle_graph(blocker.id, "succeeded_at", now)
        with pytest.raises(Conflict):
            r.store.commit(Change(graph=[RequireNotSucceeded(blocker.id)]))

    def test_a_parent_with_children_outstanding_does_not_succeed_on_its_own(
        self, r: ContractRig
    ) -> None:
        parent = _file(r)
        _file(r, parent_id=parent.id)
        now = r.clock.now_ms()
        assert not r.store.settle_graph(parent.id, "succeeded_at", now)
        assert not r.store.settle_graph(parent.id, "rollup_at", now)

    def test_the_scheduler_row_keeps_its_pause_and_its_sets(self, r: ContractRig) -> None:
        task = _file(r)
        r.svc.graph.pause_task(ADMIN, task.id)
        assert r.store.get_scheduler().paused_tasks == frozenset({task.id})
        r.svc.graph.resume_task(ADMIN, task.id)
        assert r.store.get_scheduler().paused_tasks == frozenset()
        r.store.set_scheduler_paused(True, "tok", r.clock.now_ms())
        state = r.store.get_scheduler()
        assert (state.paused, state.paused_by) == (True, "tok")

    def test_the_queue_counts_and_pages_by_age(self, r: ContractRig) -> None:
        _, first = r.svc.filing.create_task(ADMIN, SPACE, "a", None, None, {}, ALPHA, None)
        r.clock.advance(10)
        r.svc.filing.create_task(ADMIN, SPACE, "b", None, None, {}, ALPHA, None)
        assert first is not None
        assert r.store.count_queue(ALPHA, None, 100) == 2
        assert r.store.count_queue(ALPHA, first.created_at + 1, 100) == 1
        assert r.store.queue_page(ALPHA, first.created_at + 1, 10) == [first.id]

    def test_a_dependent_of_blockers_already_met_is_enqueued_when_filed(
        self, r: ContractRig
    ) -> None:
        blocker = _file(r)
        _run(r, blocker)
        task, lease = r.svc.filing.create_task(
            ADMIN,
            SPACE,
            "late",
            None,
            None,
            {},
            ALPHA,
            None,
            links=TaskLinks(depends_on=(blocker.id,), auto_enqueue_on_ready=True),
        )
        assert lease is not None
        graph = r.store.get_graph(task.id)
        assert (graph.blockers_done, graph.auto_enqueued_at is not None) == (1, True)
        _replay(r)
        assert _types(r, task).count("lease.created") == 1

    def test_as_many_open_blockers_as_a_task_may_have_fit_its_filing_and_a_patch(
        self, r: ContractRig
    ) -> None:
        first = tuple(_file(r).id for _ in range(MAX_DEPENDS_ON))
        task = _file(r, pool=ALPHA, depends_on=first, auto_enqueue_on_ready=True)
        assert r.store.get_graph(task.id).blockers_total == MAX_DEPENDS_ON
        with pytest.raises(ValidationFailed, match=f"at most {MAX_DEPENDS_ON} tasks"):
            _file(r, depends_on=(*first, _file(r).id))
        # Swapping every blocker at once drops each edge and places each new one in one
        # change: more than a change holds, refused by name with nothing written.
        fresh = tuple(_file(r).id for _ in range(MAX_DEPENDS_ON))
        with pytest.raises(ValidationFailed, match=r"depends_on: .* fewer blockers at a time"):
            r.svc.graph.update_task(ADMIN, task.id, None, None, depends_on=fresh)
        assert r.store.get_task(task.id).depends_on == first
        # In steps it goes through: a third of them at a time.
        step = MAX_DEPENDS_ON // 3
        for cut in range(step, MAX_DEPENDS_ON + 1, step):
            now = (*fresh[:cut], *first[cut:])
            r.svc.graph.update_task(ADMIN, task.id, None, None, depends_on=now)
        assert r.store.get_task(task.id).depends_on == fresh
        assert r.store.get_graph(task.id).blockers_total == MAX_DEPENDS_ON
        assert r.store.graph_edges(fresh[0], "dependent", 10) == [task.id]
        assert r.store.graph_edges(first[0], "dependent", 10) == []

    def test_a_patched_depends_on_moves_edges_and_counters_and_a_dropped_edge_never_counts(
        self, r: ContractRig
    ) -> None:
        done, kept, fresh = _file(r), _file(r), _file(r)
        task = _file(r, depends_on=(done.id, kept.id))
        _run(r, done)
        assert r.store.edges_counted(done.id, "dependent", [task.id]) == {task.id: True}
        r.svc.graph.update_task(ADMIN, task.id, None, None, depends_on=(kept.id, fresh.id))
        r.drain()
        graph = r.store.get_graph(task.id)
        assert (graph.blockers_total, graph.blockers_done) == (2, 0)
        assert r.store.edges_counted(done.id, "dependent", [task.id]) == {}
        assert r.store.edges_counted(fresh.id, "dependent", [task.id]) == {task.id: False}
        # Deleted as read: a second delete of the same edge loses its condition.
        drop = Unedge(fresh.id, kind="dependent", other=task.id)
        r.store.commit(Change(graph=[drop]))
        with pytest.raises(Conflict):
            r.store.commit(Change(graph=[drop]))
        # A success counting toward the dropped edge finds nothing to count.
        assert not r.store.count_edge(fresh.id, "dependent", task.id, "blockers_done", 1)
