"""A ceiling set while leases are held counts them at once."""

from __future__ import annotations

from tenure.app.ports import INSTANCE_CEILING
from tenure.domain.states import LeaseState

from tests.unit.support import ADMIN, POOL, WORKER, Rig, as_lease


def _claim(rig: Rig, worker: str) -> object:
    return rig.svc.claims.claim(WORKER, POOL, worker, "1.0", 0, None)


def test_setting_a_pool_ceiling_with_one_lease_held_holds_back_the_next_claim(rig: Rig) -> None:
    held = rig.running("w1")
    rig.task()
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 1})
    assert rig.store.held_count("pool", POOL) == 1
    assert rig.lease(held.id).counted == (f"pool:{POOL}",)
    assert _claim(rig, "w2") is None
    rig.svc.reports.complete(as_lease(held.id), held.id, {})
    assert rig.store.held_count("pool", POOL) == 0
    won = _claim(rig, "w2")
    assert won is not None and won.lease.state is LeaseState.DISPATCHED  # type: ignore[attr-defined]


def test_setting_the_instance_ceiling_with_one_lease_held_holds_back_the_next_claim(
    rig: Rig,
) -> None:
    held = rig.running("w1")
    rig.task()
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})
    assert rig.store.held_count(INSTANCE_CEILING, INSTANCE_CEILING) == 1
    assert _claim(rig, "w2") is None
    rig.svc.reports.fail(as_lease(held.id), held.id, {"error": "gone"})
    assert _claim(rig, "w2") is not None


def test_a_lease_counted_already_is_not_counted_twice(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 3})
    rig.running("w1")  # claimed under the ceiling: counted by its claim
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": None})
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 2})
    assert rig.store.held_count("pool", POOL) == 1
