"""Claim priority: higher first, oldest first within a priority; the default costs nothing."""

from __future__ import annotations

import pytest
from tenure.app.dispatch_controls import queue_tiers
from tenure.app.leases.claims import CONTENDED_MS
from tenure.app.ports import Change
from tenure.app.runs import RunControls
from tenure.domain.errors import Conflict, ValidationFailed
from tenure.domain.model import PRIORITY_MARK_GRACE_MS

from tests.unit.support import ADMIN, MEMBER, POOL, Rig, as_lease


def _file(rig: Rig, priority: int | None, title: str) -> str:
    _, lease = rig.task(title=title, controls=RunControls(priority=priority))
    assert lease is not None
    return lease.id


def _claim_all(rig: Rig, count: int) -> list[str]:
    return [rig.claim().lease.id for _ in range(count)]


def test_a_sequential_claimer_gets_strict_priority_order_oldest_first_with_interleaved_filings(
    rig: Rig,
) -> None:
    filed: list[tuple[int, int, str]] = []
    for n, priority in enumerate([5, 9, 1, 5, 9, 7, None, 0, 7, 9]):
        rig.advance(1)
        filed.append((-(priority if priority is not None else 5), n, _file(rig, priority, f"t{n}")))
    expected = [lease_id for _, _, lease_id in sorted(filed)]
    assert _claim_all(rig, len(filed)) == expected


def test_a_claim_between_filings_takes_the_new_higher_priority_lease_first(rig: Rig) -> None:
    old = _file(rig, None, "old")
    rig.advance(1)
    urgent = _file(rig, 8, "urgent")
    assert rig.claim().lease.id == urgent
    rig.advance(1)
    later = _file(rig, 8, "later")
    assert rig.claim().lease.id == later
    assert rig.claim().lease.id == old


def test_default_priority_reads_only_the_default_partition_and_writes_no_mark(rig: Rig) -> None:
    for n in range(3):
        _file(rig, None if n % 2 else 5, f"t{n}")
    assert "mark_queue" not in rig.store.writes
    rig.store.queue_reads.clear()
    _claim_all(rig, 3)
    assert {priority for _, priority in rig.store.queue_reads} == {None}
    assert rig.store.get_pool(POOL).queue_marks is None


def test_a_lease_at_the_default_priority_stores_no_priority(rig: Rig) -> None:
    lease_id = _file(rig, 5, "t")
    assert rig.lease(lease_id).priority is None
    assert rig.lease(lease_id).claim_priority == 5


def test_a_non_default_priority_marks_its_partition_once_per_refresh(rig: Rig) -> None:
    _file(rig, 9, "a")
    _file(rig, 9, "b")
    _file(rig, 2, "c")
    assert rig.store.writes.count("mark_queue") == 2  # 9 once, 2 once: the cache says marked
    marks = rig.store.get_pool(POOL).queue_marks or {}
    assert set(marks) == {"9", "2"}
    assert queue_tiers(rig.store.get_pool(POOL)) == [9, None, 2]


def test_the_sweeper_drops_a_mark_whose_partition_stayed_empty_past_the_grace(rig: Rig) -> None:
    lease_id = _file(rig, 9, "a")
    rig.claim()
    rig.svc.reports.complete(as_lease(lease_id), lease_id, {"outcome": "success"})
    rig.sweep()
    assert "9" in (rig.store.get_pool(POOL).queue_marks or {})  # too recent to drop
    dropped: list[str] = []
    for _ in range(PRIORITY_MARK_GRACE_MS // 60_000 + 1):
        rig.advance(60)
        dropped += rig.sweep().marks_dropped
    assert rig.store.get_pool(POOL).queue_marks is None
    assert dropped == [f"{POOL}:9"]
    # A later filing marks it again, and its lease is claimed first.
    _file(rig, None, "plain")
    rig.advance(1)
    again = _file(rig, 9, "b")
    assert rig.claim().lease.id == again


def test_a_mark_is_kept_while_its_partition_holds_a_lease(rig: Rig) -> None:
    waiting = _file(rig, 1, "low")
    for _ in range(PRIORITY_MARK_GRACE_MS // 60_000 + 2):
        rig.advance(60)
        rig.sweep()
    assert "1" in (rig.store.get_pool(POOL).queue_marks or {})
    assert rig.claim().lease.id == waiting


def test_a_released_lease_keeps_its_priority_in_its_successor(rig: Rig) -> None:
    _file(rig, None, "plain")
    rig.advance(1)
    urgent = _file(rig, 9, "urgent")
    won = rig.claim()
    assert won.lease.id == urgent
    rig.svc.reports.release(as_lease(urgent), urgent, {})
    successor = rig.claim().lease
    assert successor.id != urgent and successor.job_id == won.lease.job_id
    assert successor.priority == 9


def test_enqueue_takes_its_own_priority_and_otherwise_the_tasks(rig: Rig) -> None:
    task, lease = rig.task(pool=None, controls=RunControls(priority=8))
    assert lease is None
    first = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert first.priority == 8
    rig.svc.operator.cancel(MEMBER, first.id)
    second = rig.svc.filing.enqueue(MEMBER, task.id, POOL, None, RunControls(priority=3))
    assert second.priority == 3


@pytest.mark.parametrize("bad", [-1, 10, True, "9"])
def test_a_priority_out_of_range_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValidationFailed) as refused:
        RunControls(priority=bad)  # type: ignore[arg-type]
    assert refused.value.details == {"field": "priority"}


def test_after_a_lost_race_a_claimer_spreads_over_the_rest_and_keeps_spreading_a_while(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [_file(rig, None, f"t{n}") for n in range(4)]
    monkeypatch.setattr(rig.ids, "shuffle", lambda items: list(reversed(items)))
    real = rig.store.commit
    lost = {"left": 1}

    def rival_first(change: Change) -> None:
        if lost["left"] and change.leases[0].new.worker_id:
            lost["left"] -= 1
            raise Conflict("a rival claimed it first")
        real(change)

    monkeypatch.setattr(rig.store, "commit", rival_first)
    # The head was lost: the rest are tried spread (here: reversed), not in order.
    assert rig.claim().lease.id == ids[3]
    # Within the contended window this process spreads from the start.
    assert rig.claim().lease.id == ids[2]
    rig.advance(CONTENDED_MS / 1000 + 1)
    assert rig.claim().lease.id == ids[0]  # quiet again: strict order


def test_the_scheduler_status_and_the_depth_gauges_count_every_priority(rig: Rig) -> None:
    _file(rig, 9, "a")
    _file(rig, None, "b")
    _file(rig, 1, "c")
    status = rig.svc.scheduler.scheduler_status(ADMIN)
    assert status.queued_run_count == 3
    (depth,) = [d for d in rig.sweep().depths if d.pool == POOL]
    assert depth.queued == 3


def test_a_deferred_high_priority_lease_waits_and_the_due_default_one_is_claimed(
    rig: Rig,
) -> None:
    now = rig.clock.now_ms()
    _, later = rig.task(title="later", not_before=now + 60_000, controls=RunControls(priority=9))
    plain = _file(rig, None, "plain")
    assert later is not None
    assert rig.claim().lease.id == plain
    rig.advance(61)
    assert rig.claim().lease.id == later.id
