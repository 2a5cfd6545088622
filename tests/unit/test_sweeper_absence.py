"""The sweeper's own absence pushed out a bounded number of leases a pass: what a pass cut short
leaves unpushed is pushed by the next passes, never expired for the service's absence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from tenure.app import sweep as sweep_module
from tenure.app.ports import AbsencePush
from tenure.app.sweep import SweepReport
from tenure.domain.model import Event, Lease
from tenure.domain.states import LeaseState

from tests.unit.support import POOL, T0, Rig, as_lease

AWAY_S = 15 * 60  # the whole service was gone: no heartbeat answered, no pass
EVERY_S = 60  # the schedule's period, as rig.sweep() passes it
DEADLINE_MS = 450_000  # a lease started at T0 (default toleration 300 s, and the slack)


class PassCut(Exception):
    """Stands for the function's timeout, or a throttle past the store's retries, mid-pass."""


def _held(rig: Rig, n: int) -> list[Lease]:
    """n running leases held by two workers (fewer than the mass-expiry brake counts)."""
    return [rig.running(f"w{i % 2}") for i in range(n)]


def _absent(rig: Rig) -> list[Event]:
    return [e for e in rig.system_events() if e.type == "sweeper.service_absent"]


def _cut_after(rig: Rig, pushes: int) -> None:
    """The store's deadline push fails, as a pass cut short would, once `pushes` have landed."""
    real = rig.store.move_deadline
    landed = [0]

    def move_deadline(lease: Lease, seen: Lease) -> None:
        if landed[0] >= pushes:
            raise PassCut
        landed[0] += 1
        real(lease, seen)

    rig.store.move_deadline = move_deadline  # type: ignore[method-assign]


def _watch(rig: Rig, leases: list[Lease]) -> dict[str, list[Any]]:
    """What the next passes ask the store for: the due-index reads (with their limit), and
    the reads and deadline writes of `leases`."""
    ids = {x.id for x in leases}
    asked: dict[str, list[Any]] = {"due": [], "read": [], "moved": []}
    store = rig.store
    due, get, move = store.due_leases, store.get_lease, store.move_deadline

    def due_leases(pool: str, now: int | None, limit: int | None = None) -> list[str]:
        asked["due"].append((pool, now, limit))
        return due(pool, now, limit)

    def get_lease(lease_id: str, consistent: bool = True) -> Lease | None:
        if lease_id in ids:
            asked["read"].append(lease_id)
        return get(lease_id, consistent)

    def move_deadline(lease: Lease, seen: Lease) -> None:
        asked["moved"].append(lease.id)
        move(lease, seen)

    store.due_leases = due_leases  # type: ignore[method-assign]
    store.get_lease = get_lease  # type: ignore[method-assign]
    store.move_deadline = move_deadline  # type: ignore[method-assign]
    return asked


def _each_pass(rig: Rig, passes: int, check: Callable[[], None]) -> list[int]:
    """`passes` passes a schedule period apart, the first now; `check` after each; the
    pushes of each."""
    pushed = []
    for n in range(passes):
        if n:
            rig.advance(EVERY_S)
        pushed.append(rig.sweep().pushed)
        check()
    return pushed


def _sweep_until(rig: Rig, at_ms: int) -> list[SweepReport]:
    """Passes a schedule period apart until one runs at or after `at_ms`."""
    reports = []
    while rig.clock.now_ms() < at_ms:
        rig.advance(EVERY_S)
        reports.append(rig.sweep())
    return reports


def test_a_pass_cut_short_while_pushing_leaves_the_rest_to_the_next_pass_never_to_expiry(
    rig: Rig,
) -> None:
    rig.sweep()
    leases = _held(rig, 30)
    assert all(rig.lease(x.id).deadline == T0 + DEADLINE_MS for x in leases)
    rig.advance(AWAY_S)
    _cut_after(rig, 10)
    with pytest.raises(PassCut):
        rig.sweep()
    # Told when it was found, not only by a pass that got to its end.
    assert [e.data for e in _absent(rig)] == [{"gap_ms": AWAY_S * 1000, "pools": [POOL]}]
    assert rig.store.get_sweeper_state().absences == {
        POOL: AbsencePush(at=T0 + AWAY_S * 1000, gap_ms=AWAY_S * 1000)
    }

    del rig.store.move_deadline  # the next pass, a minute later, runs to its end
    rig.advance(EVERY_S)
    report = rig.sweep()
    assert report.expired == [] and report.absent_pools == []
    assert report.pushed == 20 and report.pushing == []
    pushed_to = T0 + DEADLINE_MS + AWAY_S * 1000
    for lease in leases:
        row = rig.lease(lease.id)
        assert row.state is LeaseState.RUNNING
        assert row.deadline == row.due_at == pushed_to
    assert len(_absent(rig)) == 1
    assert rig.store.get_sweeper_state().absences == {}

    # Silent past the deadline they were pushed to, they expire as any silent lease does.
    reports = _sweep_until(rig, pushed_to)
    assert [r.expired for r in reports[:-1]] == [[]] * (len(reports) - 1)
    assert sorted(reports[-1].expired) == sorted(x.id for x in leases)


