"""A parent parked in needs_attention parks itself alone, on DynamoDB Local: a child still
queued under it is claimable, reads as claimable and stays counted as queued work."""

from __future__ import annotations

from tenure.app.rows import Rows
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import compose
from tenure.domain.model import Task
from tenure.domain.states import LeaseState, TaskStatus
from tenure.wiring import RandomIds

from tests.conformance.contract import ALPHA, BETA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig

PARKED_AFTER = 600 + 3600 + 1  # past the default min_queued_age and starvation escalation


def _file(rig: Rig, pool: str | None, parent: Task | None = None) -> Task:
    task, _ = rig.svc.filing.create_task(
        ADMIN,
        SPACE,
        "parked-parent",
        None,
        None,
        {},
        pool,
        None,
        links=TaskLinks(parent_id=parent.id if parent else None),
    )
    return task


def _park_by_starvation(rig: Rig) -> tuple[Task, Task]:
    """A parent queued in alpha (no worker ever) parked by the sweeper; then a child of it
    queued in beta."""
    make_world(rig.svc)
    parent = _file(rig, ALPHA)
    rig.clock.advance(PARKED_AFTER)
    assert rig.svc.scheduler.park_starved() == [parent.id]
    child = _file(rig, BETA, parent)
    return parent, child


def test_a_child_queued_under_a_starved_and_parked_parent_is_claimed(rig: Rig) -> None:
    parent, child = _park_by_starvation(rig)
    assert rig.svc.graph.get_task(ADMIN, parent.id).status is TaskStatus.NEEDS_ATTENTION
    # A process that has never read either lease, as another API instance would be.
    cold = compose(Rows.of(rig.store, rig.store), rig.clock, RandomIds())
    won = cold.claims.claim(WORKER, BETA, "w-1", "1.0", 0, None)
    assert won is not None, "the child of a parked parent was never handed out"
    assert won.lease.task_id == child.id
    # The parent itself stays parked: its own run is still skipped.
    assert cold.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None) is None
    lease = rig.store.get_lease(won.lease.id)
    assert lease is not None and lease.state is LeaseState.DISPATCHED


def test_a_child_queued_under_an_escalated_parent_is_claimed(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 1})
    parent = _file(rig, None)
    child = _file(rig, BETA, parent)
    rig.svc.blocks.block_task(ADMIN, parent.id, "needs_input", "which branch?")
    assert rig.svc.graph.get_task(ADMIN, parent.id).status is TaskStatus.NEEDS_ATTENTION
    won = rig.svc.claims.claim(WORKER, BETA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.task_id == child.id


def test_the_parked_parents_child_counts_as_queued_not_held(rig: Rig) -> None:
    _park_by_starvation(rig)
    status = rig.svc.scheduler.scheduler_status(ADMIN)
    # The parent counts once, as parked; its child is queued work a claim could take.
    assert status.needs_attention_run_count == 1
    assert status.queued_run_count == 1
