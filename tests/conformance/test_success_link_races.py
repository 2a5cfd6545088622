"""A task nothing is linked to gets no graph row for its success: its success stays its
lease's. Linking to it later races that success, and each must count the other exactly once.
On DynamoDB Local: a blocker completing against a dependent being filed, in both orders, at
once, and at the two interleavings that matter (the filing read the blocker before its
completion and commits after it; the reactor looked for a link before the filing committed
one), with the reactor crashing once after each of its writes and every stream record
delivered twice. The dependent is released once, never twice and never left blocked; the
blocker's completion goes on the bus under one id. The same for a child filed under a task
whose own run is completing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tenure.app.ports import Change, Edge, Link
from tenure.app.rows import Rows
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import Tenure, compose
from tenure.domain.model import Lease, Task
from tenure.domain.states import LeaseState, TaskStatus
from tenure.triggers import stream as reactor
from tenure.wiring import RandomIds, SystemClock
from tenure_cli.local.streams import StreamPump

from tests.conformance.contract import ALPHA, BETA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

ROUNDS = 4
ORDERS = ("completed-first", "filed-first", "at-once", "stale-filing", "reactor-looked-first")


class Crash(Exception):
    """Injected: the reactor dies right after one of its writes."""


class CrashingStore:
    """The table as the reactor sees it: the first call of each named write goes through and
    then raises, as a reactor that dies between two writes; later calls behave."""

    WRITES = ("settle_graph", "count_edge", "commit")

    def __init__(self, store: Any) -> None:
        self._store = store
        self.crashed: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in self.WRITES:
            return attr

        def wrote_then_died(*args: Any, **kwargs: Any) -> Any:
            answer = attr(*args, **kwargs)
            if name not in self.crashed:
                self.crashed.add(name)
                raise Crash(name)
            return answer

        return wrote_then_died


class Reactor(StreamPump):
    """Delivers every batch twice, the first time to a reactor that crashes once after each
    kind of write (its failed records delivered again, as Lambda does), and keeps what each
    delivery put on the bus. `looked` runs once, when a reaction has just found a task
    linked to nothing (before it goes on)."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(rig.pump.ddb.meta.endpoint_url, rig.pump.table, rig.store)
        self.crashing = CrashingStore(rig.store)
        self.published: list[tuple[str, str, str]] = []  # (row kind, detail type, id)
        self.looked: Callable[[], None] | None = None
        found = rig.store.linked_task

        def linked_task(task_id: str) -> tuple[Task | None, bool]:
            task, linked = found(task_id)
            if not linked and self.looked is not None:
                looked, self.looked = self.looked, None
                looked()
            return task, linked

        self.crashing.linked_task = linked_task

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        store = self.crashing
        svc = compose(Rows.of(store, store), SystemClock(), RandomIds())  # type: ignore[arg-type]
        for record in [*batch, *batch]:
            changed = reactor.rows_of(record)
            for _ in range(len(CrashingStore.WRITES) + 2):
                try:
                    sent = reactor.process(store, svc, record)  # type: ignore[arg-type]
                except Crash:
                    continue
                kind = changed[0] if changed else ""
                self.published.extend((kind, o.detail_type, o.detail["id"]) for o in sent)
                break
            else:
                raise AssertionError("a record kept failing")

    def completions(self, task_id: str) -> set[str]:
        """The ids the task's completion went on the bus under, asserting that one kind of
        row change told it (its lease's or its graph row's, however often redelivered)."""
        told = [
            (k, i) for k, t, i in self.published if t == "task.completed" and i.startswith(task_id)
        ]
        assert len({k for k, _ in told}) <= 1, f"told by both its lease and its graph row: {told}"
        return {i for _, i in told}


class StaleFiling:
    """The table as one filing sees it: its first commit that links to `task_id` first lets
    `meanwhile` run (a success of that task), so it commits on what it read before."""

    def __init__(self, store: Any, task_id: str, meanwhile: Callable[[], None]) -> None:
        self._store = store
        self.task_id = task_id
        self.meanwhile: Callable[[], None] | None = meanwhile
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def commit(self, change: Change) -> None:
        checks = [
            g for g in change.graph if isinstance(g, Edge | Link) and g.task_id == self.task_id
        ]
        if checks and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
            try:
                self._store.commit(change)
            except Exception:
                self.lost += 1
                raise
            return
        self._store.commit(change)


def _file(rig: Rig, pool: str | None = None, svc: Tenure | None = None, **links: Any) -> Task:
    task, _ = (svc or rig.svc).filing.create_task(
        ADMIN, SPACE, "graph", None, None, {}, pool, None, links=TaskLinks(**links)
    )
    return task


