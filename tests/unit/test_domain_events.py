"""What a stream record stands for (domain/events.py derive), worked out once per record, and
the per-record context the reactions share (app/reactions.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tenure.app.reactions import Context
from tenure.domain.events import (
    GraphMoved,
    LeaseEnded,
    SuccessReported,
    TaskMoved,
    TaskSucceeded,
    derive,
)
from tenure.domain.model import Lease, Task, TaskGraph
from tenure.domain.states import EndReason, LeaseState

from tests.unit.support import Rig, as_lease


def _running(rig: Rig) -> Lease:
    return rig.claimed().lease


def _types(events: tuple[Any, ...]) -> list[type]:
    return [type(e) for e in events]


def test_a_tasks_success_is_its_success_the_reported_success_and_the_end(rig: Rig) -> None:
    lease = _running(rig)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    ended = rig.lease(lease.id)
    assert _types(derive("lease", lease, ended)) == [TaskSucceeded, SuccessReported, LeaseEnded]
    end = derive("lease", lease, ended)[-1]
    assert isinstance(end, LeaseEnded)
    assert (end.outcome, end.reason) == ("success", EndReason.COMPLETED)


def test_a_replayed_or_unended_lease_row_stands_for_nothing(rig: Rig) -> None:
    lease = _running(rig)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    ended = rig.lease(lease.id)
    assert derive("lease", ended, ended) == ()  # the stream delivered it again
    assert derive("lease", None, lease) == ()  # running: nothing ended


def test_a_reported_success_on_a_cancelled_lease_is_not_the_tasks_success() -> None:
    base = Lease(
        id="l1",
        job_id="j1",
        space="s",
        pool="p",
        subject_kind="task",
        subject_id="t1",
        state=LeaseState.RUNNING,
        fence=1,
        attempt=1,
        created_at=1,
    )
    before = replace(base, task_id="t1", state=LeaseState.CANCELLING)
    after = replace(
        before, state=LeaseState.CANCELLED, outcome="success", end_reason=EndReason.CANCELLED
    )
    assert _types(derive("lease", before, after)) == [SuccessReported, LeaseEnded]
    failed = replace(after, state=LeaseState.FAILED, outcome="failure")
    assert _types(derive("lease", before, failed)) == [LeaseEnded]
    no_task = replace(after, task_id=None, state=LeaseState.COMPLETED)
    assert _types(derive("lease", replace(before, task_id=None), no_task)) == [LeaseEnded]


def test_a_task_row_stands_for_its_named_transition_once() -> None:
    task = Task(id="t1", key="k", space="s", title="t", created_at=1)
    moved = replace(task, version=2, event_type="task.paused")
    assert _types(derive("task", task, moved)) == [TaskMoved]
    assert derive("task", moved, moved) == ()  # a replay of this version
    assert derive("task", task, replace(task, version=2)) == ()  # a mark, no transition
    graph = TaskGraph("t1")
    assert _types(derive("graph", None, graph)) == [GraphMoved]
    assert derive("job", None, object()) == ()


class _Reads:
    def __init__(self, rows: dict[str, Task]) -> None:
        self.rows = rows
        self.calls: list[tuple[str, bool]] = []

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None:
        self.calls.append((task_id, consistent))
        return self.rows.get(task_id)

    def linked_task(self, task_id: str) -> tuple[Task | None, bool]:
        self.calls.append((task_id, True))
        return self.rows.get(task_id), task_id in self.linked

    linked: frozenset[str] = frozenset({"t2"})


def _context(reads: _Reads) -> Context:
    return Context(reads, reads)  # type: ignore[arg-type]


def test_the_context_reads_a_task_once_whichever_reaction_asks_first() -> None:
    task = Task(id="t1", key="k", space="s", title="t", created_at=1)
    reads = _Reads({"t1": task})
    context = _context(reads)
    assert context.task("t1") is task and context.task_as_filed("t1") is task
    assert context.task("t1") is task and context.linked("t1") is False
    assert reads.calls == [("t1", True)]
    # Asked for its filed fields first: half a unit; asked for it as it is now, read again.
    reads = _Reads({"t1": task})
    context = _context(reads)
    assert context.task_as_filed("t1") is task and context.task("t1") is task
    assert context.task("t1") is task and context.task_as_filed("t1") is task
    assert reads.calls == [("t1", False), ("t1", True)]
    # A copy not visible yet is read again consistently.
    reads = _Reads({})
    assert _context(reads).task_as_filed("t1") is None
    assert reads.calls == [("t1", False), ("t1", True)]


def test_whether_a_task_is_linked_comes_with_its_consistent_read() -> None:
    task = Task(id="t2", key="k", space="s", title="t", created_at=1)
    reads = _Reads({"t2": task})
    context = _context(reads)
    assert context.linked("t2") is True and context.task("t2") is task
    assert reads.calls == [("t2", True)]
    # An eventually consistent copy does not answer it: the consistent read does, once.
    reads = _Reads({"t2": task})
    context = _context(reads)
    assert context.task_as_filed("t2") is task
    assert context.linked("t2") is True and context.linked("t2") is True
    assert reads.calls == [("t2", False), ("t2", True)]


def test_a_completion_record_reads_its_task_once_for_all_its_reactions(rig: Rig) -> None:
    lease = _running(rig)
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    ended = rig.lease(lease.id)
    calls: list[tuple[str, bool]] = []
    real = rig.store.get_task

    def counted(task_id: str, consistent: bool = True) -> Task | None:
        calls.append((task_id, consistent))
        return real(task_id, consistent=consistent)

    rig.store.get_task = counted  # type: ignore[method-assign]
    linked = rig.store.linked_task
    in_graph = rig.store.in_graph

    def counted_with_links(task_id: str) -> tuple[Task | None, bool]:
        calls.append((task_id, True))
        return linked(task_id)

    def looked_apart(task_id: str) -> bool:
        calls.append((f"in_graph {task_id}", True))
        return in_graph(task_id)

    rig.store.linked_task = counted_with_links  # type: ignore[method-assign]
    rig.store.in_graph = looked_apart  # type: ignore[method-assign]
    # The success's graph reaction, the breaker and wake-creator each need it: one read.
    rig.svc.reactions.react("lease", lease, ended)
    assert calls == [(lease.task_id, True)]
