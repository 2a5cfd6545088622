"""A contended claim reads its candidate again just before its write, on DynamoDB Local: 32
claimers, each spreading as after a lost race and each claim with its own claim_id, take every
lease once, each answer carrying its own task; and a lease filed before its task is handed out
by none of them until the task is there.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from tenure.app.leases.claims import Claimed
from tenure.app.tenure import Tenure

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import real_time_service, run_threads, seed, stored
from tests.conftest import ADMIN, WORKER, Rig

CLAIMERS = 32


def _contended(rig: Rig) -> Tenure:
    """A claimer of its own (its own process's view of the pool), spreading from the start."""
    svc, _ = real_time_service(rig)
    svc.claims.candidates.contend(ALPHA)
    return svc


def test_32_contended_claimers_take_each_lease_once_with_its_own_task(rig: Rig) -> None:
    make_world(rig.svc)
    leases = seed(rig, 64)
    assert all(lease.tp for lease in leases)  # each filed ahead of its task
    won: list[tuple[str, Claimed]] = []
    lock = threading.Lock()
    rereads = Counter[str]()

    def claimer(n: int) -> None:
        svc = _contended(rig)
        empty, calls = 0, 0
        while empty < 2:
            calls += 1
            worker = f"w-{n}"
            got = svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None, claim_id=f"{n}-{calls}")
            if got is None:
                empty += 1
                continue
            empty = 0
            with lock:
                won.append((worker, got))
        with lock:
            rereads.update(svc.kernel.counters)

    run_threads(CLAIMERS, claimer)
    counts = Counter(got.lease.id for _, got in won)
    assert sorted(counts) == sorted(lease.id for lease in leases)
    assert set(counts.values()) == {1}, "a lease handed out twice"
    for worker, got in won:
        row = stored(rig, got.lease.id)
        assert (row.worker_id, row.version, row.tp) == (worker, got.lease.version, None)
        assert got.task is not None and got.task.id == got.lease.task_id
        assert got.task.title == "race"
    assert rereads["claims"] == len(leases)


def test_no_contended_claim_hands_out_a_lease_before_its_task(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    real_put = rig.store.rows.put_one
    between: list[Claimed | None] = []

    def put(item: dict[str, Any]) -> None:
        if item["Item"]["entity"]["S"] == "task":  # the lease is written; the task is not yet

            def claim(n: int) -> Claimed | None:
                svc = _contended(rig)
                return svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None, claim_id="c")

            between.extend(run_threads(8, claim))
        real_put(item)

    monkeypatch.setattr(rig.store.rows, "put_one", put)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "t", None, None, {}, ALPHA, None)
    monkeypatch.undo()
    assert between == [None] * 8
    assert lease is not None and stored(rig, lease.id).worker_id is None
    got = _contended(rig).claims.claim(WORKER, ALPHA, "w-late", "1.0", 0, None, claim_id="c")
    assert got is not None and got.lease.id == lease.id
    assert got.task is not None and got.task.id == task.id
    bundle = rig.svc.payloads.claimed_payload(got.lease, got.task)
    assert bundle is not None and bundle["subject"]["title"] == "t"
