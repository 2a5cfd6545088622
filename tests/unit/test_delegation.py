"""Delegation: tasks filed with a lease token and the completion claim gate."""

from __future__ import annotations

import pytest
from tenure.domain.errors import TenureError, UnverifiedCreatedTasks, ValidationFailed
from tenure.domain.states import EndReason, LeaseState

from tests.unit.support import MEMBER, POOL, READER, SPACE, Rig, as_lease


def _file(rig: Rig, lease_id: str, space: str = SPACE, **kw: object) -> str:
    task, _ = rig.svc.filing.create_task(
        as_lease(lease_id), space, "sub", None, None, {}, None, None, **kw
    )  # type: ignore[arg-type]
    return task.id


def test_a_lease_token_files_a_task_in_its_space_that_remembers_the_lease(rig: Rig) -> None:
    won = rig.claimed()
    child = rig.store.get_task(_file(rig, won.lease.id))
    assert child is not None
    assert (child.space, child.created_by_lease, child.wake_creator) == (
        SPACE,
        won.lease.id,
        True,
    )


def test_an_operators_task_has_no_creator_and_no_wake(rig: Rig) -> None:
    task, _ = rig.task()
    assert (task.created_by_lease, task.wake_creator) == (None, False)


def test_a_lease_token_cannot_file_in_another_space(rig: Rig) -> None:
    won = rig.claimed()
    with pytest.raises(ValidationFailed):
        _file(rig, won.lease.id, space="elsewhere")


def test_completion_naming_its_own_tasks_passes(rig: Rig) -> None:
    won = rig.claimed()
    mine = _file(rig, won.lease.id)
    done = rig.svc.reports.complete(
        as_lease(won.lease.id), won.lease.id, {"created_task_ids": [mine]}
    )
    assert done.state is LeaseState.COMPLETED


def test_phantom_or_foreign_ids_are_refused_and_the_lease_stays_for_a_corrected_report(
    rig: Rig,
) -> None:
    other = rig.claimed("w2")
    theirs = _file(rig, other.lease.id)
    won = rig.claimed("w1")
    mine = _file(rig, won.lease.id)
    operators, _ = rig.task(pool=None)
    claimed = [mine, theirs, "task_deadbeef00", operators.id]
    with pytest.raises(UnverifiedCreatedTasks) as refused:
        rig.svc.reports.complete(
            as_lease(won.lease.id), won.lease.id, {"created_task_ids": claimed}
        )
    for bad in claimed[1:]:
        assert bad in refused.value.message
    assert mine not in refused.value.message
    assert rig.lease(won.lease.id).state is won.lease.state
    task_id = won.lease.task_id
    assert task_id is not None
    assert "task.completion.hallucination_blocked" in rig.types(task_id)
    done = rig.svc.reports.complete(
        as_lease(won.lease.id), won.lease.id, {"created_task_ids": [mine]}
    )
    assert done.state is LeaseState.COMPLETED


def test_task_ids_in_the_result_that_name_nothing_are_recorded_not_refused(rig: Rig) -> None:
    won = rig.claimed()
    mine = _file(rig, won.lease.id)
    result = f"made {mine} and task_0123456789abcdef"
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"result": result})
    assert done.state is LeaseState.COMPLETED
    task_id = won.lease.task_id
    assert task_id is not None
    suspected = [
        e for e in rig.events(task_id) if e.type == "task.completion.hallucination_suspected"
    ]
    assert [e.data["task_ids"] for e in suspected] == [["task_0123456789abcdef"]]
    assert rig.svc.graph.get_task(READER, mine).task.created_by_lease == won.lease.id


def _child_of(rig: Rig, creator_id: str) -> str:
    from tenure.app.tasks.filing import TaskLinks

    task, _ = rig.svc.filing.create_task(
        as_lease(creator_id), SPACE, "sub", None, None, {}, POOL, None, links=TaskLinks()
    )
    return task.id


