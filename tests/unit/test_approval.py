"""Approval: a task that requires it waits blocked, gets no run until a member approves it,
and is cancelled by a rejection; a lease delegating into a pool that does not accept its own
pool's work files such a task."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import Forbidden, InvalidTransition, LeaseTokenMismatch
from tenure.domain.model import Principal

from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, WORKER, Rig, as_lease

ASK = TaskLinks(requires_approval=True)


def waiting(rig: Rig, pool: str | None = POOL, **links: object) -> str:
    task, lease = rig.task(pool=pool, links=replace(ASK, **links))  # type: ignore[arg-type]
    assert lease is None
    return task.id


def test_a_task_requiring_approval_is_blocked_and_nothing_claims_it(rig: Rig) -> None:
    task_id = waiting(rig)
    seen = rig.svc.graph.get_task(MEMBER, task_id)
    assert seen.status.value == "blocked"
    (reason,) = seen.blocked_reasons
    assert reason["source"] == "approval" and reason["requested_at"].endswith("Z")
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None


def test_enqueue_while_awaiting_approval_is_an_invalid_transition(rig: Rig) -> None:
    task_id = waiting(rig, pool=None)
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task_id, POOL)


def test_approval_records_the_actor_and_enqueues_on_the_pool_it_was_filed_for(rig: Rig) -> None:
    task_id = waiting(rig)
    seen = rig.svc.approval.approve(MEMBER, task_id, "looks right")
    assert seen.status.value == "queued" and seen.lease is not None
    approved = [e for e in rig.events(task_id) if e.type == "task.approved"]
    assert len(approved) == 1 and (approved[0].data or {})["by"] == MEMBER.token_id
    won = rig.claim()
    assert won.lease.task_id == task_id
    with pytest.raises(InvalidTransition):
        rig.svc.approval.approve(MEMBER, task_id, None)


def test_an_approved_task_without_a_pool_is_ready_and_enqueues_by_hand(rig: Rig) -> None:
    task_id = waiting(rig, pool=None)
    seen = rig.svc.approval.approve(MEMBER, task_id, None)
    assert (seen.status.value, seen.lease) == ("ready", None)
    assert rig.svc.filing.enqueue(MEMBER, task_id, POOL).state.value == "pending"


def test_approval_is_a_cleared_cause_but_other_causes_still_hold(rig: Rig) -> None:
    blocker, _ = rig.task(pool=None)
    task_id = waiting(rig, depends_on=(blocker.id,), auto_enqueue_on_ready=True)
    seen = rig.svc.approval.approve(MEMBER, task_id, None)
    assert [r["source"] for r in seen.blocked_reasons] == ["dependency"]
    assert seen.lease is None


def test_reject_cancels_the_task_and_records_it(rig: Rig) -> None:
    task_id = waiting(rig)
    seen = rig.svc.approval.reject(MEMBER, task_id, "not this quarter")
    assert seen.status.value == "cancelled" and seen.blocked_reasons == ()
    assert "task.rejected" in rig.types(task_id)
    with pytest.raises(InvalidTransition):
        rig.svc.approval.reject(MEMBER, task_id, "again")
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task_id, POOL)


def test_approve_or_reject_a_task_not_awaiting_approval_is_refused(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    with pytest.raises(InvalidTransition):
        rig.svc.approval.approve(MEMBER, task.id, None)
    with pytest.raises(InvalidTransition):
        rig.svc.approval.reject(MEMBER, task.id, "no")


def test_agents_may_not_approve(rig: Rig) -> None:
    task_id = waiting(rig)
    lease = rig.running()
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.approval.approve(as_lease(lease.id), task_id, None)
    with pytest.raises(Forbidden):
        rig.svc.approval.approve(WORKER, task_id, None)
    reader = Principal(kind="operator", token_id="tok-r", role="read")
    with pytest.raises(Forbidden):
        rig.svc.approval.approve(reader, task_id, None)


def _delegate(rig: Rig, pool: str) -> tuple[str, bool]:
    lease = rig.running()
    task, run = rig.svc.filing.create_task(
        as_lease(lease.id), None, "child", None, None, {}, pool, None, links=TaskLinks()
    )
    return task.id, run is not None


def test_delegating_into_the_leases_own_pool_queues_as_asked(rig: Rig) -> None:
    task_id, queued = _delegate(rig, POOL)
    assert queued
    assert rig.store.get_task(task_id).approval is None  # type: ignore[union-attr]


def test_delegating_into_another_pool_waits_for_approval_unless_it_accepts(rig: Rig) -> None:
    rig.make_pool("reviewers")
    task_id, queued = _delegate(rig, "reviewers")
    assert not queued
    assert rig.svc.graph.get_task(MEMBER, task_id).blocked_reasons[0]["source"] == "approval"
    rig.svc.pools.update_pool(ADMIN, "reviewers", {"accepts_delegation_from": (POOL,)})
    rig.svc.kernel.catalog.fresh_pool("reviewers")
    accepted, queued = _delegate(rig, "reviewers")
    assert queued
    assert rig.svc.graph.get_task(MEMBER, accepted).status.value == "queued"
    assert rig.store.get_pool("reviewers").accepts_delegation_from == (POOL,)  # type: ignore[union-attr]
    assert rig.store.get_task(accepted).space == SPACE  # type: ignore[union-attr]