def _running(rig: Rig) -> tuple[Task, Lease]:
    """A task filed on ALPHA, linked to nothing, and its lease claimed."""
    task = _file(rig, pool=ALPHA)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.task_id == task.id
    return task, won.lease


def _complete(rig: Rig, lease: Lease) -> None:
    svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
    svc.reports.complete(lease_principal(lease.id), lease.id, {"outcome": "success"})


def _race(rig: Rig, pump: Reactor, order: str, lease: Lease, file: Callable[[Any], Task]) -> Task:
    """File (with `file`, given the table it files through) against `lease`'s completion,
    in `order`; returns the task filed. The reactor runs after, and in between where the
    order needs it."""
    complete = lambda: _complete(rig, lease)  # noqa: E731
    if order == "completed-first":
        complete()
        return file(rig.store)
    if order == "filed-first":
        filed = file(rig.store)
        complete()
        return filed
    if order == "at-once":
        start = threading.Barrier(2, timeout=30)
        out: list[Task] = []

        def one(n: int) -> None:
            start.wait()
            if n:
                complete()
            else:
                out.append(file(rig.store))

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(2)))
        return out[0]
    if order == "stale-filing":
        assert lease.task_id is not None
        stale = StaleFiling(rig.store, lease.task_id, complete)
        filed = file(stale)
        assert stale.meanwhile is None and stale.lost == 1  # it lost, read again, placed it
        return filed
    assert order == "reactor-looked-first"
    complete()
    out = []
    pump.looked = lambda: out.append(file(rig.store))
    pump.drain()
    assert pump.looked is None and out, "the reaction found the task linked to nothing"
    return out[0]


@pytest.mark.parametrize("order", ORDERS)
def test_a_dependent_filed_against_its_blockers_success_is_released_once(
    rig: Rig, order: str
) -> None:
    make_world(rig.svc)
    pump = Reactor(rig)
    for _ in range(ROUNDS):
        pump.crashing.crashed.clear()
        blocker, lease = _running(rig)

        def file(store: Any, blocker: Task = blocker) -> Task:
            svc = compose(Rows.of(store, store), SystemClock(), RandomIds())
            links = {"depends_on": (blocker.id,), "auto_enqueue_on_ready": True}
            return _file(rig, pool=BETA, svc=svc, **links)

        waiting = _race(rig, pump, order, lease, file)
        pump.drain()
        pump.drain()  # nothing left to react to: a second pass changes nothing
        runs = [
            e for e in rig.store.timeline("task", waiting.id, None) if e.type == "lease.created"
        ]
        assert len(runs) == 1, f"{order}: the dependent has {len(runs)} runs"
        graph = rig.store.get_graph(waiting.id)
        assert (graph.blockers_total, graph.blockers_done) == (1, 1)
        view = rig.svc.graph.get_task(ADMIN, waiting.id)
        assert view.status is TaskStatus.QUEUED and view.blocked_reasons == ()
        assert rig.store.edges_counted(blocker.id, "dependent", [waiting.id]) == {waiting.id: True}
        assert rig.svc.graph.get_task(ADMIN, blocker.id).status is TaskStatus.COMPLETED
        assert rig.store.get_graph(blocker.id).succeeded_at is not None  # linked: on its row
        told = pump.completions(blocker.id)
        assert len(told) == 1, f"{order}: the blocker's completion told as {told}"


@pytest.mark.parametrize("order", ORDERS)
def test_a_child_filed_under_a_completing_task_rolls_it_up_once(rig: Rig, order: str) -> None:
    make_world(rig.svc)
    pump = Reactor(rig)
    for _ in range(ROUNDS):
        pump.crashing.crashed.clear()
        parent, lease = _running(rig)

        def file(store: Any, parent: Task = parent) -> Task:
            svc = compose(Rows.of(store, store), SystemClock(), RandomIds())
            return _file(rig, pool=BETA, svc=svc, parent_id=parent.id)

        child = _race(rig, pump, order, lease, file)
        pump.drain()
        graph = rig.store.get_graph(parent.id)
        assert (graph.children_total, graph.children_done) == (1, 0)
        before = rig.svc.graph.get_task(ADMIN, parent.id).status
        # Its own success before its first child completed it; after, the child holds it open.
        assert before in (TaskStatus.COMPLETED, TaskStatus.RUNNING)
        if order == "completed-first":
            assert before is TaskStatus.COMPLETED
        if order == "filed-first":
            assert before is TaskStatus.RUNNING
        # On the clock it was filed by (the rig's own is held still).
        claims = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds()).claims
        won = claims.claim(WORKER, BETA, "w-2", "1.0", 0, None)
        assert won is not None and won.lease.task_id == child.id
        _complete(rig, won.lease)
        pump.drain()
        pump.drain()
        graph = rig.store.get_graph(parent.id)
        assert (graph.children_total, graph.children_done) == (1, 1)
        assert graph.rollup_at is not None and graph.succeeded_at is not None
        events = [e.type for e in rig.store.timeline("task", parent.id, None)]
        assert events.count("task.rollup_completed") == 1
        assert rig.svc.graph.get_task(ADMIN, parent.id).status is TaskStatus.COMPLETED
        told = pump.completions(parent.id)
        assert len(told) == 1, f"{order}: the parent's completion told as {told}"
        assert len(pump.completions(child.id)) == 1