def test_a_creator_stopped_by_an_operator_stops_its_childrens_open_runs(rig: Rig) -> None:
    creator = rig.running("w-creator")
    held_child = _child_of(rig, creator.id)
    held = rig.claim("w-child").lease
    assert held.task_id == held_child
    queued_child = _child_of(rig, creator.id)
    rig.svc.operator.cancel(MEMBER, creator.id)
    rig.svc.reports.fail(as_lease(creator.id), creator.id, {"error": "asked to stop"})
    assert rig.lease(creator.id).end_reason is EndReason.CANCELLED
    for task_id in (held_child, queued_child):
        task = rig.store.get_task(task_id)
        run = rig.svc.kernel.newest_lease(task) if task else None
        assert run is not None
        assert (run.state, run.end_reason) == (LeaseState.CANCELLED, EndReason.PARENT_STOPPED)
        assert rig.events(task_id)[-1].type == "lease.parent_stopped"
        assert rig.events(task_id)[-1].data["creator_lease_id"] == creator.id
    # The child's worker hears it as an ended lease.
    with pytest.raises(TenureError):
        rig.svc.reports.heartbeat(as_lease(held.id), held.id, None)


def test_a_creator_that_completes_leaves_its_children_running(rig: Rig) -> None:
    creator = rig.running("w-creator")
    child = _child_of(rig, creator.id)
    run = rig.claim("w-child").lease
    rig.svc.reports.complete(as_lease(creator.id), creator.id, {})
    assert rig.lease(run.id).state is LeaseState.DISPATCHED
    assert run.task_id == child


def _child_with_ttl(rig: Rig, creator_id: str, ttl: int) -> str:
    from tenure.app.tasks.filing import TaskLinks

    task, _ = rig.svc.filing.create_task(
        as_lease(creator_id),
        SPACE,
        "sub",
        None,
        None,
        {},
        POOL,
        None,
        links=TaskLinks(ttl_seconds=ttl),
    )
    return task.id


def _run_of(rig: Rig, task_id: str):  # type: ignore[no-untyped-def]
    task = rig.store.get_task(task_id)
    run = rig.svc.kernel.newest_lease(task) if task else None
    assert run is not None
    return run


def test_a_childs_runs_end_as_ttl_expired_once_its_ttl_passes(rig: Rig) -> None:
    rig.sweep()
    creator = rig.running("w-creator")
    short = _child_with_ttl(rig, creator.id, 150)
    held = rig.claim("w-child").lease
    assert held.task_id == short
    lasting = _child_with_ttl(rig, creator.id, 3600)
    ended_at = None
    for minute in range(1, 6):
        rig.advance(60)
        for lease_id in (creator.id, held.id):
            if not rig.lease(lease_id).state.terminal:
                rig.svc.reports.heartbeat(as_lease(lease_id), lease_id, None)
        if rig.sweep().ttl_expired and ended_at is None:
            ended_at = minute
    run = _run_of(rig, short)
    assert (run.state, run.end_reason) == (LeaseState.CANCELLED, EndReason.TTL_EXPIRED)
    assert ended_at is not None and 150 <= ended_at * 60 <= 150 + 120
    assert rig.events(short)[-1].type == "lease.ttl_expired"
    assert _run_of(rig, lasting).state is LeaseState.PENDING
    assert rig.lease(creator.id).state is LeaseState.RUNNING


def test_ttl_seconds_must_be_positive_bounded_and_delegated(rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    creator = rig.running("w-creator")
    for bad in (0, 7 * 86_400 + 1):
        with pytest.raises(ValidationFailed):
            _child_with_ttl(rig, creator.id, bad)
    with pytest.raises(ValidationFailed):
        rig.svc.filing.create_task(
            MEMBER, SPACE, "t", None, None, {}, POOL, None, links=TaskLinks(ttl_seconds=60)
        )
