"""The pool row as the claim's gate, on DynamoDB Local: an archive or a ceiling, once
answered, holds for the very next claim of every pool concerned, in another warm process too;
claims racing an archive on real threads never hand out a lease to a claim that began after
the archive answered; and `tenure admin migrate`'s rewrite copies each pool's gates from its
space and the instance, resumably and once."""

from __future__ import annotations

import threading
import time
from typing import Any

from tenure.app.migrations import (
    POOL_GATES_FROM_SCHEMA,
    SCHEMA_VERSION,
    SchemaState,
    copy_gates_onto_pools,
    migrate,
)
from tenure.app.ports import Settings
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.model import Pool, PoolKind

from tests.conformance.contract import ALPHA, BETA, GAMMA, OTHER_SPACE, SPACE, make_world
from tests.conformance.test_races import real_time_service, run_threads, seed
from tests.conftest import ADMIN, WORKER, Rig

THREADS = 6


def _warm(rig: Rig) -> Tenure:
    """Another process sharing the table, its caches warm (pools, spaces, the instance)."""
    other = compose(Rows.of(rig.store, rig.store), rig.clock, rig.svc.ids)
    for name in (ALPHA, BETA, GAMMA):
        other.kernel.catalog.pool(name)
    other.kernel.catalog.space_cached(SPACE)
    other.kernel.catalog.instance()
    return other


def _claim(svc: Tenure, pool: str, worker: str = "w-1") -> Any:
    return svc.claims.claim(WORKER, pool, worker, "1.0", 0, None)


def _file(rig: Rig, pool: str, space: str = SPACE) -> None:
    rig.svc.filing.create_task(ADMIN, space, "work", None, None, {}, pool, None)


def _pool(rig: Rig, name: str) -> Pool:
    found = rig.store.get_pool(name)
    assert found is not None
    return found


def test_archive_answered_refuses_the_next_claim_of_every_pool_of_the_space(rig: Rig) -> None:
    make_world(rig.svc)
    for pool, space in ((ALPHA, SPACE), (BETA, SPACE), (GAMMA, OTHER_SPACE)):
        _file(rig, pool, space)
        _file(rig, pool, space)
    other = _warm(rig)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert _pool(rig, ALPHA).space_archived and _pool(rig, BETA).space_archived
    assert _claim(other, ALPHA) is None and _claim(other, BETA) is None
    assert _claim(other, GAMMA) is not None  # another space's pool is not touched
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert _claim(other, ALPHA) is not None and _claim(other, BETA) is not None


def test_a_ceiling_set_answered_holds_back_the_next_claim(rig: Rig) -> None:
    make_world(rig.svc)
    for _ in range(2):
        _file(rig, ALPHA)
        _file(rig, GAMMA, OTHER_SPACE)
    other = _warm(rig)
    assert _claim(other, ALPHA) is not None  # one lease held before any ceiling
    rig.svc.instance.update_instance(ADMIN, {"max_active": 1})
    assert all(_pool(rig, p).instance_ceiling for p in (ALPHA, BETA, GAMMA))
    assert _claim(other, GAMMA, "w-2") is None  # the held lease counts; the ceiling is full
    rig.svc.instance.update_instance(ADMIN, {"max_active": None})
    assert not _pool(rig, GAMMA).instance_ceiling
    assert _claim(other, GAMMA, "w-2") is not None


def test_a_space_made_with_a_ceiling_gives_its_pools_that_ceiling(rig: Rig) -> None:
    rig.svc.spaces.create_space(ADMIN, "CAPPED", "Capped", 1)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="capped", space="CAPPED", kind=PoolKind.COMMAND, created_at=0)
    )
    assert _pool(rig, "capped").space_ceiling
    for _ in range(2):
        _file(rig, "capped", "CAPPED")
    assert _claim(rig.svc, "capped") is not None
    assert _claim(rig.svc, "capped", "w-2") is None
    assert rig.store.held_count("space", "CAPPED") == 1


def test_claims_racing_an_archive_never_win_once_it_has_answered(rig: Rig) -> None:
    """Claimers on real threads, each recording when its claim call began and whether it
    won, while the archive runs: every claim call that began after the archive answered is
    refused. A call that read its pool row before the copy landed may still win while the
    archive runs (its conditional write was on its way), as with any pause: those are
    counted, and each of them began before the answer."""
    make_world(rig.svc)
    seed(rig, 60)
    svc, _ = real_time_service(rig)
    answered: list[float] = []
    won_after_answer: list[tuple[float, float]] = []
    won_before = 0
    lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(THREADS + 1, timeout=60)

    def claimer(n: int) -> None:
        nonlocal won_before
        start.wait()
        while not stop.is_set():
            began = time.monotonic()
            won = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            ended = time.monotonic()
            if won is None:
                continue
            with lock:
                if answered and began > answered[0]:
                    won_after_answer.append((began, ended))
                else:
                    won_before += 1

    def archiver(n: int) -> None:
        if n < THREADS:
            claimer(n)
            return
        start.wait()
        time.sleep(0.3)  # let the claims run
        svc.spaces.archive_space(ADMIN, SPACE)
        with lock:
            answered.append(time.monotonic())
        time.sleep(1.0)  # claims go on asking after the answer
        stop.set()

    run_threads(THREADS + 1, archiver)
    print(f"\narchive race: {won_before} claims won before the answer (or began before it)")
    assert answered, "the archive never answered"
    assert won_before > 0, "no claim won before the archive: the race did not happen"
    assert won_after_answer == [], won_after_answer
    assert rig.svc.claims.claim(WORKER, ALPHA, "late", "1.0", 0, None) is None


