"""Filing without a transaction, on DynamoDB Local: a task's first lease is written first,
marked task-pending, then the task. These inject faults between the two writes and prove that
no claim hands out a lease before its task is there, that the lease of a filing that died in
between is ended once however many claims meet it, that such a filing's late task write loses,
and that a table below the schema version that allows it still files in one transaction.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tenure.app.leases.claims import Claimed
from tenure.app.leases.orphans import ORPHAN_AFTER_MS
from tenure.app.migrations import UNTRANSACTED_FILING_FROM_SCHEMA, SchemaState
from tenure.app.runs import RunControls
from tenure.domain.errors import Unavailable
from tenure.domain.model import Lease
from tenure.domain.outbound import ends_orphan, task_ending_of_lease
from tenure.domain.states import LeaseState
from tenure.store import conditions, keys

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads
from tests.conftest import ADMIN, WORKER, Rig


def kind_of(put: dict[str, Any]) -> str:
    return str(put["Item"]["entity"]["S"])


def watch_writes(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[int]]:
    """The kinds of the single puts made, in order, and the sizes of the transactions."""
    puts: list[str] = []
    transactions: list[int] = []
    real_put, real_transact = rig.store.rows.put_one, rig.store.rows.transact

    def put(item: dict[str, Any]) -> None:
        real_put(item)
        puts.append(kind_of(item))

    def transact(ops: list[dict[str, Any]]) -> None:
        real_transact(ops)
        transactions.append(len(ops))

    monkeypatch.setattr(rig.store.rows, "put_one", put)
    monkeypatch.setattr(rig.store.rows, "transact", transact)
    return puts, transactions


def _claim(rig: Rig, worker: str = "w-1") -> Claimed | None:
    return rig.svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None)


def _file(rig: Rig) -> tuple[str, Lease]:
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "t", None, None, {}, ALPHA, None)
    assert lease is not None
    return task.id, lease


def test_filing_writes_the_lease_marked_then_the_task_and_no_transaction(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    puts, transactions = watch_writes(rig, monkeypatch)
    task_id, lease = _file(rig)
    assert (puts, transactions) == (["lease", "task"], [])
    stored = rig.store.get_lease(lease.id)
    assert stored is not None and stored.tp is True
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id
    assert won.task is not None and won.task.id == task_id  # read before the claim's write
    claimed = rig.store.get_lease(lease.id)
    assert claimed is not None and claimed.tp is None  # cleared by the claim's own write
    assert claimed.state is LeaseState.DISPATCHED
    bundle = rig.svc.payloads.claimed_payload(won.lease, won.task)
    assert bundle is not None and bundle["subject"]["title"] == "t"


def test_a_claim_between_the_two_writes_hands_out_nothing_until_the_task_is_there(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    real_put = rig.store.rows.put_one
    between: list[Claimed | None] = []

    def put(item: dict[str, Any]) -> None:
        if kind_of(item) == "task":  # the lease is written; the task is not yet
            between.append(_claim(rig, "w-early"))
            rig.clock.advance(ORPHAN_AFTER_MS / 1000 / 2)  # slow, but not taken for dead
            between.append(_claim(rig, "w-early"))
        real_put(item)

    monkeypatch.setattr(rig.store.rows, "put_one", put)
    task_id, lease = _file(rig)
    monkeypatch.undo()
    assert between == [None, None]
    pending = rig.store.get_lease(lease.id)
    assert pending is not None and pending.state is LeaseState.PENDING and pending.tp
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id and won.lease.task_id == task_id


def test_a_filing_that_dies_between_the_writes_leaves_a_lease_ended_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    # Filed on the rig's clock set back: the racers below claim on real clocks, to which
    # this lease is old enough to be taken for dead.
    rig.clock.now -= 2 * ORPHAN_AFTER_MS
    real_put = rig.store.rows.put_one

    def dies(item: dict[str, Any]) -> None:
        if kind_of(item) == "task":
            raise RuntimeError("the filing's process died here")
        real_put(item)

    monkeypatch.setattr(rig.store.rows, "put_one", dies)
    with pytest.raises(RuntimeError):
        _file(rig)
    monkeypatch.undo()
    [orphan_id] = rig.store.queue_candidates(ALPHA, 100)
    orphan = rig.store.get_lease(orphan_id)
    assert orphan is not None and orphan.tp and orphan.task_id is not None
    assert rig.store.get_task(orphan.task_id) is None
    assert _claim(rig) is None  # young: its task may still come; it stays queued
    after = rig.store.get_lease(orphan_id)
    assert after is not None and after.state is LeaseState.PENDING

    # Eight claims meet it at once: it is ended once.
    _, other = _file(rig)  # filed alongside: claimed by exactly one of them
    old = rig.store.get_lease(orphan_id)
    assert old is not None
    services = [real_time_service(rig)[0] for _ in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=60)

    def claim(i: int) -> tuple[str | None, int]:
        start.wait()
        won = services[i].claims.claim(WORKER, ALPHA, f"w-{i}", "1.0", 0, None)
        return (won.lease.id if won else None), services[i].kernel.counters["orphans_ended"]

    answers = run_threads(THREADS, claim)
    assert sorted(a for a, _ in answers if a is not None) == [other.id]
    assert sum(ended for _, ended in answers) == 1
    ended = rig.store.get_lease(orphan_id)
    assert ended is not None and ended.state is LeaseState.CANCELLED
    assert ended.version == old.version + 1  # one write ended it
    assert ends_orphan(ended) and task_ending_of_lease(old, ended) is None  # no task.cancelled
    rig.pump.drain()
    types = [e.type for e in rig.store.timeline("task", orphan.task_id, None)]
    assert types.count("lease.cancelled") == 1
    assert rig.store.get_task(orphan.task_id) is None
    listed = rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks
    assert orphan.task_id not in [t.view.task.id for t in listed]


def test_a_filing_whose_task_comes_after_its_lease_was_ended_fails_and_files_nothing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    real_put = rig.store.rows.put_one
    met: list[Claimed | None] = []

    def stalls(item: dict[str, Any]) -> None:
        if kind_of(item) == "task":  # stalled past the wait: a claim takes the filing for dead
            rig.clock.advance(2 * ORPHAN_AFTER_MS / 1000)
            met.append(_claim(rig))
        real_put(item)

    monkeypatch.setattr(rig.store.rows, "put_one", stalls)
    with pytest.raises(Unavailable):
        _file(rig)
    monkeypatch.undo()
    assert met == [None]
    assert rig.svc.kernel.counters["orphans_ended"] == 1
    assert rig.store.queue_candidates(ALPHA, 100) == []
    assert rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks == []
    # The space goes on filing as ever.
    task_id, lease = _file(rig)
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id and won.task is not None
    assert won.task.id == task_id


def test_below_the_schema_version_filing_keeps_its_transaction_and_no_mark(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A claim of an earlier release knows no mark: until the table is migrated, the task and
    # its first lease land together.
    make_world(rig.svc)
    rig.store.save_schema(
        rig.store.schema_state(), SchemaState(version=UNTRANSACTED_FILING_FROM_SCHEMA - 1)
    )
    rig.clock.advance(60)  # past the service's cached schema version
    puts, transactions = watch_writes(rig, monkeypatch)
    _, lease = _file(rig)
    assert (puts, transactions) == ([], [2])
    stored = rig.store.get_lease(lease.id)
    assert stored is not None and stored.tp is None


def test_a_queue_timeout_ends_a_dead_filings_lease_as_an_orphan_and_a_filed_ones_as_ever(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    real_put = rig.store.rows.put_one

    def dies(item: dict[str, Any]) -> None:
        if kind_of(item) == "task":
            raise RuntimeError("the filing's process died here")
        real_put(item)

    timed = RunControls(expires_in_seconds=1)
    monkeypatch.setattr(rig.store.rows, "put_one", dies)
    with pytest.raises(RuntimeError):
        rig.svc.filing.create_task(ADMIN, SPACE, "t", None, None, {}, ALPHA, None, controls=timed)
    monkeypatch.undo()
    [orphan_id] = rig.store.queue_candidates(ALPHA, 100)
    _, filed = rig.svc.filing.create_task(
        ADMIN, SPACE, "u", None, None, {}, ALPHA, None, controls=timed
    )
    assert filed is not None and filed.tp
    rig.clock.advance(2)
    # The filed task's lease times out; the orphan waits: its task may still be on its way.
    assert rig.svc.sweep.once().queue_timed_out == [filed.id]
    rig.clock.advance(ORPHAN_AFTER_MS / 1000)
    assert rig.svc.sweep.once().queue_timed_out == [orphan_id]
    orphan = rig.store.get_lease(orphan_id)
    assert orphan is not None and orphan.state is LeaseState.CANCELLED and ends_orphan(orphan)
    assert orphan.task_id is not None and rig.store.get_task(orphan.task_id) is None
    row = rig.store.rows.get(keys.task_key(orphan.task_id), consistent=True)
    assert row is not None and row["entity"] == conditions.VOID_TASK  # no task can come for it now
    ended = rig.store.get_lease(filed.id)
    assert ended is not None and ended.tp and not ends_orphan(ended)
    assert task_ending_of_lease(filed, ended) == "task.cancelled"
