"""Inspect's diagnostics and next_action, one rule at a time (docs/task-graph.md, Inspect)."""

from __future__ import annotations

import pytest
from tenure.app.inspect import NextAction
from tenure.app.ports import SweeperState
from tenure.domain.errors import StaleLease
from tenure.domain.fencing import DEADLINE_SLACK, iso_ms

from tests.unit.support import ADMIN, POOL, READER, WORKER, Rig, as_lease


def _codes(rig: Rig, some_id: str) -> list[str]:
    return [d.code for d in rig.svc.inspection.inspect(READER, some_id).diagnostics]


def _action(rig: Rig, some_id: str) -> NextAction:
    return rig.svc.inspection.inspect(READER, some_id).next_action


def test_stuck_is_a_running_run_silent_for_a_grace_and_never_an_ended_one(rig: Rig) -> None:
    lease = rig.running()
    assert "stuck" not in _codes(rig, lease.id)
    rig.advance(51)  # the pool's grace is 50 s
    assert "stuck" in _codes(rig, lease.id)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    assert "stuck" not in _codes(rig, lease.id)


def test_a_run_heartbeating_steadily_is_never_stuck_though_its_deadline_is_rarely_written(
    rig: Rig,
) -> None:
    # The lease's heartbeat_at moves only with its deadline (half a toleration apart); the
    # worker's last_seen says it is heard from every few seconds, and that is what counts.
    lease = rig.running("w1")
    for _ in range(18):  # three minutes of 10 s heartbeats: the deadline is rewritten once
        rig.advance(10)
        rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
        assert "stuck" not in _codes(rig, lease.id)
    facts = rig.svc.inspection.inspect(READER, lease.id).facts
    assert facts["heard_from_ms_ago"] < 50_000


def test_orphan_is_a_held_run_whose_worker_is_unreachable_and_never_an_ended_one(
    rig: Rig,
) -> None:
    lease = rig.running("w1")
    assert "orphan" not in _codes(rig, lease.id)
    rig.advance(80)  # w1 silent past 1.5 graces: unreachable
    assert "orphan" in _codes(rig, lease.id)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    assert "orphan" not in _codes(rig, lease.id)


def test_stranded_is_pending_with_no_reachable_worker_unless_something_pauses_it(
    rig: Rig,
) -> None:
    _, lease = rig.task()
    assert lease is not None
    assert "stranded" in _codes(rig, lease.id)
    rig.svc.pools.pause_pool(ADMIN, POOL)
    assert "stranded" not in _codes(rig, lease.id)
    rig.svc.pools.resume_pool(ADMIN, POOL)
    rig.svc.claims.claim(WORKER, POOL, "w-idle", None, 0, None)  # takes it: a worker is there
    assert "stranded" not in _codes(rig, lease.id)


def test_crashed_is_a_lost_last_run_and_not_one_a_later_run_followed(rig: Rig) -> None:
    once = rig.running("w1", max_attempts=1)
    twice = rig.running("w2", max_attempts=3)
    for _ in range(8):  # minute by minute past the 300 s toleration
        rig.advance(60)
        rig.sweep()
    assert "crashed" in _codes(rig, once.task_id or "")  # exhausted: nothing after it
    assert "crashed" not in _codes(rig, twice.task_id or "")  # requeued: a later run exists


def test_stale_lease_is_a_refused_late_report(rig: Rig) -> None:
    lease = rig.running()
    assert "stale_lease" not in _codes(rig, lease.id)
    with pytest.raises(StaleLease):
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"fence": 7})
    shot = rig.svc.inspection.inspect(READER, lease.id)
    stale = [d for d in shot.diagnostics if d.code == "stale_lease"]
    assert len(stale) == 1 and "fence 7" in stale[0].message


def test_next_action_for_each_situation(rig: Rig) -> None:
    _, waiting = rig.task()
    assert waiting is not None
    assert _action(rig, waiting.id) is NextAction.WAITING_FOR_SESSION  # no worker yet
    rig.svc.workers.mark_seen(rig.store.get_pool(POOL), "w-on", None)  # type: ignore[arg-type]
    assert _action(rig, waiting.id) is NextAction.CLAIM_AVAILABLE
    held = rig.svc.claims.claim(WORKER, POOL, "w-on", None, 0, None)
    assert held is not None
    rig.svc.reports.start(as_lease(held.lease.id), held.lease.id)
    assert _action(rig, held.lease.id) is NextAction.RUNNING
    rig.advance(300 * (1 + DEADLINE_SLACK) + 10)  # past its deadline, not yet swept
    assert _action(rig, held.lease.id) is NextAction.STRANDED
    rig.svc.reports.complete(as_lease(held.lease.id), held.lease.id, {})
    assert _action(rig, held.lease.id) is NextAction.TERMINAL
    failed = rig.running("w-f", max_attempts=1)
    rig.svc.reports.fail(as_lease(failed.id), failed.id, {"error": "boom"})
    assert _action(rig, failed.id) is NextAction.RECOVERY_REQUIRED


def test_a_lease_whose_own_heartbeats_stop_while_its_worker_goes_on_reads_stuck(rig: Rig) -> None:
    # The worker's last_seen stays fresh through its other lease, so only the lease's own
    # heartbeat_at can tell: stuck once it is older than grace plus the deadline's slack.
    silent = rig.running("w1")
    other = rig.running("w1")
    for second in range(10, 260, 10):
        rig.advance(10)
        rig.svc.reports.heartbeat(as_lease(other.id), other.id, None)
        if second <= 190:  # grace 50 s + half of the 300 s toleration = 200 s
            assert "stuck" not in _codes(rig, silent.id), second
    assert "stuck" in _codes(rig, silent.id)
    assert "stuck" not in _codes(rig, other.id)


def test_mass_expiry_hold_names_the_hold_on_an_open_run_s_pool_and_its_end(rig: Rig) -> None:
    lease = rig.running("w1")
    assert "mass_expiry_hold" not in _codes(rig, lease.id)
    now = rig.clock.now_ms()
    until = now + 300_000
    rig.store.put_sweeper_state(SweeperState(now, {POOL: until}), expect_last=None)
    shot = rig.svc.inspection.inspect(READER, lease.id)
    held = [d for d in shot.diagnostics if d.code == "mass_expiry_hold"]
    assert len(held) == 1 and iso_ms(until) in held[0].message, held
    assert shot.facts["mass_expiry_hold_until"] == until
    # Another pool's hold is not this run's.
    rig.store.put_sweeper_state(SweeperState(now, {"elsewhere": until}), expect_last=now)
    assert "mass_expiry_hold" not in _codes(rig, lease.id)
    # A hold whose end has passed holds nothing.
    rig.store.put_sweeper_state(SweeperState(now, {POOL: now + 1000}), expect_last=now)
    rig.advance(2)
    assert "mass_expiry_hold" not in _codes(rig, lease.id)
    # An ended run is held back by nothing.
    rig.store.put_sweeper_state(SweeperState(now, {POOL: until}), expect_last=now)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    assert "mass_expiry_hold" not in _codes(rig, lease.id)
