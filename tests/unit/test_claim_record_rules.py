"""The claim_id record's rules that need no race to show: a retry's shortcut to the lease its
record names passes every gate a claim passes, and a claimed lease sheds its `shunned` list."""

from __future__ import annotations

from dataclasses import replace

from tenure.app.kernel import over
from tenure.app.ports import Change, ClaimRecord
from tenure.domain.states import LeaseState

from tests.unit.support import ADMIN, POOL, WORKER, Rig


def _record_naming(rig: Rig, lease_id: str) -> None:
    """The record a call leaves when it stops between pointing it and claiming."""
    far = rig.clock.now_ms() // 1000 + 86_400
    rig.store.point_claim(ClaimRecord(POOL, WORKER.token_id, "w1", "c-1", lease_id, far), None)


def test_a_retry_takes_the_lease_its_record_names_only_through_the_claim_gates(
    rig: Rig,
) -> None:
    _, lease = rig.task()
    assert lease is not None
    _record_naming(rig, lease.id)
    rig.svc.pools.pause_pool(ADMIN, POOL)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1") is None
    assert rig.lease(lease.id).state is LeaseState.PENDING  # a paused pool hands out nothing
    rig.svc.pools.resume_pool(ADMIN, POOL)
    rig.advance(3)  # past the claim's refresh of the pool row
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1")
    assert won is not None and won.lease.id == lease.id


def test_a_claimed_lease_sheds_the_claims_that_shunned_it(rig: Rig) -> None:
    _, lease = rig.task()
    assert lease is not None
    row = rig.lease(lease.id)
    shunned = replace(row, shunned=("someone-else",), version=row.version + 1, event_type=None)
    rig.store.commit(Change(leases=[over(row, shunned)]))
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1")
    assert won is not None and won.lease.id == lease.id
    assert rig.lease(lease.id).shunned is None
