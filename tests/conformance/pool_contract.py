"""The store contract of the pool, space and instance rows (pool settings and versions, space
archive, the instance settings and its ceiling), run like contract.py on the fake, moto and
DynamoDB Local.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.ports import (
    INSTANCE_CEILING,
    KEY_CEILING,
    RATE_CEILING,
    Ceiling,
    Change,
    Filed,
    LeaseWrite,
    Settings,
    key_ceiling,
    rate_ceiling,
)
from tenure.domain.errors import CeilingReached, Conflict, NotFound
from tenure.domain.model import Instance, PoolVersion
from tenure.domain.retry import RetryPolicy
from tenure.domain.states import OnExpiry

from tests.conformance.contract import ALPHA, SPACE, MakeRig, claim, enqueue, world


class PoolStoreContract:
    def test_a_settings_update_changes_only_what_it_names_and_keeps_the_counter(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        r.store.update_pool(ALPHA, Settings(set={"max_active": 2}))
        enqueue(r)
        claim(r)
        assert r.store.held_count("pool", ALPHA) == 1
        pool = r.store.update_pool(
            ALPHA, Settings(set={"display_name": "Alpha", "on_expiry": "fail", "paused": True})
        )
        assert (pool.display_name, pool.on_expiry, pool.paused) == ("Alpha", OnExpiry.FAIL, True)
        assert pool.max_active == 2 and r.store.held_count("pool", ALPHA) == 1
        pool = r.store.update_pool(ALPHA, Settings(remove=("max_active", "display_name")))
        assert (pool.max_active, pool.display_name, pool.paused) == (None, None, True)
        assert r.store.get_pool(ALPHA) == pool
        with pytest.raises(NotFound):
            r.store.update_pool("nope", Settings(set={"paused": True}))
        assert r.store.get_pool("nope") is None

    def test_a_version_change_lands_only_on_the_version_read_and_keeps_the_old_one(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        old = PoolVersion(pool=ALPHA, version=1, created_at=5, agent={"model": "m-1"})
        pool = r.store.update_pool(
            ALPHA, Settings(set={"version": 2, "agent": {"model": "m-2"}}), 1, old
        )
        assert (pool.version, pool.agent) == (2, {"model": "m-2"})
        assert r.store.get_pool_version(ALPHA, 1) == old
        assert r.store.get_pool_version(ALPHA, 2) is None  # the current one is the pool row
        stale = replace(old, agent={"model": "m-x"})
        with pytest.raises(Conflict):
            r.store.update_pool(ALPHA, Settings(set={"version": 2}), 1, stale)
        assert r.store.get_pool(ALPHA) == pool
        assert r.store.get_pool_version(ALPHA, 1) == old

    def test_a_space_is_archived_and_unarchived_in_place(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        assert r.store.update_space(SPACE, Settings(set={"archived": True})).archived is True
        space = r.store.get_space(SPACE)
        assert space is not None and space.archived and space.name == "Operations"
        assert r.store.update_space(SPACE, Settings(set={"archived": False})).archived is False
        with pytest.raises(NotFound):
            r.store.update_space("NOPE", Settings(set={"archived": True}))
        assert r.store.get_space("NOPE") is None

    def test_the_instance_row_reads_defaults_until_written(self, make_rig: MakeRig) -> None:
        r = make_rig()
        assert r.store.get_instance() == Instance()
        got = r.store.update_instance(Settings(set={"max_active": 3, "allow_agent_force": True}))
        assert (got.max_active, got.allow_agent_force, got.retry_chain_cap) == (3, True, 5)
        assert r.store.get_instance() == got
        got = r.store.update_instance(Settings(remove=("max_active",)))
        assert got.max_active is None and got.allow_agent_force is True

    def test_a_ceiling_is_judged_on_its_rows_own_max_active(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        r.store.update_instance(Settings(set={"max_active": 1}))
        _, first = enqueue(r)
        _, second = enqueue(r)
        up = Ceiling(INSTANCE_CEILING, INSTANCE_CEILING, +1, limit=99)  # a stale copy: 99
        r.store.commit(Change(leases=[LeaseWrite(replace(first, id="x1"))], ceilings=[up]))
        with pytest.raises(CeilingReached):
            r.store.commit(Change(leases=[LeaseWrite(replace(second, id="x2"))], ceilings=[up]))
        assert r.store.get_lease("x2") is None
        assert r.store.held_count(INSTANCE_CEILING, INSTANCE_CEILING) == 1
        r.store.update_instance(Settings(set={"max_active": 2}))
        r.store.commit(Change(leases=[LeaseWrite(replace(second, id="x2"))], ceilings=[up]))
        assert r.store.held_count(INSTANCE_CEILING, INSTANCE_CEILING) == 2

    def test_a_key_or_minute_counter_is_judged_on_the_limit_sent_and_says_which_is_full(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, first = enqueue(r)
        _, second = enqueue(r)
        pool_up = Ceiling("pool", ALPHA, +1, limit=5)
        key_up = Ceiling(KEY_CEILING, key_ceiling(ALPHA, "tenant:7#a"), +1, limit=1)
        rate_up = Ceiling(RATE_CEILING, rate_ceiling(ALPHA, 29_000_000), +1, limit=1)
        r.store.commit(
            Change(leases=[LeaseWrite(replace(first, id="k1"))], ceilings=[pool_up, key_up])
        )
        with pytest.raises(CeilingReached) as full:
            r.store.commit(
                Change(leases=[LeaseWrite(replace(second, id="k2"))], ceilings=[pool_up, key_up])
            )
        assert (full.value.details["scope"], full.value.details["name"]) == (
            KEY_CEILING,
            key_ceiling(ALPHA, "tenant:7#a"),
        )
        assert r.store.get_lease("k2") is None and r.store.held_count("pool", ALPHA) == 1
        assert r.store.held_count(KEY_CEILING, key_ceiling(ALPHA, "tenant:7#a")) == 1
        r.store.commit(Change(leases=[LeaseWrite(replace(second, id="k3"))], ceilings=[rate_up]))
        with pytest.raises(CeilingReached) as full:
            r.store.commit(
                Change(leases=[LeaseWrite(replace(second, id="k4"))], ceilings=[rate_up])
            )
        assert full.value.details["scope"] == RATE_CEILING
        assert r.store.held_count(RATE_CEILING, rate_ceiling(ALPHA, 29_000_000)) == 1
        down = Ceiling(KEY_CEILING, key_ceiling(ALPHA, "tenant:7#a"), -1)
        r.store.commit(Change(leases=[LeaseWrite(replace(second, id="k5"))], ceilings=[down]))
        assert r.store.held_count(KEY_CEILING, key_ceiling(ALPHA, "tenant:7#a")) == 0

    def test_a_retry_policy_is_kept_as_set_and_a_null_removes_it(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        policy = {
            "on_failure": True,
            "backoff": {
                "initial_seconds": 5,
                "multiplier": 1.5,
                "max_seconds": 90,
                "jitter": False,
            },
        }
        pool = r.store.update_pool(ALPHA, Settings(set={"retry": policy}))
        assert RetryPolicy.of(pool.retry) == RetryPolicy(True, 5, 1.5, 90, False)
        assert RetryPolicy.of(r.store.get_pool(ALPHA).retry) == RetryPolicy.of(pool.retry)  # type: ignore[union-attr]
        pool = r.store.update_pool(ALPHA, Settings(remove=("retry",)))
        assert pool.retry is None and RetryPolicy.of(pool.retry).on_failure is False


class RequestStoreContract:
    """The idempotency record of a filing request: taken once, answered, dropped, expired."""

    def test_a_key_is_taken_once_until_its_lock_or_its_day_passes(self, make_rig: MakeRig) -> None:
        r = make_rig()
        now = r.clock.now_ms()
        first = Filed("k", "b1", now // 1000 + 86_400, now + 30_000)
        assert r.store.take_request(first, now) is None
        held = r.store.take_request(replace(first, body_hash="b2"), now)
        assert held is not None and (held.body_hash, held.answer) == ("b1", None)
        # A lock that has passed with no answer lets another take the key.
        later = now + 31_000
        assert r.store.take_request(replace(first, locked_until=later + 30_000), later) is None
        r.store.finish_request("k", 201, '{"task":1}')
        held = r.store.take_request(first, later + 60_000)
        assert held is not None and (held.status, held.answer) == (201, '{"task":1}')
        # An answered key is kept for its day, then may be taken again.
        expired = (first.expires_at + 1) * 1000
        assert (
            r.store.take_request(replace(first, expires_at=first.expires_at * 2), expired) is None
        )
        r.store.drop_request("k")
        assert r.store.take_request(first, now) is None
