"""Pool and space ceilings (max_active): enforced at claim, freed when a held lease ends."""

from __future__ import annotations

from tenure.domain.model import Space

from tests.unit.support import ADMIN, WORKER, Rig, as_lease


def test_a_pool_ceiling_stops_claims_until_a_held_lease_ends(rig: Rig) -> None:
    rig.make_pool("narrow", max_active=2)
    for _ in range(3):
        rig.task(pool="narrow")
    first, second = rig.claim(pool="narrow"), rig.claim(pool="narrow")
    assert rig.svc.claims.claim(WORKER, "narrow", "w3", None, 0, None) is None
    assert rig.store.held_count("pool", "narrow") == 2
    rig.svc.reports.complete(as_lease(first.lease.id), first.lease.id, {"outcome": "success"})
    assert rig.store.held_count("pool", "narrow") == 1
    third = rig.svc.claims.claim(WORKER, "narrow", "w3", None, 0, None)
    assert third is not None and third.lease.counted == ("pool:narrow",)
    assert {second.lease.id, third.lease.id} != {None}


def test_a_space_ceiling_counts_every_pool_of_the_space(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "TIGHT", "Tight", 1)
    from tenure.domain.model import Pool
    from tenure.domain.states import PoolKind

    for name in ("a", "b"):
        rig.svc.pools.create_pool(
            ADMIN, Pool(name=name, space="TIGHT", kind=PoolKind.COMMAND, created_at=0)
        )
        rig.svc.filing.create_task(ADMIN, "TIGHT", "t", None, None, {}, name, None)
    won = rig.svc.claims.claim(WORKER, "a", "w1", None, 0, None)
    assert won is not None and won.lease.counted == ("space:TIGHT",)
    assert rig.svc.claims.claim(WORKER, "b", "w2", None, 0, None) is None
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {})
    assert rig.store.held_count("space", "TIGHT") == 0
    assert rig.svc.claims.claim(WORKER, "b", "w2", None, 0, None) is not None
    assert isinstance(rig.store.get_space("TIGHT"), Space)


def test_an_expired_counted_lease_gives_its_slot_back(rig: Rig) -> None:
    rig.make_pool("one", max_active=1, renew_seconds=1, grace_seconds=3, toleration_seconds=4)
    rig.task(pool="one")
    rig.task(pool="one")
    rig.claim(pool="one")
    assert rig.svc.claims.claim(WORKER, "one", "w2", None, 0, None) is None
    rig.sweep()
    rig.advance(10)
    report = rig.sweep()
    assert len(report.expired) == 1
    assert rig.store.held_count("pool", "one") == 0
    assert rig.svc.claims.claim(WORKER, "one", "w2", None, 0, None) is not None


def test_a_full_pool_shows_pool_full_on_its_pending_leases(rig: Rig) -> None:
    rig.make_pool("single", max_active=1)
    rig.task(pool="single")
    _, waiting = rig.task(pool="single")
    rig.claim(pool="single")
    assert waiting is not None
    condition = rig.svc.conditions.queued_condition_of(rig.lease(waiting.id))
    assert condition is not None
    assert (condition.code, condition.label, condition.needs_person) == (
        "pool_full",
        "pool full",
        False,
    )


def test_pools_without_a_ceiling_count_nothing(rig: Rig) -> None:
    won = rig.claimed()
    assert won.lease.counted is None
    assert rig.store.held_count("pool", "builders") == 0