def test_a_task_linked_to_nothing_writes_no_graph_row_for_its_success(rig: Rig) -> None:
    make_world(rig.svc)
    pump = Reactor(rig)
    task, lease = _running(rig)
    _complete(rig, lease)
    pump.drain()
    assert rig.store.in_graph(task.id) is False
    assert rig.store.get_graph(task.id).succeeded_at is None
    assert rig.svc.graph.get_task(ADMIN, task.id).status is TaskStatus.COMPLETED
    assert pump.completions(task.id) == {f"{task.id}.succeeded.{_ended(rig, lease).ended_at}"}
    # A dependent filed afterwards finds it succeeded, through its lease, and is ready.
    waiting = _file(rig, pool=BETA, depends_on=(task.id,), auto_enqueue_on_ready=True)
    pump.drain()
    assert rig.svc.graph.get_task(ADMIN, waiting.id).status is TaskStatus.QUEUED
    assert rig.store.get_graph(task.id).success_copied
    assert pump.completions(task.id) == {f"{task.id}.succeeded.{_ended(rig, lease).ended_at}"}


def test_a_dependent_of_a_failed_task_waits_for_its_next_run(rig: Rig) -> None:
    """No open lease to hold: the filing holds the task's job and run as read, so a run
    opened after it is seen by the reactor, and one opened before it is read again."""
    make_world(rig.svc)
    pump = Reactor(rig)
    task, lease = _running(rig)
    rig.svc.reports.fail(lease_principal(lease.id), lease.id, {"error": "boom"})
    waiting = _file(rig, pool=BETA, depends_on=(task.id,), auto_enqueue_on_ready=True)
    assert rig.svc.graph.get_task(ADMIN, waiting.id).status is TaskStatus.BLOCKED
    rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.task_id == task.id
    _complete(rig, won.lease)
    pump.drain()
    assert rig.svc.graph.get_task(ADMIN, waiting.id).status is TaskStatus.QUEUED
    runs = [e for e in rig.store.timeline("task", waiting.id, None) if e.type == "lease.created"]
    assert len(runs) == 1
    # Filed on the failed run's read while a next run opens and succeeds: it loses, reads
    # again and finds the success.
    task, lease = _running(rig)
    rig.svc.reports.fail(lease_principal(lease.id), lease.id, {"error": "boom"})

    def next_run_succeeds() -> None:
        rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None and won.lease.task_id == task.id
        _complete(rig, won.lease)

    stale = StaleFiling(rig.store, task.id, next_run_succeeds)
    svc = compose(Rows.of(stale, stale), SystemClock(), RandomIds())  # type: ignore[arg-type]
    late = _file(rig, pool=BETA, svc=svc, depends_on=(task.id,), auto_enqueue_on_ready=True)
    assert stale.meanwhile is None and stale.lost == 1
    pump.drain()
    assert rig.svc.graph.get_task(ADMIN, late.id).status is TaskStatus.QUEUED
    runs = [e for e in rig.store.timeline("task", late.id, None) if e.type == "lease.created"]
    assert len(runs) == 1


def _runs(rig: Rig, task: Task) -> list[Any]:
    return [e for e in rig.store.timeline("task", task.id, None) if e.type == "lease.created"]


def _ended(rig: Rig, lease: Lease) -> Lease:
    done = rig.store.get_lease(lease.id)
    assert done is not None and done.state is LeaseState.COMPLETED
    return done


def test_linking_keeps_a_filing_within_one_transaction_of_two_items_a_blocker(rig: Rig) -> None:
    """Each blocker not linked yet is linked in a small transaction of its own first: a task
    filed on 48 blockers whose runs are open fits in DynamoDB's 100 items."""
    make_world(rig.svc)
    blockers = [_file(rig, pool=ALPHA) for _ in range(48)]
    waiting = _file(rig, pool=BETA, depends_on=tuple(b.id for b in blockers))
    graph = rig.store.get_graph(waiting.id)
    assert (graph.blockers_total, graph.blockers_done) == (48, 0)
    assert all(rig.store.in_graph(b.id) for b in blockers)
