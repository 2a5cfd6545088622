"""The task graph under concurrency on DynamoDB Local: children completing on
eight threads roll their parent up once; blockers completing on eight threads enqueue their
dependent once; every stream record is delivered twice, by two reactors at the same time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tenure.app.rows import Rows
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import compose
from tenure.domain.errors import TenureError
from tenure.domain.model import Task
from tenure.domain.states import LeaseState, TaskStatus
from tenure.store.dynamo import load_image
from tenure.triggers import stream as reactor
from tenure.wiring import RandomIds, SystemClock
from tenure_cli.local.streams import StreamPump

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

THREADS = 8


class TwiceAtOnce(StreamPump):
    """Delivers each batch to two reactors running at the same time (a redelivery racing
    the first delivery), and keeps every record it delivered."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(rig.pump.ddb.meta.endpoint_url, rig.pump.table, rig.store)
        self.records: list[dict[str, Any]] = []

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        self.records.extend(batch)
        start = threading.Barrier(2, timeout=30)

        def one(_: int) -> None:
            svc = compose(Rows.of(self.store, self.store), SystemClock(), RandomIds())
            start.wait()
            for record in batch:
                reactor.process(self.store, svc, record)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(2)))


def _file(rig: Rig, pool: str | None = None, **links: Any) -> Task:
    task, _ = rig.svc.filing.create_task(
        ADMIN, SPACE, "graph", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _complete_at_once(rig: Rig, tasks: list[Task]) -> None:
    """Enqueue and claim each task, then complete them all from THREADS threads at once."""
    held = []
    for task in tasks:
        rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None
        held.append(won.lease)
    start = threading.Barrier(len(held), timeout=60)
    svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())

    def complete(n: int) -> None:
        start.wait()
        lease = held[n]
        svc.reports.complete(lease_principal(lease.id), lease.id, {"outcome": "success"})

    with ThreadPoolExecutor(len(held)) as pool:
        list(pool.map(complete, range(len(held))))


def test_eight_children_completing_at_once_roll_the_parent_up_once(rig: Rig) -> None:
    make_world(rig.svc)
    parent = _file(rig)
    children = [_file(rig, parent_id=parent.id) for _ in range(THREADS)]
    _complete_at_once(rig, children)
    pump = TwiceAtOnce(rig)
    pump.drain()
    graph = rig.store.get_graph(parent.id)
    assert (graph.children_total, graph.children_done) == (THREADS, THREADS)
    assert graph.rollup_at is not None
    events = [e.type for e in rig.store.timeline("task", parent.id, None)]
    assert events.count("task.rollup_completed") == 1
    # One parent transition: exactly one stream record shows rollup_at appearing.
    appeared = 0
    for record in pump.records:
        change = record["dynamodb"]
        new = load_image(change.get("NewImage", {}))
        old = load_image(change["OldImage"]) if "OldImage" in change else {}
        if new.get("PK") == f"TASK#{parent.id}" and new.get("SK") == "GRAPH":
            appeared += int("rollup_at" in new and "rollup_at" not in old)
    assert appeared == 1
    assert rig.svc.graph.get_task(ADMIN, parent.id).status is TaskStatus.COMPLETED


def test_eight_blockers_completing_at_once_enqueue_their_dependent_once(rig: Rig) -> None:
    make_world(rig.svc)
    blockers = [_file(rig) for _ in range(THREADS)]
    waiting = _file(
        rig,
        pool=ALPHA,
        depends_on=tuple(b.id for b in blockers),
        auto_enqueue_on_ready=True,
    )
    assert rig.svc.graph.get_task(ADMIN, waiting.id).status is TaskStatus.BLOCKED
    _complete_at_once(rig, blockers)
    pump = TwiceAtOnce(rig)
    pump.drain()
    created = [e for e in rig.store.timeline("task", waiting.id, None) if e.type == "lease.created"]
    assert len(created) == 1
    view = rig.svc.graph.get_task(ADMIN, waiting.id)
    assert view.lease is not None and view.lease.state is LeaseState.PENDING
    assert view.status is TaskStatus.QUEUED
    graph = rig.store.get_graph(waiting.id)
    assert (graph.blockers_done, graph.blockers_total) == (THREADS, THREADS)
    # A second full replay of everything changes nothing.
    StreamPump._deliver(pump, pump.records)
    created = [e for e in rig.store.timeline("task", waiting.id, None) if e.type == "lease.created"]
    assert len(created) == 1


def test_eight_retries_of_one_failed_lease_open_one_run(rig: Rig) -> None:
    make_world(rig.svc)
    task = _file(rig, pool=ALPHA)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    rig.svc.reports.fail(lease_principal(won.lease.id), won.lease.id, {"error": "boom"})
    start = threading.Barrier(THREADS, timeout=60)

    def retry(_: int) -> str:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        try:
            return svc.force.retry(ADMIN, won.lease.id).id
        except TenureError as refused:
            return refused.code

    with ThreadPoolExecutor(THREADS) as pool:
        answers = list(pool.map(retry, range(THREADS)))
    opened = [a for a in answers if a.startswith("lease_")]
    assert len(opened) == 1, answers
    assert set(answers) - set(opened) <= {"invalid_transition"}
    view = rig.svc.graph.get_task(ADMIN, task.id)
    assert view.lease is not None and view.lease.id == opened[0] and view.lease.attempt == 2


def _force_against_complete(rig: Rig) -> tuple[bool, bool]:
    """One held lease, force-failed and completed at the same instant: (forced, completed)."""
    _file(rig, pool=ALPHA)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    lease_id = won.lease.id
    start = threading.Barrier(2, timeout=60)

    def force() -> bool:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        return svc.force.bulk_fail(ADMIN, [lease_id], "stuck")[0].ok

    def complete() -> bool:
        svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        start.wait()
        try:
            svc.reports.complete(lease_principal(lease_id), lease_id, {})
        except TenureError:
            return False
        return True

    with ThreadPoolExecutor(2) as pool:
        forced, completed = pool.submit(force), pool.submit(complete)
        results = (forced.result(60), completed.result(60))
    ended = rig.store.get_lease(lease_id)
    assert ended is not None
    assert ended.state is (LeaseState.FAILED if results[0] else LeaseState.COMPLETED)
    assert (ended.failure_kind == "operator_forced") is results[0]
    return results


def test_a_force_fail_racing_the_holders_completion_ends_the_lease_once(rig: Rig) -> None:
    make_world(rig.svc)
    for _ in range(4):
        results = _force_against_complete(rig)
        assert sum(results) == 1, results
