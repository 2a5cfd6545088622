"""The sweeper's note that queued work waits on a full ceiling while workers are reachable:
once per episode, on the scheduler's timeline and the waiting task's, and shown by inspect."""

from __future__ import annotations

from tenure.domain.model import Lease

from tests.unit.support import READER, Rig, as_lease

POOL_ONE = "one-at-a-time"


def _minute(rig: Rig, held: Lease) -> None:
    rig.advance(60)
    rig.svc.reports.heartbeat(as_lease(held.id), held.id, None)
    rig.sweep()


def _told(rig: Rig, task_id: str) -> list[dict[str, object]]:
    return [e.data for e in rig.events(task_id) if e.type == "scheduler.capacity_waiting"]


def _system(rig: Rig) -> list[dict[str, object]]:
    events = rig.store.timeline("system", "scheduler", None)
    return [e.data for e in events if e.type == "scheduler.capacity_waiting"]


def test_work_behind_a_full_ceiling_is_noted_once_per_episode_and_inspect_shows_it(
    rig: Rig,
) -> None:
    rig.make_pool(POOL_ONE, max_active=1)
    rig.sweep()
    held = rig.running("w1", pool=POOL_ONE)
    waiting, pending = rig.task(pool=POOL_ONE)
    assert pending is not None
    for _ in range(5):
        _minute(rig, held)
    assert len(_told(rig, waiting.id)) == 1
    assert [(d["pool"], d["held"], d["max_active"]) for d in _system(rig)] == [(POOL_ONE, 1, 1)]
    snapshot = rig.svc.inspection.inspect(READER, waiting.id)
    assert "scheduler.capacity_waiting" in [e.type for e in snapshot.recent_events]
    fact = snapshot.facts["capacity_waiting"]
    assert fact is not None and fact["pool"] == POOL_ONE and fact["max_active"] == 1
    # The ceiling frees: the episode ends; a new one full again is noted again.
    rig.svc.reports.complete(as_lease(held.id), held.id, {})
    rig.advance(60)
    rig.sweep()
    assert rig.store.get_sweeper_state().capacity_waiting == {}
    second = rig.claim("w1", pool=POOL_ONE).lease
    assert second.task_id == waiting.id
    rig.task(pool=POOL_ONE)
    _minute(rig, second)
    _minute(rig, second)
    assert len(_system(rig)) == 2
    assert rig.svc.inspection.inspect(READER, waiting.id).facts["capacity_waiting"] is None


def test_no_note_without_a_ceiling_or_without_a_reachable_worker(rig: Rig) -> None:
    rig.make_pool(POOL_ONE, max_active=1)
    rig.sweep()
    rig.task(pool=POOL_ONE)
    for _ in range(3):
        rig.advance(60)
        rig.sweep()
    assert _system(rig) == []  # nothing held: the ceiling is not full
    held = rig.running("w1")  # the default pool has no ceiling
    rig.task()
    for _ in range(3):
        _minute(rig, held)
    assert _system(rig) == []