def test_a_pass_pushes_at_most_its_bound_and_the_following_passes_finish_the_push(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 10
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", bound)
    rig.sweep()
    leases = _held(rig, 25)
    silent = leases[0]
    rig.advance(AWAY_S)
    found_at = rig.clock.now_ms()
    seen = _watch(rig, leases)

    def bounded() -> None:
        assert all(limit is not None and limit <= bound for _, _, limit in seen["due"])
        assert len(seen["read"]) <= bound and len(seen["moved"]) <= bound
        assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in leases)
        for key in seen:
            seen[key].clear()

    assert _each_pass(rig, 3, bounded) == [10, 10, 5]
    assert rig.store.get_sweeper_state().absences == {}
    assert len(_absent(rig)) == 1
    pushed_to = T0 + DEADLINE_MS + AWAY_S * 1000
    assert all(rig.lease(x.id).deadline == pushed_to for x in leases)
    assert pushed_to > found_at  # none is due by the pass that found the absence again

    # The service is back: every worker but one renews (once its deadline is less than a
    # toleration away); the silent one expires once past the deadline it was pushed to.
    assert all(r.expired == [] for r in _sweep_until(rig, pushed_to - 120_000))
    for lease in leases[1:]:
        rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    reports = _sweep_until(rig, pushed_to)
    assert [r.expired for r in reports] == [[]] * (len(reports) - 1) + [[silent.id]]
    assert sum(r.pushed for r in reports) == 0
    assert rig.lease(silent.id).state is LeaseState.LOST
    assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in leases[1:])


def test_a_lease_not_due_when_the_absence_is_found_is_left_to_its_worker(rig: Rig) -> None:
    rig.sweep()
    due = rig.running("w1")
    rig.advance(AWAY_S)
    later = rig.running("w2")  # claimed as the service came back: due long after this pass
    report = rig.sweep()
    assert report.absent_pools == [POOL] and report.pushed == 1
    assert rig.lease(due.id).deadline == T0 + DEADLINE_MS + AWAY_S * 1000
    assert rig.lease(later.id).deadline == later.deadline


def test_a_lease_overdue_before_the_absence_is_pushed_just_past_the_pass_that_found_it(
    rig: Rig,
) -> None:
    rig.sweep()
    lease = rig.running("w1")
    rig.advance(DEADLINE_MS / 1000 + 200)  # past its deadline when the sweeper went away
    # A pass ran then and left it (the mass-expiry brake, or its pool's bound, held it back).
    rig.store.sweeper = replace(rig.store.get_sweeper_state(), last_pass_at=rig.clock.now_ms())
    rig.advance(AWAY_S)
    found_at = rig.clock.now_ms()
    report = rig.sweep()
    assert report.pushed == 1 and report.expired == [] and report.pushing == []
    assert rig.lease(lease.id).deadline == found_at + 1
    rig.advance(EVERY_S)
    assert rig.sweep().expired == [lease.id]  # it was silent already before the absence


def test_an_absence_found_while_a_push_is_pending_adds_its_gap_to_the_leases_not_yet_pushed(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", 2)
    rig.sweep()
    leases = _held(rig, 4)
    rig.advance(AWAY_S)
    assert rig.sweep().pushed == 2
    rig.advance(AWAY_S)  # away again before the next pass could finish the push
    report = rig.sweep()
    assert report.absent_pools == [POOL] and report.expired == []
    assert [e.data["gap_ms"] for e in _absent(rig)] == [AWAY_S * 1000] * 2
    state = rig.store.get_sweeper_state()
    assert state.absences[POOL].gap_ms == 2 * AWAY_S * 1000
    rig.advance(EVERY_S)
    assert _each_pass(rig, 2, lambda: None) == [2, 0]
    assert rig.store.get_sweeper_state().absences == {}
    assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in leases)
    # The two the first push never reached missed both absences and were pushed by both; the
    # two it did reach were pushed again by both (more time, never less).
    deadlines = [rig.lease(x.id).deadline for x in leases]
    assert deadlines[2:] == [T0 + DEADLINE_MS + 2 * AWAY_S * 1000] * 2
    assert deadlines[:2] == [T0 + DEADLINE_MS + 3 * AWAY_S * 1000] * 2
