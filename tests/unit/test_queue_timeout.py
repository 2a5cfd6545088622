"""Queue timeout: a pending lease not claimed within expires_in_seconds ends queue_timeout."""

from __future__ import annotations

import pytest
from tenure.app.kernel import over
from tenure.app.ports import Change
from tenure.app.runs import RunControls
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import PRIORITY_MARK_GRACE_MS, QUEUE_EXPIRY_MARK, Lease
from tenure.domain.states import EndReason, LeaseState
from tenure.domain.transitions import Action, must_move

from tests.unit.support import ADMIN, MEMBER, POOL, WORKER, Rig, as_lease


def _file(rig: Rig, seconds: int | None, **kw: object) -> str:
    _, lease = rig.task(controls=RunControls(expires_in_seconds=seconds), **kw)
    assert lease is not None
    return lease.id


def _sweep_minutes(rig: Rig, minutes: int) -> list[str]:
    ended: list[str] = []
    for _ in range(minutes):
        rig.advance(60)
        ended += rig.sweep().queue_timed_out
    return ended


def test_a_pending_lease_not_claimed_in_time_ends_cancelled_as_queue_timeout(rig: Rig) -> None:
    lease_id = _file(rig, 90)
    assert _sweep_minutes(rig, 1) == []  # 60 s in: not yet
    assert _sweep_minutes(rig, 1) == [lease_id]
    ended = rig.lease(lease_id)
    assert ended.state is LeaseState.CANCELLED
    assert ended.end_reason is EndReason.QUEUE_TIMEOUT
    task = rig.lease(lease_id).task_id
    assert task is not None
    assert "lease.queue_timed_out" in rig.types(task)
    assert _claim(rig) is None  # nothing left to hand out


def _claim(rig: Rig) -> object:
    return rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None)


def test_a_claim_never_hands_out_a_lease_past_its_expiry(rig: Rig) -> None:
    _file(rig, 30)
    rig.advance(31)  # past it, before any sweeper pass
    assert _claim(rig) is None


def test_a_lease_claimed_in_time_is_left_alone_by_the_sweeper(rig: Rig) -> None:
    lease_id = _file(rig, 30)
    rig.claim()
    assert _sweep_minutes(rig, 2) == []
    assert rig.lease(lease_id).state is LeaseState.DISPATCHED


def test_a_deferred_lease_waits_its_timeout_from_its_not_before(rig: Rig) -> None:
    now = rig.clock.now_ms()
    lease_id = _file(rig, 60, not_before=now + 120_000)
    assert rig.lease(lease_id).queue_expires_at == now + 180_000
    assert _sweep_minutes(rig, 2) == []
    assert _sweep_minutes(rig, 1) == [lease_id]


def test_the_timeout_is_one_conditional_write_a_claim_landing_first_wins(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease_id = _file(rig, 30)
    rig.advance(61)
    real = rig.store.get_lease
    claimed = {"done": False}

    def claim_in_between(lid: str, consistent: bool = True) -> Lease | None:
        # The sweeper's read of the lease returns it pending; a rival's claim lands before
        # the sweeper's write.
        seen = real(lid, consistent)
        if lid == lease_id and not claimed["done"] and seen is not None:
            claimed["done"] = True
            to = must_move(seen.id, seen.state, seen.revoke, Action.CLAIM)
            taken = rig.svc.kernel.apply(seen, to, {}, rig.clock.now_ms(), worker_id="rival")
            rig.store.commit(Change(leases=[over(seen, taken)]))
        return seen

    monkeypatch.setattr(rig.store, "get_lease", claim_in_between)
    report = rig.sweep()
    assert report.queue_timed_out == [] and report.raced == 1
    assert real(lease_id).state is LeaseState.DISPATCHED  # type: ignore[union-attr]


def test_a_pool_never_given_a_timeout_is_not_read_for_one(rig: Rig) -> None:
    rig.task()
    reads: list[str] = []
    real = rig.store.queue_expiring

    def spy(pool: str, now: int, limit: int) -> list[str]:
        reads.append(pool)
        return real(pool, now, limit)

    rig.store.queue_expiring = spy  # type: ignore[method-assign]
    rig.sweep()
    assert reads == []
    assert "mark_queue" not in rig.store.writes


def test_the_expiry_mark_is_dropped_once_no_lease_with_a_timeout_is_pending(rig: Rig) -> None:
    _file(rig, 30)
    assert QUEUE_EXPIRY_MARK in (rig.store.get_pool(POOL).queue_marks or {})
    _sweep_minutes(rig, PRIORITY_MARK_GRACE_MS // 60_000 + 1)
    assert rig.store.get_pool(POOL).queue_marks is None


def test_enqueue_takes_a_queue_timeout(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL, None, RunControls(expires_in_seconds=5))
    assert lease.queue_expires_at == rig.clock.now_ms() + 5_000


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_a_queue_timeout_below_a_second_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValidationFailed) as refused:
        RunControls(expires_in_seconds=bad)  # type: ignore[arg-type]
    assert refused.value.details == {"field": "expires_in_seconds"}


def test_a_lease_requeued_after_a_release_waits_its_runs_queue_timeout_again(rig: Rig) -> None:
    first = _file(rig, 90)
    won = rig.claim()
    assert won.lease.id == first
    rig.advance(600)  # well past the first lease's own expiry: it was claimed in time
    rig.svc.reports.release(as_lease(first), first, {})
    successor = rig.svc.kernel.newest_lease(rig.svc.kernel.task(won.lease.task_id or ""))
    assert successor is not None and successor.state is LeaseState.PENDING
    assert successor.expires_in_seconds == 90
    assert successor.queue_expires_at == rig.clock.now_ms() + 90_000
    assert _sweep_minutes(rig, 1) == []
    assert _sweep_minutes(rig, 1) == [successor.id]
    assert rig.lease(successor.id).end_reason is EndReason.QUEUE_TIMEOUT


def test_a_retry_keeps_the_controls_its_run_was_enqueued_with(rig: Rig) -> None:
    rig.svc.pools.update_pool(
        ADMIN,
        POOL,
        {"retry": {"on_failure": True, "backoff": {"initial_seconds": 10, "jitter": False}}},
    )
    task, _ = rig.task(pool=None)
    controls = RunControls(priority=8, expires_in_seconds=600, max_run_seconds=30)
    rig.svc.filing.enqueue(MEMBER, task.id, POOL, None, controls)
    won = rig.claim()
    rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"reason": "flaky"})
    retry = rig.svc.kernel.newest_lease(rig.svc.kernel.task(task.id))
    assert retry is not None and retry.id != won.lease.id
    assert (retry.priority, retry.expires_in_seconds, retry.max_run_seconds) == (8, 600, 30)
    assert retry.queue_expires_at is not None and retry.not_before is not None
    assert retry.queue_expires_at == retry.not_before + 600_000
