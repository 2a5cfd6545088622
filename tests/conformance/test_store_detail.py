"""A lease's detail on DynamoDB Local: the detail store contract, the reclaim race (two passes
at once reclaim each lease once: one mark, one `lease.reclaimed`, nothing deleted twice), and
the count of a lease's log containers under concurrent batches (never past its cap)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from tenure.app.ports import LogLine
from tenure.domain.errors import CeilingReached

from tests.conformance.contract import ALPHA, make_world
from tests.conformance.contract_detail import DetailContract
from tests.conformance.test_store_contract import make_rig
from tests.conftest import ADMIN, WORKER, Rig, lease_principal
from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink

__all__ = ["make_rig"]
LEASES = 12


class TestDetailContractOnDynamoDBLocal(DetailContract):
    pass


class _Locked(FakeBlobs):
    """The in-memory bucket, safe to delete from two threads at once."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def delete(self, keys: list[str]) -> None:
        with self.lock:
            super().delete(keys)


class _LockedSink(FakeLogSink):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def delete(self, lease_id: str) -> int:
        with self.lock:
            return super().delete(lease_id)


def test_two_passes_at_once_reclaim_each_lease_once(rig: Rig) -> None:
    blobs, sink = _Locked(), _LockedSink()
    rig.svc.artifacts.blobs, rig.svc.artifacts.log_sink = blobs, sink
    make_world(rig.svc)
    admin_task_ids = []
    lease_ids = []
    for _ in range(LEASES):
        task, _ = rig.svc.filing.create_task(ADMIN, "OPS", "w", None, None, {}, ALPHA, None)
        admin_task_ids.append(task.id)
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None
        me = lease_principal(won.lease.id)
        rig.svc.attachments.add_attachment(
            me, won.lease.id, "o.txt", "text/plain", "file", None, b"bytes"
        )
        sink.append(won.lease.id, "main", [LogLine(rig.clock.now_ms(), "main", "stdout", "x")])
        rig.svc.reports.complete(me, won.lease.id, {})
        lease_ids.append(won.lease.id)
    rig.clock.advance(2_592_001)  # past the default retention
    barrier = threading.Barrier(2)

    def one_pass() -> list[str]:
        barrier.wait()
        won: list[str] = []
        for lease_id in lease_ids:
            if rig.svc.retention.reclaim(lease_id):
                won.append(lease_id)
        return won

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(lambda _: one_pass(), range(2))
    assert sorted(first + second) == sorted(lease_ids), "each lease reclaimed exactly once"
    # Each lease's served bytes and its upload's key, each named by one delete only.
    assert set(blobs.deleted.values()) == {1} and len(blobs.deleted) == 2 * LEASES
    assert set(sink.deleted.values()) == {1} and len(sink.deleted) == LEASES
    rig.pump.drain()
    for task_id in admin_task_ids:
        types = Counter(e.type for e in rig.store.timeline("task", task_id, None))
        assert types["lease.reclaimed"] == 1 and types["lease.completed"] == 1
    assert rig.store.ended_leases(ALPHA, rig.clock.now_ms(), 100) == []


def test_concurrent_batches_never_count_more_log_containers_than_the_cap(rig: Rig) -> None:
    """Ten requests at once, each naming eight containers of its own: six fit under the cap
    of 50 (48), whichever six win, and no request is counted in part."""
    make_world(rig.svc)
    rig.svc.filing.create_task(ADMIN, "OPS", "w", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    lease_id, cap = won.lease.id, 50
    batches = [[f"r{n}-c{i}" for i in range(8)] for n in range(10)]
    barrier = threading.Barrier(len(batches))

    def post(names: list[str]) -> set[str] | None:
        barrier.wait()
        try:
            return rig.store.count_log_containers(lease_id, names, cap)
        except CeilingReached:
            return None

    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        answers = list(pool.map(post, batches))
    counted = [a for a in answers if a is not None]
    assert len(counted) == 6 and all(len(a) == 8 for a in counted)
    assert rig.store.count_log_containers(lease_id, ["x1", "x2"], cap) == {"x1", "x2"}
    with pytest.raises(CeilingReached):
        rig.store.count_log_containers(lease_id, ["x3"], cap)


def test_a_container_named_by_concurrent_batches_is_new_to_exactly_one(rig: Rig) -> None:
    """The request that counted a container first is the one that makes its stream."""
    make_world(rig.svc)
    rig.svc.filing.create_task(ADMIN, "OPS", "w", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    names = [f"c{i}" for i in range(8)]
    barrier = threading.Barrier(6)

    def post(n: int) -> set[str]:
        barrier.wait()
        return rig.store.count_log_containers(won.lease.id, names[n % 3 :], 50)

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(post, range(6)))
    made = Counter(name for answer in answers for name in answer)
    assert made == Counter(names)
