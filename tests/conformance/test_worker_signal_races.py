"""A worker's signal epoch on DynamoDB Local, with threads: it rises in the very transaction of
each write a worker heartbeat must report (a cancel racing the holder's completion raises it
exactly when the cancel landed), and never on the holder's own complete; a move between two
heartbeats that echo their signal is in the second's answer; a heartbeat racing an expiry
never renews the expired lease, signal or not (a due deadline is a conditional write).

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from tenure.app.leases.reports import Beat, Vouched
from tenure.app.migrations import WORKER_SIGNALS_FROM_SCHEMA, SchemaState
from tenure.app.ports import WORKER_RETENTION_S
from tenure.domain.errors import Conflict, StaleLease, TenureError
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, Revoke
from tenure.domain.transitions import SignalKey
from tenure.store import keys
from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.bills import Bills
from tests.conformance.contract import ALPHA, TOLERATION_MS, make_world
from tests.conformance.test_races import real_time_service, run_threads, seed, stored
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

W = "w-1"
KEY = SignalKey(WORKER.token_id, W)


def _running(rig: Rig, n: int, worker_id: str = W) -> list[Lease]:
    seeded = seed(rig, n)
    for _ in seeded:
        won = rig.svc.claims.claim(WORKER, ALPHA, worker_id, "1.0", 0, None)
        assert won is not None
        rig.svc.reports.start(lease_principal(won.lease.id), won.lease.id)
    return [stored(rig, x.id) for x in seeded]


def test_a_cancel_racing_the_holders_completion_raises_the_epoch_exactly_when_it_landed(
    rig: Rig,
) -> None:
    n = 30
    make_world(rig.svc)
    leases = _running(rig, n)
    assert rig.store.signal_epoch(KEY) == 0  # claims and starts raise nothing
    both = threading.Barrier(2, timeout=60)
    head_start = [(i // 2 % 5) * 0.02 for i in range(n)]
    finisher, canceller = real_time_service(rig)[0], real_time_service(rig)[0]

    def complete() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 0 else 0)
            with contextlib.suppress(TenureError):  # the cancel ended it first
                finisher.reports.complete(lease_principal(lease.id), lease.id, {})

    def cancel() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 1 else 0)
            canceller.operator.cancel(ADMIN, lease.id)  # a no-op on an ended lease

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(complete), threads.submit(cancel)]:
            f.result(timeout=120)
    ends = [stored(rig, lease.id).state for lease in leases]
    cancelled = ends.count(LeaseState.CANCELLED)  # the cancel landed first, then the report
    print(f"\ncancel vs completion: {cancelled} cancelled of {n}")
    assert ends.count(LeaseState.COMPLETED) + cancelled == n
    assert 0 < cancelled < n, "one-sided race"
    assert rig.store.signal_epoch(KEY) == cancelled


def test_every_writer_of_a_held_lease_raises_only_its_holders_epoch(rig: Rig) -> None:
    make_world(rig.svc)
    mine = _running(rig, 3)
    theirs = _running(rig, 1, worker_id="w-2")[0]
    rig.svc.operator.pause(ADMIN, mine[0].id)
    rig.svc.operator.resume(ADMIN, mine[0].id)
    rig.svc.operator.kill(ADMIN, mine[1].id)
    rig.svc.reports.release(lease_principal(mine[2].id), mine[2].id, {})
    assert rig.store.signal_epoch(KEY) == 4
    assert rig.store.signal_epoch(SignalKey(WORKER.token_id, "w-2")) == 0
    rig.svc.reports.complete(lease_principal(theirs.id), theirs.id, {})
    assert rig.store.signal_epoch(SignalKey(WORKER.token_id, "w-2")) == 0


def _beats(rig: Rig, leases: list[Lease], signal: str) -> tuple[list[object], str]:
    beats = rig.svc.reports.worker_beats(
        WORKER, W, [(x.id, x.fence) for x in leases], signal=signal
    )
    assert beats.signal is not None
    return [a for _, _, a in beats.answers], beats.signal


@pytest.mark.parametrize(
    ("act", "state", "revoke"),
    [
        ("cancel", LeaseState.CANCELLING, Revoke.CANCEL),
        ("kill", LeaseState.CANCELLING, Revoke.KILL),
        ("pause", LeaseState.PAUSED, Revoke.PAUSE),
    ],
)
def test_a_move_between_two_heartbeats_is_in_the_next_answer(
    rig: Rig, act: str, state: LeaseState, revoke: Revoke
) -> None:
    make_world(rig.svc)
    leases = _running(rig, 3)
    _, signal = _beats(rig, leases, "")
    quiet, signal = _beats(rig, leases, signal)
    assert all(isinstance(a, Vouched) for a in quiet)  # answered from the signal, unread
    getattr(rig.svc.operator, act)(ADMIN, leases[1].id)
    answers, signal = _beats(rig, leases, signal)
    assert [(a.state, a.revoke) for a in answers] == [  # type: ignore[attr-defined]
        (LeaseState.RUNNING, None),
        (state, revoke),
        (LeaseState.RUNNING, None),
    ]
    assert not any(isinstance(a, Vouched) for a in answers)  # the epoch moved: all read
    again, _ = _beats(rig, leases, signal)
    assert [(a.state, a.revoke) for a in again] == [  # type: ignore[attr-defined]
        (a.state, a.revoke)  # type: ignore[attr-defined]
        for a in answers
    ]


def test_a_heartbeat_racing_an_expiry_never_renews_an_expired_lease(rig: Rig) -> None:
    n = 40
    make_world(rig.svc)
    leases = _running(rig, n)
    signals = {x.id: _beats(rig, [x], "")[1] for x in leases}  # each vouched for on its own
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)  # every deadline passed
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None
    both = threading.Barrier(2, timeout=60)
    head_start = [(i // 2 % 10) * 0.002 for i in range(n)]
    beats: dict[str, object] = {}
    expiries: dict[str, object] = {}

    def beater() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 0 else 0)
            [beats[lease.id]], _ = _beats(rig, [lease], signals[lease.id])

    def expirer() -> None:
        for i, lease in enumerate(leases):
            seen = stored(rig, lease.id)  # the sweeper read it due before deciding
            both.wait()
            time.sleep(head_start[i] if i % 2 == 1 else 0)
            expiries[lease.id] = rig.svc.recovery.expire(seen, pool)

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(beater), threads.submit(expirer)]:
            f.result(timeout=120)
    lost = 0
    for lease in leases:
        row, beat = stored(rig, lease.id), beats[lease.id]
        if row.state is LeaseState.LOST:
            lost += 1
            assert isinstance(beat, StaleLease), f"{lease.id}: the heartbeat answered {beat!r}"
        else:
            assert expiries[lease.id] is None, f"{lease.id}: expired after the renewal"
            assert isinstance(beat, Beat) and beat.wrote, f"{lease.id}: {beat!r}"
            assert row.state is LeaseState.RUNNING and row.deadline == beat.lease.deadline
            assert row.deadline is not None and row.deadline > rig.clock.now_ms()
    print(f"\nheartbeat vs expiry: {lost} expired of {n}")
    assert 0 < lost < n, "one-sided race"


def test_the_instance_keeps_one_signal_secret_however_many_race_to_write_it(rig: Rig) -> None:
    assert rig.store.signal_secret() is None
    kept = run_threads(8, lambda n: rig.store.keep_signal_secret(f"secret-{n}"))
    assert len(set(kept)) == 1 and kept[0].startswith("secret-")
    assert rig.store.signal_secret() == kept[0]
    assert rig.store.keep_signal_secret("later") == kept[0]


def test_a_signal_row_is_kept_a_while_after_its_last_raise_and_absent_reads_zero(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    assert rig.store.signal_epoch(SignalKey(WORKER.token_id, "nobody")) == 0
    [lease] = _running(rig, 1)
    rig.svc.operator.pause(ADMIN, lease.id)
    row = rig.store.rows.get(keys.signal_key(WORKER.token_id, W))
    assert row is not None and row[keys.SIGNAL_EPOCH] == 1
    expected = rig.clock.now_ms() // 1000 + WORKER_RETENTION_S
    assert row[keys.TTL_ATTRIBUTE] == expected


def test_a_jobs_heartbeat_that_changes_its_lease_seconds_raises_the_epoch_with_it(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    [lease] = _running(rig, 1)
    rig.svc.reports.heartbeat(lease_principal(lease.id), lease.id, 30)
    assert stored(rig, lease.id).lease_seconds == 30
    assert rig.store.signal_epoch(KEY) == 1
    rig.svc.reports.heartbeat(lease_principal(lease.id), lease.id, 30)  # unchanged: no raise
    assert rig.store.signal_epoch(KEY) == 1
    stale = stored(rig, lease.id)
    rig.svc.operator.pause(ADMIN, lease.id)
    shorter = replace(stale, lease_seconds=20)
    bump = rig.svc.kernel.signal_bump(stale, shorter)
    assert bump is not None
    with pytest.raises(Conflict):  # on the row before the pause: neither write lands
        rig.store.renew(shorter, (stale.state, stale.fence), signal=bump)
    assert rig.store.signal_epoch(KEY) == 2 and stored(rig, lease.id).lease_seconds == 30


def _billed_pause_and_resume(rig: Rig, bills: Bills, lease: Lease) -> float:
    bills.writes.clear()
    rig.svc.operator.pause(ADMIN, lease.id)
    rig.svc.operator.resume(ADMIN, lease.id)
    return sum(units for _, units in bills.writes)


def test_what_a_move_of_a_held_lease_costs_with_its_signal(
    rig: Rig, ddb_local: DynamoDBLocal
) -> None:
    """A rare write that was one put of the lease row becomes a transaction with the signal
    row: AWS bills each item of a transaction twice. Measured, not assumed."""
    # A table an earlier release migrated: its writers raise nothing until the migrate.
    rig.store.save_schema(
        rig.store.schema_state(), SchemaState(version=WORKER_SIGNALS_FROM_SCHEMA - 2, step=2)
    )
    make_world(rig.svc)
    [lease] = _running(rig, 1)
    bills = Bills(rig, ddb_local.endpoint)
    before = _billed_pause_and_resume(rig, bills, lease)
    assert rig.store.signal_epoch(KEY) == 0
    rig.store.save_schema(rig.store.schema_state(), SchemaState(version=WORKER_SIGNALS_FROM_SCHEMA))
    rig.clock.advance(60)
    after = _billed_pause_and_resume(rig, bills, lease)
    assert rig.store.signal_epoch(KEY) == 2
    print(f"\npause + resume: {before} write units before, {after} with the signal")
    assert after == 2 * before + 2 * 2  # each lease put billed twice, plus two signal raises
