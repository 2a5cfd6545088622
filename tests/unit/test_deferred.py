"""Deferred leases: `not_before` keeps a pending lease out of every claim until
its instant, and its queued condition says `waiting_until`."""

from __future__ import annotations

from typing import Any

from tenure.domain.states import LeaseState

from tests.unit.support import MEMBER, POOL, T0, WORKER, Rig


def test_a_deferred_lease_is_pending_waiting_and_not_claimable_before_its_time(rig: Rig) -> None:
    _, lease = rig.task(not_before=T0 + 60_000)
    assert lease is not None and lease.state is LeaseState.PENDING
    condition = rig.svc.conditions.queued_condition_of(lease)
    assert condition is not None and (condition.code, condition.label) == (
        "waiting_until",
        "waiting until 00:01",
    )
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    rig.advance(59)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    rig.advance(1)
    won = rig.claim()
    assert won.lease.id == lease.id


def test_a_due_lease_is_claimed_before_a_deferred_one_filed_earlier(rig: Rig) -> None:
    _, later = rig.task(not_before=T0 + 3_600_000)
    rig.advance(1)
    _, now = rig.task()
    assert now is not None and later is not None
    assert rig.store.queue_candidates(POOL, 10, due_by=rig.clock.now_ms()) == [now.id]
    assert rig.claim().lease.id == now.id
    assert rig.svc.claims.claim(WORKER, POOL, "w2", None, 0, None) is None


def test_a_not_before_in_the_past_defers_nothing(rig: Rig) -> None:
    _, lease = rig.task(not_before=T0 - 1)
    assert lease is not None and lease.not_before is None
    condition = rig.svc.conditions.queued_condition_of(lease)
    assert condition is not None and condition.code == "awaiting_agent"
    assert rig.claim().lease.id == lease.id


def test_enqueue_takes_not_before_too(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL, T0 + 5_000)
    assert lease.not_before == T0 + 5_000
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    rig.advance(5)
    assert rig.claim().lease.id == lease.id


def test_a_waiting_claim_gets_the_lease_once_it_falls_due(rig: Rig) -> None:
    _, lease = rig.task(not_before=T0 + 3_000)
    won: Any = rig.svc.claims.claim(WORKER, POOL, "w1", None, 10, None)
    assert won is not None and won.lease.id == lease.id  # type: ignore[union-attr]
    assert rig.clock.now_ms() >= T0 + 3_000
