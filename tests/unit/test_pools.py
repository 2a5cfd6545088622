"""Pool, space and instance management: pause, archive, patches, the instance
ceiling, and the pool versions a lease pins."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.catalog import POOL_REFRESH_MS
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.domain.errors import Forbidden, InvalidTransition, NotFound, ValidationFailed
from tenure.domain.model import Pool
from tenure.domain.states import LeaseState, OnExpiry, PoolKind
from tenure.wiring import ManualClock

from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease


def _no_claim(rig: Rig, pool: str = POOL, worker_id: str = "w9") -> bool:
    return rig.svc.claims.claim(WORKER, pool, worker_id, "1.0", 0, None) is None


# ------------------------------------------------------------------------- pause, resume


def test_a_paused_pool_hands_out_nothing_at_once_though_its_row_is_cached(rig: Rig) -> None:
    rig.task()
    rig.svc.kernel.catalog.pool(POOL)  # warm the 30 s cache with the unpaused pool
    paused = rig.svc.pools.pause_pool(ADMIN, POOL)
    assert paused.paused is True
    other = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)  # another warm instance
    other.kernel.catalog.pool(POOL)
    assert other.claims.claim(WORKER, POOL, "w1", "1.0", 0, None) is None
    assert _no_claim(rig)
    rig.svc.pools.resume_pool(ADMIN, POOL)
    assert other.claims.claim(WORKER, POOL, "w1", "1.0", 0, None) is not None


class ResumingClock(ManualClock):
    """Sleeps like a manual clock; resumes the pool (as another process would) at `at`."""

    def __init__(self, rig: Rig, at: int) -> None:
        super().__init__(rig.clock.now)
        self.rig, self.at = rig, at

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        pool = self.rig.store.pools[POOL]
        if pool.paused and self.now >= self.at:
            self.rig.store.pools[POOL] = replace(pool, paused=False)


def test_a_waiting_claim_sees_a_resume_within_the_refresh_bound(rig: Rig) -> None:
    rig.task()
    rig.svc.pools.pause_pool(ADMIN, POOL)
    clock = ResumingClock(rig, rig.clock.now + 3_000)
    waiting = compose(Rows.of(rig.store, rig.store), clock, rig.ids)
    won = waiting.claims.claim(WORKER, POOL, "w1", "1.0", 10, None)
    assert won is not None
    assert clock.now - (rig.clock.now + 3_000) <= POOL_REFRESH_MS + 500


def test_pause_and_resume_are_admin_only_and_idempotent(rig: Rig) -> None:
    with pytest.raises(Forbidden):
        rig.svc.pools.pause_pool(MEMBER, POOL)
    rig.svc.pools.pause_pool(ADMIN, POOL)
    writes = len(rig.store.writes)
    assert rig.svc.pools.pause_pool(ADMIN, POOL).paused is True
    assert len(rig.store.writes) == writes  # already paused: nothing written
    with pytest.raises(NotFound):
        rig.svc.pools.pause_pool(ADMIN, "nope")
    assert [e.type for e in rig.store.timeline("pool", POOL, None)] == ["pool.paused"]


# ---------------------------------------------------------------------- archive a space


def test_an_archived_space_hands_out_nothing_and_refuses_new_tasks(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    rig.task()
    space = rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert space.archived is True
    assert _no_claim(rig)
    with pytest.raises(InvalidTransition, match="archived"):
        rig.task()
    with pytest.raises(InvalidTransition, match="archived"):
        rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert rig.svc.spaces.unarchive_space(ADMIN, SPACE).archived is False
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None) is not None
    rig.task()


# ------------------------------------------------------------------------------- patch


def test_a_patch_changes_only_what_it_names_and_a_null_resets_the_default(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 2, "display_name": "Builds"})
    pool = rig.svc.pools.update_pool(ADMIN, POOL, {"renew_seconds": 5, "on_expiry": OnExpiry.FAIL})
    assert (pool.max_active, pool.label, pool.renew_seconds) == (2, "Builds", 5)
    assert pool.on_expiry is OnExpiry.FAIL
    pool = rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": None, "display_name": None})
    assert (pool.max_active, pool.label, pool.version) == (None, POOL, 1)


def test_a_patch_keeps_the_timings_in_order_and_names_unknown_settings(rig: Rig) -> None:
    with pytest.raises(ValidationFailed, match="grace_seconds"):
        rig.svc.pools.update_pool(ADMIN, POOL, {"grace_seconds": 5, "renew_seconds": 9})
    with pytest.raises(ValidationFailed, match="toleration_seconds"):
        rig.svc.pools.update_pool(ADMIN, POOL, {"toleration_seconds": 20})
    with pytest.raises(ValidationFailed, match="colour"):
        rig.svc.pools.update_pool(ADMIN, POOL, {"colour": "red"})
    with pytest.raises(Forbidden):
        rig.svc.pools.update_pool(READER, POOL, {"max_active": 1})


def test_lowering_max_active_below_the_held_count_makes_claims_wait(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 3})
    held = [rig.claimed(f"w{n}") for n in range(3)]
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 1})
    rig.task()
    assert _no_claim(rig)
    rig.svc.reports.complete(as_lease(held[0].lease.id), held[0].lease.id, {})
    assert _no_claim(rig)  # 2 held, ceiling 1
    rig.svc.reports.fail(as_lease(held[1].lease.id), held[1].lease.id, {"error": "x"})
    assert _no_claim(rig)  # 1 held
    rig.svc.reports.release(as_lease(held[2].lease.id), held[2].lease.id, {})
    assert rig.store.held_count("pool", POOL) == 0
    assert rig.svc.claims.claim(WORKER, POOL, "w9", "1.0", 0, None) is not None


def test_list_and_read_pools_of_a_space(rig: Rig) -> None:
    rig.make_pool("alpha", display_name="Alpha team")
    names = [p.name for p in rig.svc.pools.list_pools_of(READER, SPACE)]
    assert names == ["alpha", POOL]
    assert rig.svc.pools.get_pool(READER, "alpha").label == "Alpha team"
    with pytest.raises(NotFound):
        rig.svc.pools.list_pools_of(READER, "NOPE")


# ---------------------------------------------------------------------------- instance


def test_instance_settings_have_defaults_and_patch_field_by_field(rig: Rig) -> None:
    got = rig.svc.instance.get_instance(ADMIN)
    assert (got.max_active, got.block_recurrence_limit) == (None, 2)
    assert (got.allow_agent_force, got.retry_chain_cap) == (False, 5)
    got = rig.svc.instance.update_instance(ADMIN, {"max_active": 4, "allow_agent_force": True})
    assert (got.max_active, got.allow_agent_force, got.retry_chain_cap) == (4, True, 5)
    got = rig.svc.instance.update_instance(ADMIN, {"max_active": None})
    assert got.max_active is None and got.allow_agent_force is True
    with pytest.raises(Forbidden):
        rig.svc.instance.get_instance(MEMBER)


def test_the_instance_ceiling_counts_every_pool_and_frees_on_ending(rig: Rig) -> None:
    rig.make_pool("other")
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})
    first = rig.claimed("w1")
    assert first.lease.counted == ("instance:instance",)
    rig.task(pool="other")
    assert _no_claim(rig, "other")
    lease = rig.store.list_leases(SPACE, 10, None, LeaseState.PENDING, "other").leases[0]
    condition = rig.svc.conditions.queued_condition_of(lease)
    assert condition is not None and condition.code == "instance_full"
    rig.svc.operator.kill(MEMBER, first.lease.id)
    rig.svc.reports.complete(
        as_lease(first.lease.id), first.lease.id, {}
    )  # the worker stops: killed
    assert rig.lease(first.lease.id).state is LeaseState.KILLED
    assert rig.store.held_count("instance", "instance") == 0
    assert rig.svc.claims.claim(WORKER, "other", "w2", "1.0", 0, None) is not None


# ------------------------------------------------------------------------------ versions


def _agent_pool(rig: Rig, **agent: str) -> Pool:
    pool = Pool(name="agents", space=SPACE, kind=PoolKind.AGENT, created_at=0, agent=agent)
    return rig.svc.pools.create_pool(ADMIN, pool)


def test_agent_settings_change_makes_a_version_and_a_lease_keeps_its_own(rig: Rig) -> None:
    _agent_pool(rig, model="m-1", effort="high")
    _, first = rig.task(pool="agents")
    pool = rig.svc.pools.update_pool(ADMIN, "agents", {"agent": {"model": "m-2"}})
    assert pool.version == 2
    assert rig.svc.pools.update_pool(ADMIN, "agents", {"display_name": "Agents"}).version == 2
    _, second = rig.task(pool="agents")
    assert first is not None and second is not None
    assert (first.pool_version, second.pool_version) == (1, 2)
    past = rig.store.get_pool_version("agents", 1)
    assert past is not None and past.agent == {"model": "m-1", "effort": "high"}
    bundles = {}
    for _ in range(2):
        won = rig.claim(pool="agents")
        bundles[won.lease.id] = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert {k: bundles[first.id][k] for k in ("kind", "model", "effort")} == {
        "kind": "agent",
        "model": "m-1",
        "effort": "high",
    }
    assert bundles[second.id]["model"] == "m-2"
    assert "effort" not in bundles[second.id]
    assert "input" not in bundles[second.id]


def test_a_successor_lease_keeps_the_jobs_pinned_version(rig: Rig) -> None:
    _agent_pool(rig, model="m-1")
    _, lease = rig.task(pool="agents")
    won = rig.claim(pool="agents")
    rig.svc.pools.update_pool(ADMIN, "agents", {"agent": {"model": "m-2"}})
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {})
    assert lease is not None
    job = rig.store.get_job(lease.job_id)
    assert job is not None
    successor = rig.lease(job.lease_id)
    assert successor.id != lease.id and successor.pool_version == 1


def test_settings_belong_to_their_kind_and_expressions_must_compile(rig: Rig) -> None:
    with pytest.raises(ValidationFailed, match="agent"):
        rig.svc.pools.update_pool(ADMIN, POOL, {"agent": {"model": "m"}})
    with pytest.raises(ValidationFailed, match="classifier"):
        rig.make_pool("c0", classifier={"input": {}})
    bad = {"input": {}, "output": {"checks": {"ok": "score >"}}}
    classifier = Pool(
        name="c1", space=SPACE, kind=PoolKind.CLASSIFIER, created_at=0, classifier={"input": {}}
    )
    rig.svc.pools.create_pool(ADMIN, classifier)
    with pytest.raises(ValidationFailed, match=r"classifier\.output\.checks\.ok"):
        rig.svc.pools.update_pool(ADMIN, "c1", {"classifier": bad})
    assert rig.svc.pools.get_pool(READER, "c1").version == 1


def test_an_agent_or_classifier_pool_needs_its_settings_and_a_patch_cannot_remove_them(
    rig: Rig,
) -> None:
    for kind, field, settings in (
        (PoolKind.AGENT, "agent", {"effort": "high"}),  # no model
        (PoolKind.AGENT, "agent", None),
        (PoolKind.CLASSIFIER, "classifier", None),
    ):
        pool = Pool(name="x", space=SPACE, kind=kind, created_at=0, **{field: settings})
        with pytest.raises(ValidationFailed, match=rf"^{field}: an? \w+ pool needs its settings"):
            rig.svc.pools.create_pool(ADMIN, pool)
    assert rig.store.get_pool("x") is None
    _agent_pool(rig, model="m-1")
    classifier = Pool(
        name="c1", space=SPACE, kind=PoolKind.CLASSIFIER, created_at=0, classifier={"input": {}}
    )
    rig.svc.pools.create_pool(ADMIN, classifier)
    with pytest.raises(ValidationFailed, match=r"^agent: "):
        rig.svc.pools.update_pool(ADMIN, "agents", {"agent": None})
    with pytest.raises(ValidationFailed, match=r"^classifier: "):
        rig.svc.pools.update_pool(ADMIN, "c1", {"classifier": None})
    assert rig.svc.pools.get_pool(READER, "agents").agent == {"model": "m-1"}
    assert rig.svc.pools.get_pool(READER, "c1").classifier == {"input": {}}


def test_a_pool_stored_before_settings_were_required_still_takes_other_changes(rig: Rig) -> None:
    rig.store.put_pool(Pool(name="old", space=SPACE, kind=PoolKind.AGENT, created_at=0))
    assert rig.svc.pools.update_pool(ADMIN, "old", {"max_active": 2}).max_active == 2
    with pytest.raises(ValidationFailed, match=r"^agent: "):
        rig.svc.pools.update_pool(ADMIN, "old", {"agent": None})
    assert rig.svc.pools.update_pool(ADMIN, "old", {"agent": {"model": "m"}}).version == 2
