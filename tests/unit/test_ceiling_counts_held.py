"""A ceiling set while leases are held counts them at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tenure.app.ports import INSTANCE_CEILING
from tenure.app.setup import pools
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


def _during_the_first_rest(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, change: Callable[[], object]
) -> list[str]:
    """While a claim's long poll rests the first time: `change` the pool, file a task, and let
    a second more pass, so the claim's copy of the pool is 1.5 s old when it finds the work.
    What was done, once it was."""
    sleep = rig.clock.sleep
    during: list[str] = []

    def rest(seconds: float) -> None:
        sleep(seconds)
        if not during:
            during.append("changed")
            change()
            rig.task()
            rig.clock.advance(1.0)

    monkeypatch.setattr(rig.clock, "sleep", rest)
    return during


def test_a_long_poll_that_read_the_pool_before_a_ceiling_reads_it_again_before_it_writes(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim's copy of the pool (no ceiling) is 1.5 s old when work arrives: younger than
    # the long poll's own refresh, older than a write may trust. Read again, it has the
    # ceiling, so the lease counts itself; with the old copy it would be held uncounted.
    monkeypatch.setattr(pools, "SETTLE_AFTER_CEILING_S", 0)
    during = _during_the_first_rest(
        rig, monkeypatch, lambda: rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 1})
    )
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 5, None)
    assert during == ["changed"] and won is not None
    assert rig.lease(won.lease.id).counted == (f"pool:{POOL}",)
    assert rig.store.held_count("pool", POOL) == 1
    rig.task()
    assert _claim(rig, "w2") is None  # the ceiling of one is full


def test_a_pool_paused_since_the_copy_was_read_hands_out_nothing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    during = _during_the_first_rest(rig, monkeypatch, lambda: rig.svc.pools.pause_pool(ADMIN, POOL))
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 1, None) is None
    assert during == ["changed"]
