"""The window between a claim's read of its candidate and its write. A rival that takes the
candidate while the claim makes its round trips (the task's read, the claim_id record's
write) makes that write lose, and a lost write is billed; while the pool is contended the
claim reads the lease again just before its write and gives a changed lease up without the
losing write. An uncontended claim reads its lease once. (Under 32 claimers on DynamoDB Local:
tests/conformance/test_claim_window.py.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tenure.app.ports import ClaimRecord

from tests.conftest import WORKER
from tests.unit.support import POOL, Rig


def _rival_during_the_record_write(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first record write lets a rival (no claim_id) claim the lease it names first."""
    real = rig.store.point_claim
    taken: list[str] = []

    def point(record: ClaimRecord, previous: str | None) -> None:
        if not taken:
            taken.append(record.lease_id)
            rival = rig.svc.claims.claim(WORKER, POOL, "rival", "1.0", 0, None, lease_id=taken[0])
            assert rival is not None
        real(record, previous)

    monkeypatch.setattr(rig.store, "point_claim", point)
    return taken


def _lease_reads(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = rig.store.get_lease

    def counted(lease_id: str, consistent: bool = True) -> Any:
        reads.append(lease_id)
        return real(lease_id, consistent)

    monkeypatch.setattr(rig.store, "get_lease", counted)
    return reads


def _claim(rig: Rig) -> Any:
    return rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1")


def test_a_contended_claim_gives_up_a_lease_taken_meanwhile_without_a_losing_write(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.task(title="first")
    rig.task(title="second")
    rig.svc.claims.candidates.contend(POOL)  # a rival was met in this pool a moment ago
    taken = _rival_during_the_record_write(rig, monkeypatch)
    won = _claim(rig)
    assert won is not None and won.lease.id != taken[0]
    assert rig.svc.kernel.counters["lost_claim_races"] == 0  # no write lost, none billed
    assert rig.lease(taken[0]).worker_id == "rival"  # the rival's claim stands, alone
    assert rig.lease(won.lease.id).worker_id == "w1"
    # The record moved on with the claim, and a retry of the claim_id answers the same lease.
    again = _claim(rig)
    assert again is not None and again.lease.id == won.lease.id


def test_uncontended_the_same_rival_makes_the_write_lose(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control: without the second read the write is made, and lost.
    rig.task(title="first")
    rig.task(title="second")
    taken = _rival_during_the_record_write(rig, monkeypatch)
    won = _claim(rig)
    assert won is not None and won.lease.id != taken[0]
    assert rig.svc.kernel.counters["lost_claim_races"] == 1


def test_an_uncontended_claim_reads_its_lease_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lease = rig.task()
    assert lease is not None and lease.tp
    reads = _lease_reads(rig, monkeypatch)
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id
    assert reads.count(lease.id) == 1


def test_a_contended_claim_of_an_unchanged_lease_reads_it_twice_and_answers_as_ever(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    task, lease = rig.task()
    assert lease is not None and lease.tp
    rig.svc.claims.candidates.contend(POOL)
    reads = _lease_reads(rig, monkeypatch)
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id
    assert reads.count(lease.id) == 2
    assert won.task == task and won.lease.version == lease.version + 1
    assert rig.lease(lease.id).tp is None and rig.lease(lease.id).worker_id == "w1"


def test_a_contended_claim_with_no_round_trip_reads_its_lease_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A lease not marked task-pending (its task was there first) and a claim without a
    # claim_id: nothing sits between the read and the write, so nothing is read again.
    _, lease = rig.task()
    assert lease is not None
    row = rig.store.lease_rows[lease.id]
    row.lease = replace(row.lease, tp=None)
    rig.svc.claims.candidates.contend(POOL)
    reads = _lease_reads(rig, monkeypatch)
    won = rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 0, None)
    assert won is not None and won.lease.id == lease.id
    assert reads.count(lease.id) == 1
