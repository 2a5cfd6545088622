"""The store contract of the pool, space and instance rows (pool settings and versions, space
archive, the instance settings and its ceiling), run like contract.py on the fake, moto and
DynamoDB Local.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.ports import INSTANCE_CEILING, Ceiling, Change, LeaseWrite, Settings
from tenure.domain.errors import CeilingReached, Conflict, NotFound
from tenure.domain.model import Instance, PoolVersion
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