class LateCopy:
    """The real store, where an archive's copy onto the pool rows waits, after its space
    write, until the test lets it go: another request's unarchive lands in between."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.copying = threading.Event()
        self.go_on = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def write_pool_gates(self, pool: Pool, gates: dict[str, bool]) -> bool:
        if gates == {"space_archived": True}:
            self.copying.set()
            assert self.go_on.wait(60)
        return bool(self.inner.write_pool_gates(pool, gates))


def test_an_archives_late_copy_never_undoes_the_unarchive_that_followed(rig: Rig) -> None:
    """An archive writes its space row, then (late) its copy; an unarchive lands in between
    and answers (the pool rows said "not archived" already: it writes none). The late copy
    checks the space row it copies, finds it moved on and writes nothing, so the pool rows go
    on saying what the space row says, and claims are not refused for a space that is not
    archived."""
    make_world(rig.svc)
    _file(rig, ALPHA)
    late = LateCopy(rig.store)
    archiving = compose(Rows.of(late, late), rig.clock, rig.svc.ids)  # type: ignore[arg-type]
    archive = threading.Thread(target=archiving.spaces.archive_space, args=(ADMIN, SPACE))
    archive.start()
    assert late.copying.wait(60)
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    late.go_on.set()
    archive.join(60)
    space = rig.store.get_space(SPACE)
    assert space is not None and not space.archived
    assert not _pool(rig, ALPHA).space_archived and not _pool(rig, BETA).space_archived
    assert _claim(rig.svc, ALPHA) is not None


def test_a_pool_made_while_its_space_is_archived_says_so(rig: Rig) -> None:
    """A pool made while its space is archived: the archive lands after the new pool read its
    space and before the pool's row is written, so the archive's copy, which lists the pools
    after its space write, does not find it; the new pool reads its space again after its own
    write and copies the archive itself. Then, on real threads, the two at once, a few
    times: one of them always sees the other."""
    make_world(rig.svc)

    class ArchivedMeanwhile:
        def __getattr__(self, name: str) -> Any:
            return getattr(rig.store, name)

        def put_pool(self, pool: Pool) -> None:
            rig.svc.spaces.archive_space(ADMIN, SPACE)
            rig.store.put_pool(pool)

    meanwhile: Any = ArchivedMeanwhile()
    making = compose(Rows.of(meanwhile, meanwhile), rig.clock, rig.svc.ids)
    late = Pool(name="late", space=SPACE, kind=PoolKind.COMMAND, created_at=0)
    assert making.pools.create_pool(ADMIN, late).space_archived
    assert _pool(rig, "late").space_archived
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert not _pool(rig, "late").space_archived

    svc, _ = real_time_service(rig)
    for n in range(4):
        start = threading.Barrier(2, timeout=60)
        name = f"made-{n}"

        def race(i: int, name: str = name, start: threading.Barrier = start) -> None:
            start.wait()
            if i == 0:
                svc.spaces.archive_space(ADMIN, SPACE)
            else:
                pool = Pool(name=name, space=SPACE, kind=PoolKind.COMMAND, created_at=0)
                svc.pools.create_pool(ADMIN, pool)

        run_threads(2, race)
        assert _pool(rig, name).space_archived, name
        svc.spaces.unarchive_space(ADMIN, SPACE)
        assert not _pool(rig, name).space_archived


def test_the_migration_copies_the_gates_resumably_and_once(rig: Rig) -> None:
    make_world(rig.svc)
    # As an earlier release left them: pools with no copy; the space archived, a ceiling on
    # the instance (written on the rows alone).
    rig.store.update_space(SPACE, Settings(set={"archived": True}))
    rig.store.update_instance(Settings(set={"max_active": 5}))
    for name in (ALPHA, BETA, GAMMA):
        rig.store.update_pool(
            name,
            Settings(
                set={"space_archived": False, "space_ceiling": False, "instance_ceiling": False}
            ),
        )
    state = rig.store.schema_state()
    assert rig.store.save_schema(state, SchemaState(version=POOL_GATES_FROM_SCHEMA - 1))

    [first] = [o for o in migrate(rig.store, page_size=1, max_pages=1) if o.name == "pool-gates"]
    assert (first.status, first.pages) == ("stopped", 1)
    saved = rig.store.schema_state()
    assert (saved.version, saved.migration) == (POOL_GATES_FROM_SCHEMA - 1, "pool-gates")
    [rest] = [o for o in migrate(rig.store, page_size=1) if o.name == "pool-gates"]
    assert rest.status == "applied"
    assert first.counts["copied"] + rest.counts["copied"] == 3
    assert rig.store.schema_state().version == SCHEMA_VERSION
    assert (_pool(rig, ALPHA).space_archived, _pool(rig, ALPHA).instance_ceiling) == (True, True)
    assert (_pool(rig, GAMMA).space_archived, _pool(rig, GAMMA).instance_ceiling) == (False, True)
    again = copy_gates_onto_pools(rig.store, None, 100, False)
    assert again.counts == {"pools": 3, "spaceless": 0, "already_copied": 3, "copied": 0}
