"""The pool row as the claim's and the filing's gate, on the fake store: every write that
changes what a pool's space or the instance says (archive, unarchive, an instance ceiling set
or cleared, a pool made in an archived space or under a ceiling) writes it on each pool row
concerned before it answers, so the very next claim or filing, reading that one row, goes by
it; before the table's schema has the copy, a claim and a filing read the three rows as an
earlier release did (whose archive did not copy itself); the migration's rewrite copies each
pool's gates from its space and the instance, page by page and once."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.catalog import one_request
from tenure.app.migrations import (
    POOL_GATES_FROM_SCHEMA,
    SCHEMA_VERSION,
    Outcome,
    SchemaState,
    copy_gates_onto_pools,
    migrate,
)
from tenure.app.ports import Settings
from tenure.domain.errors import InvalidTransition, ValidationFailed
from tenure.domain.model import Pool, PoolKind, Space

from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, WORKER, Rig, settings_reads

OTHER = "OTHER"


def _claim(rig: Rig, pool: str = POOL, worker: str = "w1") -> Any:
    return rig.svc.claims.claim(WORKER, pool, worker, "1.0", 0, None)


def _pool(rig: Rig, name: str) -> Pool:
    found = rig.store.get_pool(name)
    assert found is not None
    return found


def _old_release_archive(rig: Rig, key: str) -> None:
    """An archive as an earlier release wrote it: the space row alone, no pool row told."""
    rig.store.update_space(key, Settings(set={"archived": True}))


def _behind(rig: Rig) -> None:
    rig.store.schema = SchemaState(version=POOL_GATES_FROM_SCHEMA - 1, step=1)


def _named(outcomes: list[Outcome]) -> Outcome:
    [outcome] = [o for o in outcomes if o.name == "pool-gates"]
    return outcome


# ------------------------------------------------------------------- what must be refused


def test_archive_answered_refuses_the_next_claim_of_every_pool_of_the_space() -> None:
    rig = Rig()
    rig.make_pool("second")
    for pool in (POOL, "second"):
        rig.task(pool=pool)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert _pool(rig, POOL).space_archived and _pool(rig, "second").space_archived
    assert _claim(rig, POOL) is None and _claim(rig, "second") is None
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert not _pool(rig, POOL).space_archived and not _pool(rig, "second").space_archived
    assert _claim(rig, POOL) is not None and _claim(rig, "second") is not None


def test_a_view_in_the_archiving_request_goes_by_the_copy_it_wrote() -> None:
    rig = Rig()
    _, lease = rig.task()
    assert lease is not None
    with one_request():
        assert rig.svc.conditions.queued_condition_of(rig.lease(lease.id)) is not None
        rig.svc.spaces.archive_space(ADMIN, SPACE)
        found = rig.svc.conditions.queued_condition_of(rig.lease(lease.id))
        assert found is not None and found.code == "space_archived"


def test_archive_tells_only_the_pools_of_its_space() -> None:
    rig = Rig()
    rig.svc.spaces.create_space(ADMIN, OTHER, "Other", None)
    other = Pool(name="elsewhere", space=OTHER, kind=PoolKind.COMMAND, created_at=0)
    rig.svc.pools.create_pool(ADMIN, other)
    rig.svc.filing.create_task(MEMBER, OTHER, "t", None, None, {}, "elsewhere", None)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert not _pool(rig, "elsewhere").space_archived
    assert _claim(rig, "elsewhere") is not None


def test_an_archived_space_refuses_a_filing_and_an_enqueue_by_its_pool_row() -> None:
    rig = Rig()
    task, _ = rig.task(pool=None)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    reads = settings_reads(rig)
    with one_request(), pytest.raises(InvalidTransition, match="archived"):
        rig.task()
    assert reads == ["get_pool"]  # the pool row alone: it says the space is archived
    with pytest.raises(InvalidTransition, match="archived"):
        rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    with pytest.raises(InvalidTransition, match="archived"):
        rig.task(pool=None)  # no pool to go by: the space row says it


def test_another_spaces_pool_is_refused_before_its_gates_are_looked_at() -> None:
    rig = Rig()
    rig.svc.spaces.create_space(ADMIN, OTHER, "Other", None)
    with pytest.raises(ValidationFailed, match="not a pool of space"):
        rig.svc.filing.create_task(MEMBER, OTHER, "t", None, None, {}, POOL, None)


def test_before_the_version_an_old_release_archive_still_refuses_claims_and_filings() -> None:
    rig = Rig()
    _behind(rig)
    rig.task()
    _old_release_archive(rig, SPACE)
    assert not _pool(rig, POOL).space_archived  # the pool row was not told
    assert _claim(rig) is None
    with pytest.raises(InvalidTransition, match="archived"):
        rig.task()


def test_before_the_version_a_claim_and_a_filing_read_the_three_rows() -> None:
    rig = Rig()
    _behind(rig)
    rig.task()
    reads = settings_reads(rig)
    with one_request():
        assert _claim(rig) is not None
    assert sorted(reads) == ["get_instance", "get_pool", "get_space"]
    del reads[:]
    with one_request():  # the filing, and its answer's view of the new lease
        _, lease = rig.task()
        assert lease is not None
        rig.svc.conditions.queued_condition_of(lease)
    assert sorted(reads) == ["get_instance", "get_pool", "get_space"]


def test_at_the_version_a_claim_and_a_filing_read_the_pool_row_alone() -> None:
    rig = Rig()
    rig.task()
    reads = settings_reads(rig)
    with one_request():
        assert _claim(rig) is not None
    assert reads == ["get_pool"]
    del reads[:]
    with one_request():  # the filing, and its answer's view of the new lease
        _, lease = rig.task()
        assert lease is not None
        rig.svc.conditions.queued_condition_of(lease)
    assert reads == ["get_pool"]


# ------------------------------------------------------------------------------ ceilings


def test_an_instance_ceiling_set_answered_holds_back_the_next_claim_of_every_pool() -> None:
    rig = Rig()
    rig.make_pool("second")
    rig.claimed()
    rig.task(pool="second")
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})
    assert _pool(rig, POOL).instance_ceiling and _pool(rig, "second").instance_ceiling
    assert _claim(rig, "second") is None  # the held lease was counted; the ceiling is full
    rig.svc.instance.update_instance(ADMIN, {"max_active": None})
    assert not _pool(rig, POOL).instance_ceiling
    assert _claim(rig, "second") is not None


def test_an_instance_ceiling_changed_but_kept_writes_no_pool_row() -> None:
    rig = Rig()
    rig.svc.instance.update_instance(ADMIN, {"max_active": 3})
    writes = rig.store.writes.count("update_pool")
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 4})
    assert rig.store.writes.count("update_pool") == writes


def test_a_lowered_instance_ceiling_holds_by_its_own_row_whatever_the_copy() -> None:
    rig = Rig()
    rig.svc.instance.update_instance(ADMIN, {"max_active": 5})
    rig.claimed()
    rig.task()
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})  # no pool row written
    assert _claim(rig, worker="w2") is None


def test_a_pool_made_in_an_archived_space_or_under_ceilings_carries_them() -> None:
    rig = Rig()
    rig.svc.spaces.create_space(ADMIN, OTHER, "Other", 2)
    rig.svc.instance.update_instance(ADMIN, {"max_active": 9})
    rig.svc.spaces.archive_space(ADMIN, OTHER)
    made = rig.svc.pools.create_pool(
        ADMIN, Pool(name="late", space=OTHER, kind=PoolKind.COMMAND, created_at=0)
    )
    assert (made.space_archived, made.space_ceiling, made.instance_ceiling) == (True, True, True)
    assert _pool(rig, "late") == made


def test_a_pool_made_while_its_space_is_archived_learns_it_after_its_write() -> None:
    rig = Rig()
    real = rig.store.put_pool

    def archived_meanwhile(pool: Pool) -> None:
        # The archive lands after the new pool read its space and before its row is written:
        # the archive's own copy does not find the pool yet.
        rig.svc.spaces.archive_space(ADMIN, SPACE)
        real(pool)

    rig.store.put_pool = archived_meanwhile  # type: ignore[method-assign]
    made = rig.svc.pools.create_pool(
        ADMIN, Pool(name="racing", space=SPACE, kind=PoolKind.COMMAND, created_at=0)
    )
    assert made.space_archived and _pool(rig, "racing").space_archived


# ----------------------------------------------------------------------------- migration


def _old_pools(rig: Rig) -> None:
    """Pools as an earlier release left them: no copy of their gates, whatever the space and
    instance say (archived, a space ceiling, an instance ceiling)."""
    rig.store.spaces[SPACE] = Space(key=SPACE, name="Ops", created_at=0, max_active=2)
    rig.store.update_space(SPACE, Settings(set={"archived": True}))
    rig.store.update_instance(Settings(set={"max_active": 7}))
    for name in ("p1", "p2", "p3"):
        rig.store.put_pool(Pool(name=name, space=SPACE, kind=PoolKind.COMMAND, created_at=0))
    rig.store.put_pool(Pool(name="p4", space="GONE", kind=PoolKind.COMMAND, created_at=0))
    rig.store.pools[POOL] = Pool(name=POOL, space=SPACE, kind=PoolKind.COMMAND, created_at=0)


def test_the_migration_copies_each_pools_gates_page_by_page_and_once() -> None:
    rig = Rig()
    _old_pools(rig)
    _behind(rig)
    assert _claim(rig) is None  # three rows read: archived, whatever the pool row says

    dry = _named(migrate(rig.store, dry_run=True))
    assert dry.status == "would_apply"
    assert dry.counts == {"pools": 5, "spaceless": 1, "already_copied": 0, "would_copy": 4}
    assert "write_pool_gates" not in rig.store.writes

    first = _named(migrate(rig.store, page_size=2, max_pages=1))
    assert (first.status, first.pages, first.counts["copied"]) == ("stopped", 1, 2)
    saved = rig.store.schema_state()
    assert (saved.version, saved.migration) == (POOL_GATES_FROM_SCHEMA - 1, "pool-gates")
    rest = _named(migrate(rig.store, page_size=2))
    assert rest.status == "applied"
    assert first.counts["copied"] + rest.counts["copied"] == 4
    assert rig.store.writes.count("write_pool_gates") == 4
    assert rig.store.schema_state().version == SCHEMA_VERSION
    for name in (POOL, "p1", "p2", "p3"):
        pool = _pool(rig, name)
        assert (pool.space_archived, pool.space_ceiling, pool.instance_ceiling) == (
            True,
            True,
            True,
        )
        assert pool.version == 1  # no new version: only the copy is written
    assert not _pool(rig, "p4").space_archived  # its space is gone: left alone

    # The same page again (a run that died before it saved its place) writes nothing.
    again = copy_gates_onto_pools(rig.store, None, 100, False)
    assert again.counts == {"pools": 5, "spaceless": 1, "already_copied": 4, "copied": 0}
    assert rig.store.writes.count("write_pool_gates") == 4


def test_an_unarchive_between_the_migrations_read_and_write_is_not_undone() -> None:
    rig = Rig()
    _old_pools(rig)
    _behind(rig)

    class Racing:
        """A store where an operator unarchives the space (this release: it copies itself
        onto the pools) right after the migration read the space and the instance."""

        def __getattr__(self, name: str) -> Any:
            return getattr(rig.store, name)

        def gate_sources(self, space_keys: list[str]) -> Any:
            found = rig.store.gate_sources(space_keys)
            if rig.store.spaces[SPACE].archived:
                rig.svc.spaces.unarchive_space(ADMIN, SPACE)
            return found

    racing: Any = Racing()
    outcome = copy_gates_onto_pools(racing, None, 100, False)
    assert outcome.counts["pools"] == 5 and outcome.counts["copied"] == 4
    # The write that read "archived" lost its check on the space row, read again and copied
    # what the rows say now: not archived, both ceilings.
    for name in (POOL, "p1", "p2", "p3"):
        pool = _pool(rig, name)
        assert (pool.space_archived, pool.space_ceiling, pool.instance_ceiling) == (
            False,
            True,
            True,
        )


def test_a_copy_that_lost_to_a_newer_archive_leaves_the_newer_value() -> None:
    rig = Rig()
    # An archive's copy whose space row moved on (an unarchive) before its write: refused.
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert not rig.store.write_pool_gates(_pool(rig, POOL), {"space_archived": True})
    assert not _pool(rig, POOL).space_archived
    rig.store.update_instance(Settings(set={"max_active": 2}))
    assert not rig.store.write_pool_gates(_pool(rig, POOL), {"instance_ceiling": False})
    assert rig.store.write_pool_gates(_pool(rig, POOL), {"instance_ceiling": True})
