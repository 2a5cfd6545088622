"""PATCH of a task's depends_on: the blockers replaced as a whole, the graph's edges and
counters kept exact, and every refusal (unknown, another space, itself, a cycle) leaving
everything as it was."""

from __future__ import annotations

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Task

from tests.unit.support import ADMIN, MEMBER, POOL, Rig, as_lease


def patch(rig: Rig, task: Task, *depends: str) -> None:
    rig.svc.graph.update_task(MEMBER, task.id, None, None, depends_on=tuple(depends))


def edges(rig: Rig, task: Task) -> set[str]:
    return {b for (b, kind, other) in rig.store.edges if kind == "dependent" and other == task.id}


def counters(rig: Rig, task: Task) -> tuple[int, int]:
    graph = rig.store.get_graph(task.id)
    return graph.blockers_total, graph.blockers_done


def succeed(rig: Rig, task: Task) -> None:
    rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    won = rig.claim()
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})


def test_depends_on_replaces_the_blockers_and_the_counters_follow(rig: Rig) -> None:
    a, _ = rig.task(pool=None)
    b, _ = rig.task(pool=None)
    c, _ = rig.task(pool=None)
    task, _ = rig.task(pool=None, links=TaskLinks(depends_on=(a.id, b.id)))
    assert counters(rig, task) == (2, 0)
    patch(rig, task, b.id, c.id)
    assert edges(rig, task) == {b.id, c.id}
    assert counters(rig, task) == (2, 0)
    seen = rig.svc.graph.get_task(MEMBER, task.id)
    assert seen.task.depends_on == (b.id, c.id)
    assert seen.blocked_reasons[0]["depends_on_task_ids"] == [b.id, c.id]


def test_an_empty_list_removes_every_blocker_and_an_opted_in_task_is_enqueued(rig: Rig) -> None:
    a, _ = rig.task(pool=None)
    links = TaskLinks(depends_on=(a.id,), auto_enqueue_on_ready=True)
    task, lease = rig.task(pool=POOL, links=links)
    assert lease is None
    patch(rig, task)
    assert edges(rig, task) == set() and counters(rig, task) == (0, 0)
    seen = rig.svc.graph.get_task(MEMBER, task.id)
    assert seen.blocked_reasons == () and seen.lease is not None


def test_a_blocker_already_completed_is_accepted_and_does_not_block(rig: Rig) -> None:
    done, _ = rig.task(pool=None)
    succeed(rig, done)
    task, _ = rig.task(pool=None)
    patch(rig, task, done.id)
    assert counters(rig, task) == (1, 1)
    assert rig.svc.graph.get_task(MEMBER, task.id).blocked_reasons == ()


def test_dropping_a_counted_blocker_takes_its_count_back(rig: Rig) -> None:
    done, _ = rig.task(pool=None)
    open_, _ = rig.task(pool=None)
    task, _ = rig.task(pool=None, links=TaskLinks(depends_on=(done.id, open_.id)))
    succeed(rig, done)
    assert counters(rig, task) == (2, 1)
    patch(rig, task, open_.id)
    assert counters(rig, task) == (1, 0)
    # The remaining blocker's success still counts exactly once.
    succeed(rig, open_)
    assert counters(rig, task) == (1, 1)


@pytest.mark.parametrize("why", ["unknown", "itself", "elsewhere", "cycle", "ancestor"])
def test_a_bad_blocker_is_refused_naming_depends_on_and_nothing_changes(rig: Rig, why: str) -> None:
    a, _ = rig.task(pool=None)
    task, _ = rig.task(pool=None, links=TaskLinks(depends_on=(a.id,)))
    if why == "unknown":
        bad = "task_nope"
    elif why == "itself":
        bad = task.id
    elif why == "elsewhere":
        rig.svc.spaces.create_space(ADMIN, "ELSE", "Else", None)
        other, _ = rig.svc.filing.create_task(MEMBER, "ELSE", "there", None, None, {}, None, None)
        bad = other.id
    elif why == "cycle":
        # x waits for y, y waits for task: task waiting for x closes the loop.
        y, _ = rig.task(pool=None, links=TaskLinks(depends_on=(task.id,)))
        x, _ = rig.task(pool=None, links=TaskLinks(depends_on=(y.id,)))
        bad = x.id
    else:
        # A parent completes only once its children have: a child waiting on it never runs.
        child, _ = rig.task(pool=None, links=TaskLinks(parent_id=task.id))
        with pytest.raises(ValidationFailed, match="depends_on"):
            patch(rig, child, task.id)
        return
    before = (rig.store.get_task(task.id), edges(rig, task), counters(rig, task))
    with pytest.raises(ValidationFailed, match="depends_on"):
        patch(rig, task, a.id, bad)
    assert (rig.store.get_task(task.id), edges(rig, task), counters(rig, task)) == before


def test_a_parent_waiting_on_its_child_is_no_cycle(rig: Rig) -> None:
    parent, _ = rig.task(pool=None)
    child, _ = rig.task(pool=None, links=TaskLinks(parent_id=parent.id))
    patch(rig, parent, child.id)
    assert counters(rig, parent) == (1, 0)


def test_a_descendant_reaching_back_is_a_cycle(rig: Rig) -> None:
    # p's success needs its child c; c waits for task: task waiting for p closes the loop.
    task, _ = rig.task(pool=None)
    p, _ = rig.task(pool=None)
    rig.task(pool=None, links=TaskLinks(parent_id=p.id, depends_on=(task.id,)))
    with pytest.raises(ValidationFailed, match="cycle"):
        patch(rig, task, p.id)
