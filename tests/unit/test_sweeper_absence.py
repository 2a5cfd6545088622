"""The sweeper's own absence made good: every held lease of the pool is pushed out by the gap,
once, a bounded number a pass; what a pass cut short leaves unpushed is pushed by the next
passes, never expired for the service's absence."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from tenure.api.views import lease_view
from tenure.app import sweep as sweep_module
from tenure.app.ports import AbsencePush, DueEntry
from tenure.app.sweep import SweepReport, owed, pending_absences
from tenure.domain.model import Event, Lease
from tenure.domain.states import LeaseState

from tests.unit.support import POOL, T0, Rig, as_lease, make_lease

AWAY_S = 15 * 60  # the whole service was gone: no heartbeat answered, no pass
EVERY_S = 60  # the schedule's period, as rig.sweep() passes it
DEADLINE_MS = 450_000  # a lease started at T0 (default toleration 300 s, and the slack)


class PassCut(Exception):
    """Stands for the function's timeout, or a throttle past the store's retries, mid-pass."""


def _held(rig: Rig, n: int) -> list[Lease]:
    """n running leases held by two workers (fewer than the mass-expiry brake counts)."""
    return [rig.running(f"w{i % 2}") for i in range(n)]


def _hold_for(rig: Rig, worker: str, lease_seconds: int) -> Lease:
    """A running lease whose worker asked for `lease_seconds` of toleration."""
    rig.task()
    won = rig.claim(worker, lease_seconds=lease_seconds)
    return rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)


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


class _Landed:
    """Counts each lease's deadline pushes that landed; with `cut` set, the store's push
    fails, as a pass cut short would, once that many more have landed."""

    def __init__(self, rig: Rig) -> None:
        self.counts: Counter[str] = Counter()
        self.cut: int | None = None
        self.real = rig.store.move_deadline
        rig.store.move_deadline = self.move_deadline  # type: ignore[method-assign]

    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        if self.cut is not None:
            if self.cut <= 0:
                raise PassCut
            self.cut -= 1
        self.real(lease, seen)
        self.counts[lease.id] += 1


def _landed(rig: Rig) -> _Landed:
    return _Landed(rig)


def _watch(rig: Rig, leases: list[Lease]) -> dict[str, list[Any]]:
    """What the next passes ask the store for: the due-index reads (with where they start,
    and their limit), and the reads and deadline writes of `leases`."""
    ids = {x.id for x in leases}
    asked: dict[str, list[Any]] = {"due": [], "read": [], "moved": []}
    store = rig.store
    due, page, get, move = store.due_leases, store.due_page, store.get_lease, store.move_deadline

    def due_leases(pool: str, now: int | None, limit: int | None = None) -> list[str]:
        asked["due"].append((pool, now, limit))
        return due(pool, now, limit)

    def due_page(pool: str, after: DueEntry | None, limit: int) -> list[DueEntry]:
        asked["due"].append((pool, after, limit))
        return page(pool, after, limit)

    def get_lease(lease_id: str, consistent: bool = True) -> Lease | None:
        if lease_id in ids:
            asked["read"].append(lease_id)
        return get(lease_id, consistent)

    def move_deadline(lease: Lease, seen: Lease) -> None:
        asked["moved"].append(lease.id)
        move(lease, seen)

    store.due_leases = due_leases  # type: ignore[method-assign]
    store.due_page = due_page  # type: ignore[method-assign]
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


def test_a_lease_not_due_when_the_absence_is_found_is_pushed_by_the_gap_too(rig: Rig) -> None:
    rig.sweep()
    due = rig.running("w1")
    # Its worker could not heartbeat through the outage either: the time left of its
    # toleration when the service came back is short by the gap.
    ahead = _hold_for(rig, "w2", 3600)
    rig.advance(AWAY_S)
    found_at = rig.clock.now_ms()
    assert ahead.deadline is not None and ahead.deadline > found_at
    later = rig.running("w1")  # claimed as the service came back: nothing of it was lost
    report = rig.sweep()
    assert report.absent_pools == [POOL] and report.pushed == 2 and report.pushing == []
    assert rig.lease(due.id).deadline == T0 + DEADLINE_MS + AWAY_S * 1000
    assert rig.lease(ahead.id).deadline == ahead.deadline + AWAY_S * 1000
    assert rig.lease(ahead.id).due_at == ahead.deadline + AWAY_S * 1000
    assert rig.lease(later.id).deadline == later.deadline
    # The mark that tells a pushed lease is the sweeper's own: no answer shows it.
    assert rig.lease(ahead.id).pushed_for == found_at
    assert "pushed_for" not in json.dumps(lease_view(rig.lease(ahead.id)), default=str)


def _spread(rig: Rig) -> tuple[list[Lease], dict[str, int]]:
    """25 running leases: 12 due at T0 + 450 s, before the absence is found, and 13 due
    after it, from T0 + 930 s to T0 + 1,290 s, so each of the 12 pushed by the gap
    (to T0 + 1,350 s) lands in the due index behind every one of the 13; and their deadlines."""
    overdue = _held(rig, 12)
    ahead = [_hold_for(rig, f"w{i % 2}", 620 + 20 * i) for i in range(13)]
    leases = overdue + ahead
    return leases, {x.id: rig.lease(x.id).deadline or 0 for x in leases}


def test_every_held_lease_is_pushed_once_by_the_gap_by_passes_that_each_keep_the_bound(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    bound = 10
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", bound)
    rig.sweep()
    leases, before = _spread(rig)
    silent = leases[0]
    rig.advance(AWAY_S)
    seen = _watch(rig, leases)
    moved: list[str] = []
    met_again: list[str] = []

    def bounded() -> None:
        assert [limit for _, _, limit in seen["due"]] == [bound]  # one page a pass
        assert len(seen["read"]) <= bound and len(seen["moved"]) <= bound
        met_again.extend(x for x in seen["read"] if x in moved)
        moved.extend(seen["moved"])
        for key in seen:
            seen[key].clear()
        assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in leases)
        seen["read"].clear()

    pushes = _each_pass(rig, 6, bounded)
    # Each pushed lease is met again where it landed, further on in the index: read, found
    # marked, and left. The walk ends at the first page short of the bound.
    assert pushes == [10, 10, 5, 0, 0, 0]
    assert sorted(met_again) == sorted(x.id for x in leases)
    assert sorted(moved) == sorted(x.id for x in leases)  # each written once
    assert rig.store.get_sweeper_state().absences == {}
    assert len(_absent(rig)) == 1
    assert {x.id: rig.lease(x.id).deadline for x in leases} == {
        i: d + AWAY_S * 1000 for i, d in before.items()
    }
    # The service is back: every worker but one renews; the silent one expires once past the
    # deadline it was pushed to, and nothing before.
    pushed_to = before[silent.id] + AWAY_S * 1000
    for lease in leases[1:]:
        rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    reports = _sweep_until(rig, pushed_to)
    assert [r.expired for r in reports] == [[]] * (len(reports) - 1) + [[silent.id]]
    assert sum(r.pushed for r in reports) == 0


def test_passes_cut_short_mid_walk_lose_no_lease_and_push_none_twice(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", 10)
    rig.sweep()
    leases, before = _spread(rig)
    rig.advance(AWAY_S)
    landed = _landed(rig)
    for cut in (4, None, 3, 7):  # the first pass, and the third and fourth, cut short
        landed.cut = cut
        if cut is None:
            assert rig.sweep().expired == []
        else:
            with pytest.raises(PassCut):
                rig.sweep()
        rig.advance(EVERY_S)
    landed.cut = None
    reports = [rig.sweep()]
    for _ in range(10):
        if not rig.store.get_sweeper_state().absences:
            break
        rig.advance(EVERY_S)
        reports.append(rig.sweep())
    assert rig.store.get_sweeper_state().absences == {}
    assert all(r.expired == [] for r in reports)
    assert landed.counts == {x.id: 1 for x in leases}
    assert {x.id: rig.lease(x.id).deadline for x in leases} == {
        i: d + AWAY_S * 1000 for i, d in before.items()
    }
    assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in leases)
    assert len(_absent(rig)) == 1


def test_a_lease_renewed_after_the_service_came_back_is_not_pushed(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", 2)
    rig.sweep()
    overdue = _held(rig, 3)
    renewed_ahead = _hold_for(rig, "w0", 3600)
    silent_ahead = _hold_for(rig, "w1", 3600)
    rig.advance(AWAY_S)
    assert rig.sweep().pushed == 2  # the first two of the due index
    rig.advance(10)
    beat_at = rig.clock.now_ms()
    # Two workers reach the service again before the walk has come to their leases.
    rig.svc.reports.heartbeat(as_lease(overdue[2].id), overdue[2].id, None)
    rig.svc.reports.heartbeat(as_lease(renewed_ahead.id), renewed_ahead.id, 3000)
    renewed = {x.id: rig.lease(x.id).deadline for x in (overdue[2], renewed_ahead)}
    assert all(rig.lease(i).heartbeat_at == beat_at for i in renewed)
    rig.advance(EVERY_S - 10)
    _each_pass(rig, 4, lambda: None)
    assert rig.store.get_sweeper_state().absences == {}
    assert {i: rig.lease(i).deadline for i in renewed} == renewed
    assert rig.lease(silent_ahead.id).deadline == (silent_ahead.deadline or 0) + AWAY_S * 1000
    pushed_to = T0 + DEADLINE_MS + AWAY_S * 1000
    assert [rig.lease(x.id).deadline for x in overdue[:2]] == [pushed_to] * 2


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


def test_an_absence_found_while_a_push_is_pending_pushes_each_lease_by_the_gaps_it_lost(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sweep_module, "DUE_PER_PASS", 2)
    rig.sweep()
    leases = _held(rig, 4)
    rig.advance(AWAY_S)
    first_at = rig.clock.now_ms()
    assert rig.sweep().pushed == 2  # leases[0] and [1] pushed for the first absence
    rig.advance(10)
    rig.svc.reports.heartbeat(as_lease(leases[2].id), leases[2].id, None)  # back in between
    beat = rig.lease(leases[2].id).deadline or 0
    between = rig.running("w0")  # claimed in between
    rig.advance(AWAY_S)  # away again before the next pass could finish the push
    report = rig.sweep()
    assert report.absent_pools == [POOL] and report.expired == []
    second = (AWAY_S + 10) * 1000
    assert [e.data["gap_ms"] for e in _absent(rig)] == [AWAY_S * 1000, second]
    push = rig.store.get_sweeper_state().absences[POOL]
    assert (push.at, push.gap_ms, push.earlier) == (
        rig.clock.now_ms(),
        second,
        ((first_at, AWAY_S * 1000),),
    )
    for _ in range(10):
        if not rig.store.get_sweeper_state().absences:
            break
        rig.advance(EVERY_S)
        assert rig.sweep().expired == []
    assert rig.store.get_sweeper_state().absences == {}
    assert all(rig.lease(x.id).state is LeaseState.RUNNING for x in [*leases, between])
    # Silent through both absences: both gaps, whether the first push reached it or not.
    deadlines = [rig.lease(x.id).deadline for x in leases]
    both = T0 + DEADLINE_MS + AWAY_S * 1000 + second
    assert [deadlines[0], deadlines[1], deadlines[3]] == [both] * 3
    # Renewed, or claimed, after the first: the second gap alone.
    assert deadlines[2] == beat + second
    assert rig.lease(between.id).deadline == (between.deadline or 0) + second


def test_the_absences_a_pending_push_keeps_are_bounded_and_merged_towards_more_time() -> None:
    push = AbsencePush(at=1_000_000, gap_ms=600_000)
    for n in range(1, 20):
        push = pending_absences({POOL: push}, [POOL], 1_000_000 + n * 1_000_000, 600_000)[POOL]
        assert len(push.earlier) <= sweep_module.EARLIER_KEPT
        assert push.after is None
    assert sum(gap for _, gap in push.earlier) + push.gap_ms == 20 * 600_000
    # A lease silent through all of them is owed every gap; one renewed in between, no less
    # than the gaps found after its renewal.
    silent = make_lease("lease_silent", heartbeat_at=0, claimed_at=0)
    assert owed(push, silent) == 20 * 600_000
    renewed = replace(silent, heartbeat_at=push.at - 1)
    assert owed(push, renewed) == push.gap_ms
    assert owed(push, replace(silent, pushed_for=push.at)) == 0
