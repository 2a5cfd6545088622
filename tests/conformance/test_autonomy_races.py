"""Autonomy under concurrency on DynamoDB Local: a block with the running lease's
token racing that lease's own completion ends the lease once; eight clears at once resume the
task with one run; a wake is published once when every stream record is delivered twice, by
two reactors at the same time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tenure.app.rows import Rows
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import compose
from tenure.domain.errors import TenureError
from tenure.domain.model import Task
from tenure.domain.states import EndReason, LeaseState
from tenure.triggers import stream as reactor
from tenure.wiring import RandomIds, SystemClock
from tenure_cli.local.streams import StreamPump

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

THREADS = 8


def _file(rig: Rig, pool: str | None = None, **links: Any) -> Task:
    task, _ = rig.svc.filing.create_task(
        ADMIN, SPACE, "autonomy", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _block_against_complete(rig: Rig) -> tuple[bool, bool]:
    task = _file(rig, pool=ALPHA)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.task_id == task.id
    lease_id = won.lease.id
    start = threading.Barrier(2, timeout=60)

    def block() -> bool:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        try:
            svc.blocks.block_task(lease_principal(lease_id), task.id, "needs_input", "a question")
        except TenureError as refused:
            # The completion landed first: its write lost to it (invalid_transition), or the
            # lease had ended before the block read it, and an ended lease's token places no
            # block (unauthenticated).
            assert refused.code in ("invalid_transition", "unauthenticated"), refused.code
            return False
        return True

    def complete() -> bool:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        try:
            svc.reports.complete(lease_principal(lease_id), lease_id, {})
        except TenureError as refused:
            # The block released it: its job moved on under a new fence.
            assert refused.code in ("stale_lease", "invalid_transition"), refused.code
            return False
        return True

    with ThreadPoolExecutor(2) as pool:
        blocked, completed = pool.submit(block), pool.submit(complete)
        results = (blocked.result(60), completed.result(60))
    ended = rig.store.get_lease(lease_id)
    assert ended is not None
    if results[0]:
        assert (ended.state, ended.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
    else:
        assert ended.state is LeaseState.COMPLETED
        stored = rig.store.get_task(task.id)
        assert stored is not None and not stored.blocks  # a refused block left nothing
    return results


def test_a_block_racing_the_holders_completion_ends_the_lease_once(rig: Rig) -> None:
    make_world(rig.svc)
    for _ in range(4):
        results = _block_against_complete(rig)
        assert sum(results) == 1, results


def test_eight_clears_at_once_resume_the_task_with_one_run(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.instance.update_instance(ADMIN, {"block_recurrence_limit": 0})
    task = _file(rig, pool=ALPHA, auto_enqueue_on_ready=True)
    first = rig.svc.graph.get_task(ADMIN, task.id).lease
    assert first is not None
    rig.svc.operator.cancel(ADMIN, first.id)
    blocks = [rig.svc.blocks.block_task(ADMIN, task.id, "error", f"b{n}") for n in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=60)

    def clear(n: int) -> None:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        svc.blocks.clear_block(ADMIN, task.id, blocks[n]["id"])

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(clear, range(THREADS)))
    rig.pump.drain()
    created = [e for e in rig.store.timeline("task", task.id, None) if e.type == "lease.created"]
    assert len(created) == 2  # the first run (cancelled) and the one resume
    view = rig.svc.graph.get_task(ADMIN, task.id)
    assert view.blocked_reasons == ()
    assert view.lease is not None and view.lease.state is LeaseState.PENDING


class Bus:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: list[dict[str, Any]] = []

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        with self.lock:
            self.sent.append(detail)


class TwiceAtOnceWithBus(StreamPump):
    def __init__(self, rig: Rig, bus: Bus) -> None:
        super().__init__(rig.pump.ddb.meta.endpoint_url, rig.pump.table, rig.store)
        self.bus = bus

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        start = threading.Barrier(2, timeout=30)

        def one(_: int) -> None:
            svc = compose(Rows.of(self.store, self.store), SystemClock(), RandomIds())
            svc.wake.publisher = self.bus
            start.wait()
            for record in batch:
                reactor.process(self.store, svc, record)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(2)))


def test_a_wake_is_published_once_under_stream_redelivery(rig: Rig) -> None:
    make_world(rig.svc)
    _file(rig, pool=ALPHA)
    creator = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert creator is not None
    child, _ = rig.svc.filing.create_task(
        lease_principal(creator.lease.id), SPACE, "child", None, None, {}, ALPHA, None
    )
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None)
    assert won is not None and won.lease.task_id == child.id
    rig.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
    bus = Bus()
    TwiceAtOnceWithBus(rig, bus).drain()
    assert [(d["child_task_id"], d["child_status"]) for d in bus.sent] == [(child.id, "completed")]
    creator_task = creator.lease.task_id
    assert creator_task is not None
    wakes = [
        e for e in rig.store.timeline("task", creator_task, None) if e.type == "task.wake_creator"
    ]
    assert len(wakes) == 1
