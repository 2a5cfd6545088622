"""Behaviours of runs and leases that users of the reference system rely on, pinned."""

from __future__ import annotations

import pytest
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.domain.errors import InvalidTransition, LeaseNotFound
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.states import LeaseState, TaskStatus

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease


def test_a_heartbeat_that_shortens_lease_seconds_shortens_the_expiry_too(rig: Rig) -> None:
    lease = rig.running()  # the pool's toleration: 300 s
    beat = rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, 6)
    assert beat.lease.deadline is not None
    assert beat.lease.deadline - rig.clock.now_ms() <= 6 * 1000 * (1 + DEADLINE_SLACK) + 1
    rig.advance(20)
    report = rig.sweep()
    assert lease.id in report.expired
    assert rig.lease(lease.id).state is LeaseState.LOST


def _starved(rig: Rig) -> int:
    return rig.svc.scheduler.scheduler_status(READER).starved_run_count


@pytest.mark.parametrize("hold", ["pool", "space", "scheduler"])
def test_work_nothing_could_claim_is_never_starved_nor_parked_and_its_age_restarts(
    rig: Rig, hold: str
) -> None:
    _, lease = rig.task()  # no worker at all: it would starve after 600 s, park after 4,200 s
    pause, resume = {
        "pool": (
            lambda: rig.svc.pools.pause_pool(ADMIN, POOL),
            lambda: rig.svc.pools.resume_pool(ADMIN, POOL),
        ),
        "space": (
            lambda: rig.svc.spaces.archive_space(ADMIN, SPACE),
            lambda: rig.svc.spaces.unarchive_space(ADMIN, SPACE),
        ),
        "scheduler": (
            lambda: rig.svc.scheduler.pause_scheduler(ADMIN),
            lambda: rig.svc.scheduler.resume_scheduler(ADMIN),
        ),
    }[hold]
    pause()
    rig.advance(5000)
    assert _starved(rig) == 0
    assert rig.sweep().parked == []
    resume()
    rig.advance(300)
    assert _starved(rig) == 0  # the age restarted with the resume
    rig.advance(301)
    assert _starved(rig) == 1
    rig.advance(3600)
    assert rig.sweep().parked == [lease.task_id]  # type: ignore[union-attr]


def test_an_instance_change_holds_at_once_on_another_warm_instance(rig: Rig) -> None:
    other = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)  # a second warm API instance
    task, _ = rig.task()
    other.kernel.catalog.instance()  # its cached copy: block_recurrence_limit 2
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 1})
    other.blocks.block_task(MEMBER, task.id, "needs_input", "which region?")
    assert other.graph.get_task(READER, task.id).status is TaskStatus.NEEDS_ATTENTION


def _claim_exact(rig: Rig, lease_id: str, worker: str = "w9", wait: float = 0) -> object:
    return rig.svc.claims.claim(WORKER, POOL, worker, "1.0", wait, None, lease_id=lease_id)


def test_an_exact_claim_takes_that_lease_not_the_head_of_the_queue(rig: Rig) -> None:
    _, first = rig.task()
    _, second = rig.task()
    assert first is not None and second is not None
    won = _claim_exact(rig, second.id)
    assert won is not None and won.lease.id == second.id  # type: ignore[attr-defined]
    assert rig.lease(first.id).state is LeaseState.PENDING


def test_an_exact_claim_of_a_held_or_ended_lease_is_invalid_and_of_an_unknown_one_not_found(
    rig: Rig,
) -> None:
    held = rig.running()
    with pytest.raises(InvalidTransition):
        _claim_exact(rig, held.id)
    rig.svc.reports.complete(as_lease(held.id), held.id, {})
    with pytest.raises(InvalidTransition):
        _claim_exact(rig, held.id)
    with pytest.raises(LeaseNotFound):
        _claim_exact(rig, "lease_nope")


def test_an_exact_claim_passes_every_gate_a_claim_next_does(rig: Rig) -> None:
    _, lease = rig.task()
    assert lease is not None
    rig.svc.pools.pause_pool(ADMIN, POOL)
    assert _claim_exact(rig, lease.id) is None
    rig.svc.pools.resume_pool(ADMIN, POOL)
    rig.svc.graph.pause_task(MEMBER, lease.task_id or "")
    assert _claim_exact(rig, lease.id) is None
    rig.svc.graph.resume_task(MEMBER, lease.task_id or "")
    assert _claim_exact(rig, lease.id) is not None


def test_an_exact_claim_names_only_a_lease_of_its_pool(rig: Rig) -> None:
    rig.make_pool("other")
    _, lease = rig.task(pool="other")
    assert lease is not None
    with pytest.raises(LeaseNotFound):
        _claim_exact(rig, lease.id)


def test_an_enqueue_after_failures_used_up_the_attempts_is_refused(rig: Rig) -> None:
    lease = rig.running(max_attempts=1)
    rig.svc.reports.fail(as_lease(lease.id), lease.id, {"error": "boom"})
    with pytest.raises(InvalidTransition, match="attempts are used up"):
        rig.svc.filing.enqueue(MEMBER, lease.task_id or "", POOL)
    # With attempts left, a failed task may be enqueued again.
    other = rig.running(max_attempts=3)
    rig.svc.reports.fail(as_lease(other.id), other.id, {"error": "boom"})
    assert rig.svc.filing.enqueue(MEMBER, other.task_id or "", POOL).state is LeaseState.PENDING


@pytest.mark.parametrize("action", ["pause_task", "resume_task"])
def test_pause_or_resume_of_a_terminal_task_is_refused(rig: Rig, action: str) -> None:
    lease = rig.running()
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    with pytest.raises(InvalidTransition, match="nothing to pause"):
        getattr(rig.svc.graph, action)(MEMBER, lease.task_id or "")
