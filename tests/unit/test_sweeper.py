"""The sweeper: expiry, recovery, exhaustion, the service's absence, the brake."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from tenure.app.ports import SweeperState
from tenure.app.rows import Rows
from tenure.app.sweep import SweepReport
from tenure.app.tenure import compose
from tenure.domain.errors import InvalidTransition, StaleLease
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Job, Lease
from tenure.domain.states import EndReason, LeaseState, OnExpiry, TaskStatus

from tests.unit.support import MEMBER, POOL, READER, T0, WORKER, Rig, as_lease

TOLERATION_MS = 300_000
EVERY = 30  # seconds between passes: well inside the default grace of 50 s
# A deadline written at T0 (a claim, a start) is a toleration and the slack later: T0 + 450 s.
DEADLINE_S = TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000
# The last pass (one every EVERY s from T0) before that deadline, and the first once it has
# come (a lease is due when its deadline is at or before the pass): T0 + 420 s and 450 s.
LAST_PASS_BEFORE_S = (math.ceil(DEADLINE_S / EVERY) - 1) * EVERY
FIRST_PASS_PAST_S = LAST_PASS_BEFORE_S + EVERY


def _run(
    rig: Rig,
    until_s: float,
    every: float = EVERY,
    beat: list[Lease] | None = None,
    stop: Callable[[], bool] | None = None,
) -> list[SweepReport]:
    """Sweep every `every` seconds until T0 + until_s, heartbeating `beat` before each pass."""
    reports = []
    while rig.clock.now_ms() < T0 + until_s * 1000:
        rig.advance(every)
        for lease in beat or []:
            rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
        reports.append(rig.sweep())
        if stop is not None and stop():
            break
    return reports


def _lost_at(rig: Rig, lease: Lease, until_s: float, every: float = EVERY) -> int | None:
    _run(rig, until_s, every, stop=lambda: rig.lease(lease.id).state.terminal)
    return rig.clock.now_ms() if rig.lease(lease.id).state.terminal else None


def test_a_silent_lease_past_its_deadline_is_lost_and_its_job_requeued_under_fence_plus_one(
    rig: Rig,
) -> None:
    rig.sweep()
    lease = rig.claimed().lease
    _run(rig, until_s=LAST_PASS_BEFORE_S)
    assert TOLERATION_MS / 1000 < LAST_PASS_BEFORE_S < DEADLINE_S
    assert rig.lease(lease.id).state is LeaseState.DISPATCHED  # past toleration only
    _run(rig, until_s=FIRST_PASS_PAST_S)
    lost = rig.lease(lease.id)
    assert (lost.state, lost.end_reason) == (LeaseState.LOST, EndReason.EXPIRED)
    job = rig.store.get_job(lease.job_id)
    assert job is not None
    assert (job.fence, job.recovery_count, job.attempt, job.exhausted) == (2, 1, 1, False)
    successor = rig.lease(job.lease_id)
    assert (successor.state, successor.fence, successor.attempt) == (LeaseState.PENDING, 2, 1)
    assert rig.store.queue_candidates(POOL, 10) == [successor.id]
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.QUEUED
    tail = rig.events(lease.task_id or "")[-2:]
    assert [(e.type, e.lease_id, e.fence) for e in tail] == [
        ("lease.lost", lease.id, 1),
        ("lease.created", successor.id, 2),
    ]
    assert tail[0].data["recovery_count"] == 1
    assert tail[1].data == {"previous_lease_id": lease.id, "recovered": True}


def test_a_silent_lease_expires_after_its_own_lease_seconds(rig: Rig) -> None:
    rig.sweep()
    rig.task()
    lease = rig.claim(lease_seconds=20).lease
    lost_at = _lost_at(rig, lease, until_s=120, every=5)
    assert lost_at is not None
    assert T0 + 20_000 <= lost_at <= T0 + 20_000 * (1 + DEADLINE_SLACK) + 5_000


@pytest.mark.parametrize("state", ["running", "paused"])
def test_a_silent_running_or_paused_lease_is_lost(rig: Rig, state: str) -> None:
    rig.sweep()
    lease = rig.running()
    if state == "paused":
        rig.svc.operator.pause(MEMBER, lease.id)
    _run(rig, until_s=FIRST_PASS_PAST_S)
    assert rig.lease(lease.id).state is LeaseState.LOST


def test_a_heartbeating_lease_is_never_expired(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    reports = _run(rig, until_s=2 * 3600, beat=[lease])
    assert rig.lease(lease.id).state is LeaseState.RUNNING
    assert all(r.expired == [] for r in reports)
    assert sum(r.reindexed for r in reports) > 0  # it was due by its index, not by its deadline


def test_a_lease_never_expires_sooner_than_one_toleration_after_its_last_heartbeat(
    rig: Rig,
) -> None:
    rig.sweep()
    lease = rig.running()
    last_beat = rig.clock.now_ms()
    for gap in [10, 10, 80, 200, 290, 5, 299, 120]:  # seconds between heartbeats
        _run(rig, until_s=(rig.clock.now_ms() - T0) / 1000 + gap, every=gap)
        assert rig.lease(lease.id).state is LeaseState.RUNNING
        rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
        last_beat = rig.clock.now_ms()
    lost_at = _lost_at(rig, lease, until_s=(last_beat - T0) / 1000 + 1000, every=10)
    assert lost_at is not None
    assert lost_at - last_beat >= TOLERATION_MS
    assert lost_at - last_beat <= TOLERATION_MS * (1 + DEADLINE_SLACK) + 10_000


def test_only_the_sweeper_expires_a_report_past_the_deadline_is_still_accepted(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    rig.advance(1000)  # far past the deadline, but no pass has run
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    assert done.state is LeaseState.COMPLETED
    rig.advance(10)
    rig.sweep()
    assert rig.lease(lease.id).state is LeaseState.COMPLETED
    assert len(rig.store.lease_rows) == 1 and rig.store.queue_candidates(POOL, 10) == []


def test_a_heartbeat_past_the_deadline_but_before_the_pass_keeps_the_lease(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    _run(rig, until_s=LAST_PASS_BEFORE_S)
    rig.advance(DEADLINE_S - LAST_PASS_BEFORE_S + 10)  # T0 + 460 s: no pass since T0 + 420 s
    assert rig.clock.now_ms() > (rig.lease(lease.id).deadline or 0)
    beat = rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    assert beat.lease.state is LeaseState.RUNNING
    rig.advance(10)
    assert rig.sweep().expired == []
    assert rig.lease(lease.id).state is LeaseState.RUNNING


def _recover_until_exhausted(rig: Rig, max_attempts: int) -> tuple[str, list[Lease]]:
    rig.sweep()
    task, _ = rig.task(max_attempts=max_attempts)
    leases: list[Lease] = []
    for n in range(10):
        won = rig.claim(f"w{n}").lease
        leases.append(won)
        _lost_at(rig, won, until_s=(rig.clock.now_ms() - T0) / 1000 + 500)
        assert rig.lease(won.id).state is LeaseState.LOST
        if not rig.store.queue_candidates(POOL, 1):
            return task.id, leases
    raise AssertionError("never exhausted")


@pytest.mark.parametrize(("max_attempts", "leases"), [(1, 1), (2, 2), (3, 3), (4, 4)])
def test_max_attempts_counts_every_claim_so_three_allow_three_claims_in_all(
    rig: Rig, max_attempts: int, leases: int
) -> None:
    task_id, made = _recover_until_exhausted(rig, max_attempts)
    assert len(made) == leases
    assert [x.fence for x in made] == list(range(1, leases + 1))
    job = rig.store.get_job(made[0].job_id)
    assert job is not None
    assert (job.exhausted, job.recovery_count, job.attempt) == (True, leases, 1)
    # Counted before the exhausting expiry: the claims so far had reached max_attempts.
    assert job.attempt + job.recovery_count - 1 == max_attempts
    assert rig.svc.graph.get_task(READER, task_id).status is TaskStatus.NEEDS_ATTENTION


def test_exhaustion_moves_the_task_to_needs_attention_and_records_it(rig: Rig) -> None:
    task_id, made = _recover_until_exhausted(rig, 3)
    seen = rig.svc.graph.get_task(READER, task_id)
    assert (seen.status, seen.lease) == (TaskStatus.NEEDS_ATTENTION, None)
    assert rig.store.get_task(task_id).attention  # type: ignore[union-attr]
    exhausted = [e for e in rig.events(task_id) if e.type == "task.run.lease_recovery_exhausted"]
    assert len(exhausted) == 1
    assert exhausted[0].data == {
        "job_id": made[0].job_id,
        "attempt": 1,
        "recovery_count": 3,
        "max_attempts": 3,
    }
    last = [e for e in rig.events(task_id) if e.type == "lease.lost"][-1]
    assert (last.lease_id, last.data["exhausted"]) == (made[-1].id, True)
    assert rig.store.queue_candidates(POOL, 10) == []
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task_id, POOL)


def test_on_expiry_fail_ends_the_lease_lost_as_worker_lost_with_no_requeue(rig: Rig) -> None:
    rig.make_pool("strict", on_expiry=OnExpiry.FAIL)
    rig.sweep()
    lease = rig.claimed(pool="strict").lease
    _run(rig, until_s=FIRST_PASS_PAST_S)
    lost = rig.lease(lease.id)
    assert (lost.state, lost.end_reason) == (LeaseState.LOST, EndReason.WORKER_LOST)
    job = rig.svc.kernel.job_of(lease)
    assert job is not None
    assert (job.fence, job.lease_id, job.attempt, job.recovery_count) == (1, lease.id, 1, 0)
    assert rig.store.queue_candidates("strict", 10) == []
    assert rig.svc.graph.get_task(READER, lease.task_id or "").status is TaskStatus.FAILED
    assert rig.events(lease.task_id or "")[-1].data["end_reason"] == "worker_lost"


@pytest.mark.parametrize(
    ("action", "state", "reason"),
    [
        ("cancel", LeaseState.CANCELLED, EndReason.CANCELLED),
        ("kill", LeaseState.KILLED, EndReason.KILLED),
    ],
)
def test_a_revoked_lease_that_goes_silent_ends_as_the_operator_asked(
    rig: Rig, action: str, state: LeaseState, reason: EndReason
) -> None:
    rig.sweep()
    lease = rig.running()
    getattr(rig.svc.operator, action)(MEMBER, lease.id)
    _run(rig, until_s=FIRST_PASS_PAST_S)
    ended = rig.lease(lease.id)
    assert (ended.state, ended.end_reason) == (state, reason)
    assert rig.store.queue_candidates(POOL, 10) == []
    job = rig.svc.kernel.job_of(lease)
    assert job is not None and job.fence == 1


@pytest.mark.parametrize("what", ["complete", "fail", "release", "heartbeat", "start"])
def test_any_report_on_a_lost_lease_is_stale_and_recorded_on_the_task(rig: Rig, what: str) -> None:
    rig.sweep()
    lease = rig.running("w1")
    _run(rig, until_s=FIRST_PASS_PAST_S)
    successor = rig.claim("w2").lease
    rig.svc.reports.complete(as_lease(successor.id), successor.id, {"outcome": "success"})
    me = as_lease(lease.id)
    with pytest.raises(StaleLease):
        if what == "complete":
            rig.svc.reports.complete(me, lease.id, {"outcome": "success"})
        elif what == "fail":
            rig.svc.reports.fail(me, lease.id, {"error": "late"})
        elif what == "release":
            rig.svc.reports.release(me, lease.id, {})
        elif what == "heartbeat":
            rig.svc.reports.heartbeat(me, lease.id, None)
        else:
            rig.svc.reports.start(me, lease.id)
    assert rig.lease(lease.id).state is LeaseState.LOST
    assert rig.lease(successor.id).state is LeaseState.COMPLETED
    stale = [e for e in rig.events(lease.task_id or "") if e.type == "lease.stale_report"]
    assert [(e.lease_id, e.fence, e.data["report"]) for e in stale] == [(lease.id, 1, what)]


def test_worker_heartbeat_on_a_lost_lease_is_stale_and_recorded(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running("w1")
    _run(rig, until_s=FIRST_PASS_PAST_S)
    answers = rig.svc.reports.worker_heartbeat(WORKER, "w1", [(lease.id, 1)])
    assert isinstance(answers[0][2], StaleLease)
    assert "lease.stale_report" in rig.types(lease.task_id or "")


# ----------------------------------------------------------------- the service's absence


def test_when_the_sweeper_was_away_longer_than_grace_nothing_expires_and_deadlines_move(
    rig: Rig,
) -> None:
    rig.sweep()
    lease = rig.running()
    before = rig.lease(lease.id).deadline
    assert before is not None
    _run(rig, until_s=300)
    rig.advance(400)  # the sweeper itself was gone for 400 s, and it is past the deadline
    report = rig.sweep()
    assert report.absent_pools == [POOL] and report.expired == []
    moved = rig.lease(lease.id)
    assert moved.state is LeaseState.RUNNING
    assert moved.deadline == before + 400_000
    assert moved.due_at == moved.deadline
    absent = [e for e in rig.system_events() if e.type == "sweeper.service_absent"]
    assert [e.data["gap_ms"] for e in absent] == [400_000]
    lost_at = _lost_at(rig, lease, until_s=2000)
    assert lost_at is not None and lost_at >= before + 400_000


def test_only_pools_whose_grace_the_gap_exceeds_are_spared(rig: Rig) -> None:
    rig.make_pool("patient", grace_seconds=600)
    rig.sweep()
    hasty = rig.running("w1")
    patient = rig.running("w2", pool="patient")
    _run(rig, until_s=300)
    rig.advance(200)
    report = rig.sweep()
    assert report.absent_pools == [POOL]
    assert rig.lease(hasty.id).state is LeaseState.RUNNING
    assert rig.lease(patient.id).state is LeaseState.LOST


def test_the_time_of_the_last_pass_survives_a_restart(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    _run(rig, until_s=300)
    rig.advance(400)
    # A cold start: no memory.
    restarted = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    report = restarted.sweep.once()
    assert report.absent_pools == [POOL]
    assert rig.lease(lease.id).state is LeaseState.RUNNING


def test_a_pass_that_loses_the_race_for_the_sweeper_slot_does_nothing(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    _run(rig, until_s=LAST_PASS_BEFORE_S)
    rig.advance(EVERY)  # T0 + 450 s: the lease is due
    stale_read = rig.store.get_sweeper_state()
    rig.store.sweeper = SweeperState(last_pass_at=rig.clock.now_ms() - 1)  # another pass won
    rig.store.get_sweeper_state = lambda: stale_read  # type: ignore[method-assign]
    report = rig.sweep()
    assert report.skipped and report.expired == []
    assert rig.lease(lease.id).state is LeaseState.RUNNING
    del rig.store.get_sweeper_state  # the next pass reads the slot as it is
    assert rig.sweep().expired == [lease.id]


def test_silent_leases_expire_with_default_timings_and_the_default_one_minute_sweeps(
    rig: Rig,
) -> None:
    # The deployed sweeper runs every minute (and `tenure local`'s by default); pools default
    # to renew 10, grace 50, toleration 300. A worker that dies must still lose its lease in
    # that setting.
    rig.sweep()
    lease = rig.running()
    lost_at = _lost_at(rig, lease, until_s=3600, every=60)
    assert lost_at is not None, "a silent lease was never expired under the default settings"
    assert lost_at <= T0 + 450_000 + 60_000


# --------------------------------------------------------------- the mass-expiry brake


def _fleet(rig: Rig, silent: int, alive: int) -> tuple[list[Lease], list[Lease]]:
    rig.sweep()
    dead = [rig.running(f"dead{i}") for i in range(silent)]
    live = [rig.running(f"live{i}") for i in range(alive)]
    return dead, live


def _states(rig: Rig, leases: list[Lease]) -> set[LeaseState]:
    return {rig.lease(x.id).state for x in leases}


def test_a_mass_expiry_is_held_for_one_toleration_window_then_carried_out(rig: Rig) -> None:
    dead, live = _fleet(rig, silent=3, alive=1)
    reports = _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert reports[-1].held == 3 and reports[-1].expired == []
    assert _states(rig, dead) == {LeaseState.RUNNING}
    held = [e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"]
    assert len(held) == 1
    assert held[0].data["due"] == 3
    assert sorted(held[0].data["lease_ids"]) == sorted(x.id for x in dead)
    hold_until = held[0].data["hold_until"]
    assert hold_until == rig.clock.now_ms() + TOLERATION_MS
    assert rig.store.get_sweeper_state().holds == {POOL: hold_until}
    _run(rig, until_s=(hold_until - T0) / 1000 - EVERY, beat=live)
    assert _states(rig, dead) == {LeaseState.RUNNING}  # still inside the window
    reports = _run(rig, until_s=(hold_until - T0) / 1000, beat=live)
    assert sorted(reports[-1].expired) == sorted(x.id for x in dead)
    assert _states(rig, dead) == {LeaseState.LOST}
    assert _states(rig, live) == {LeaseState.RUNNING}
    _run(rig, until_s=(hold_until - T0) / 1000 + EVERY, beat=live)
    assert rig.store.get_sweeper_state().holds == {}  # released once nothing is held back
    assert len([e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"]) == 1


def test_the_brake_releases_when_the_silent_workers_come_back(rig: Rig) -> None:
    dead, live = _fleet(rig, silent=3, alive=1)
    _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert POOL in rig.store.get_sweeper_state().holds
    _run(rig, until_s=FIRST_PASS_PAST_S + 3 * EVERY, beat=live + dead)
    assert _states(rig, dead) == {LeaseState.RUNNING}
    assert rig.store.get_sweeper_state().holds == {}


@pytest.mark.parametrize(("silent", "alive"), [(3, 3), (2, 0), (1, 0), (10, 10)])
def test_below_the_brakes_threshold_leases_expire_normally(
    rig: Rig, silent: int, alive: int
) -> None:
    dead, live = _fleet(rig, silent, alive)
    reports = _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert sorted(reports[-1].expired) == sorted(x.id for x in dead)
    assert all(r.held == 0 for r in reports)
    assert rig.system_events() == []


@pytest.mark.parametrize(("silent", "alive"), [(3, 0), (11, 9), (6, 4)])
def test_at_or_above_the_brakes_threshold_the_pass_holds(rig: Rig, silent: int, alive: int) -> None:
    dead, live = _fleet(rig, silent, alive)
    reports = _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert reports[-1].held == silent and reports[-1].expired == []
    assert _states(rig, dead) == {LeaseState.RUNNING}


def test_an_expiry_that_loses_to_a_report_changes_nothing(rig: Rig) -> None:
    rig.sweep()
    lease = rig.running()
    _run(rig, until_s=LAST_PASS_BEFORE_S)
    rig.advance(EVERY)
    read_job = rig.store.get_job

    def report_lands_first(job_id: str) -> Job | None:
        # The worker's complete commits between the sweeper's read and its write.
        del rig.store.get_job
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
        return read_job(job_id)

    rig.store.get_job = report_lands_first  # type: ignore[method-assign]
    report = rig.sweep()
    assert (report.expired, report.raced) == ([], 1)
    assert rig.lease(lease.id).state is LeaseState.COMPLETED
    assert len(rig.store.lease_rows) == 1
    job = rig.svc.kernel.job_of(lease)
    assert job is not None and (job.fence, job.recovery_count) == (1, 0)


def test_a_release_landing_mid_expiry_is_a_lost_race_not_a_failed_pass(rig: Rig) -> None:
    rig.sweep()
    releasing, silent = rig.running("w1"), rig.running("w2")
    _run(rig, until_s=LAST_PASS_BEFORE_S)
    rig.advance(EVERY)  # both are due now
    read_job = rig.store.get_job
    calls = {"n": 0}

    def release_between_reads(job_id: str) -> Job | None:
        # The sweeper reads the job while expiring `releasing`; the worker's release commits
        # right after that read and hands the job on under fence 2.
        seen = read_job(job_id)
        if job_id == releasing.job_id:
            calls["n"] += 1
            if calls["n"] == 1:
                del rig.store.get_job
                rig.svc.reports.release(as_lease(releasing.id), releasing.id, {"reason": "handoff"})
        return seen

    rig.store.get_job = release_between_reads  # type: ignore[method-assign]
    report = rig.sweep()
    assert report.raced == 1
    assert report.expired == [silent.id]
    assert rig.lease(releasing.id).end_reason is EndReason.RELEASED
    job = rig.store.get_job(releasing.job_id)
    assert job is not None and job.fence == 2
    assert rig.lease(job.lease_id).state is LeaseState.PENDING


def test_one_worker_dying_with_many_leases_is_an_ordinary_expiry(rig: Rig) -> None:
    # The brake counts workers, not leases: one worker (--concurrency 4) dying is not a
    # mass expiry, whatever share of the pool's leases it held.
    rig.sweep()
    dead = [rig.running("busy") for _ in range(4)]
    live = [rig.running("calm")]
    reports = _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert sorted(x for r in reports for x in r.expired) == sorted(x.id for x in dead)
    assert all(r.held == 0 for r in reports)
    assert [e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"] == []


def test_most_workers_falling_silent_together_holds_however_few_leases_each(rig: Rig) -> None:
    rig.sweep()
    dead = [rig.running(f"dead{i}") for i in range(3) for _ in range(2)]
    live = [rig.running("live0")]
    reports = _run(rig, until_s=FIRST_PASS_PAST_S, beat=live)
    assert reports[-1].held == 6 and reports[-1].expired == []
    held = [e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"]
    assert (held[0].data["silent_workers"], held[0].data["recent_workers"]) == (3, 4)
    assert _states(rig, dead) == {LeaseState.RUNNING}


def test_a_mass_expiry_is_held_once_even_when_it_takes_several_passes(rig: Rig) -> None:
    rig.sweep()
    dead = [rig.running(f"dead{i}") for _ in range(3) for i in range(3)]
    rig.make_pool("slow", toleration_seconds=600)
    slow = [rig.running(f"dead{i}", pool="slow") for i in range(3)]
    # The slow pool's deadline, then its hold of one toleration window, then a pass or two.
    _run(rig, until_s=600 * (1 + DEADLINE_SLACK) + 600 + 2 * EVERY)
    held = [e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"]
    assert [e.data["pool"] for e in held] == [POOL, "slow"]  # once per pool, never again
    assert _states(rig, dead + slow) == {LeaseState.LOST}


def test_idle_workers_falling_silent_with_the_busy_ones_count_as_silent(rig: Rig) -> None:
    rig.sweep()
    busy = [rig.running(f"busy{i}") for i in range(3)]
    for i in range(3):
        assert rig.svc.claims.claim(WORKER, POOL, f"idle{i}", "1.0", 0, None) is None
    reports = _run(rig, until_s=FIRST_PASS_PAST_S)
    assert reports[-1].held == 3
    held = [e for e in rig.system_events() if e.type == "sweeper.mass_expiry_held"]
    assert (held[0].data["silent_workers"], held[0].data["recent_workers"]) == (6, 6)
    assert _states(rig, busy) == {LeaseState.RUNNING}
