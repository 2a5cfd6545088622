"""The task list's part of the store contract (tasks_by_space: the board's columns), run on the
fake, moto and DynamoDB Local by the same modules that run contract.py."""

from __future__ import annotations

import pytest
from tenure.app.ports import TaskPage
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Task
from tenure.domain.states import LeaseState, TaskStatus

from tests.conformance.contract import (
    ALPHA,
    GAMMA,
    OTHER_SPACE,
    SPACE,
    ContractRig,
    MakeRig,
    _cursor,
    claim,
    world,
)
from tests.conftest import ADMIN, lease_principal


def _file(r: ContractRig, title: str, pool: str | None = None, space: str = SPACE) -> Task:
    r.clock.advance(0.01)  # a distinct creation instant each: newest first is then title order
    task, _ = r.svc.filing.create_task(ADMIN, space, title, None, None, {}, pool, None)
    return task


def _walk(r: ContractRig, limit: int) -> tuple[list[str], list[TaskPage]]:
    ids: list[str] = []
    pages: list[TaskPage] = []
    cursor: str | None = None
    for _ in range(50):
        page = r.store.task_page(SPACE, limit, cursor)
        pages.append(page)
        ids.extend(e.task.id for e in page.entries)
        cursor = page.next_cursor
        if cursor is None:
            return ids, pages
    raise AssertionError("task_page never handed back a null cursor")


class TaskListContract:
    def test_every_task_of_the_space_is_listed_newest_first_with_its_newest_lease(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        plain = _file(r, "never enqueued")
        done = _file(r, "completed", ALPHA)
        won = claim(r)
        r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
        queued = _file(r, "queued", ALPHA)
        _file(r, "elsewhere", GAMMA, space=OTHER_SPACE)
        r.drain()

        page = r.store.task_page(SPACE, 10, None)

        assert [e.task.id for e in page.entries] == [queued.id, done.id, plain.id]
        assert page.next_cursor is None
        by_id = {e.task.id: e for e in page.entries}
        assert by_id[plain.id].lease is None
        done_lease = by_id[done.id].lease
        assert done_lease is not None and done_lease.id == won.lease.id
        assert done_lease.state is LeaseState.COMPLETED
        queued_lease = by_id[queued.id].lease
        assert queued_lease is not None and queued_lease.state is LeaseState.PENDING
        # Linked to nothing, a task keeps its success on its lease: no graph row records it.
        assert by_id[done.id].graph.succeeded_at is None
        assert by_id[plain.id].graph.succeeded_at is None

        # Whole-row rewrites of a task (a pause, then its first run) keep it listed once, in
        # the place its filing gave it.
        r.clock.advance(5)
        r.svc.graph.pause_task(ADMIN, plain.id)
        r.svc.filing.enqueue(ADMIN, plain.id, ALPHA)
        again = r.store.task_page(SPACE, 10, None).entries
        assert [e.task.id for e in again] == [queued.id, done.id, plain.id]
        assert again[2].task.paused and again[2].lease is not None

    def test_pages_follow_the_cursor_never_repeating_or_skipping(self, make_rig: MakeRig) -> None:
        limit = 2
        r = make_rig()
        world(r)
        filed = [_file(r, f"t{n}", ALPHA if n % 2 else None) for n in range(5)]

        ids, pages = _walk(r, limit)

        assert ids == [t.id for t in reversed(filed)]
        assert all(len(p.entries) == limit for p in pages[:-1])
        assert 1 <= len(pages[-1].entries) <= limit
        # Each entry's own cursor resumes right after it.
        middle = pages[0].entries[-1]
        after = r.store.task_page(SPACE, 5, middle.cursor)
        assert [e.task.id for e in after.entries] == ids[len(pages[0].entries) :]

    def test_a_cursor_it_did_not_hand_out_is_refused(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        _file(r, "one")
        for cursor in (
            "not a cursor!",
            _cursor({"p": "0000000000001#lease_1"}),  # the lease list's
            _cursor({"k": "no-separator"}),
            _cursor({"k": 17}),
            _cursor({"k": "0000000000001#task_1", "p": "x"}),
        ):
            with pytest.raises(ValidationFailed, match=r"^cursor: "):
                r.store.task_page(SPACE, 10, cursor)

    def test_the_service_list_derives_status_and_blocked_reasons_like_a_single_read(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        blocker = _file(r, "blocker", ALPHA)
        r.clock.advance(0.01)
        waiting, _ = r.svc.filing.create_task(
            ADMIN,
            SPACE,
            "waits",
            None,
            None,
            {},
            None,
            None,
            links=TaskLinks(depends_on=(blocker.id,)),
        )
        ready = _file(r, "ready")
        r.drain()

        listed = r.svc.listing.list_tasks(ADMIN, SPACE, 10, None)
        blocked = r.svc.listing.list_tasks(ADMIN, SPACE, 10, None, TaskStatus.BLOCKED)

        assert [t.view.task.id for t in listed.tasks] == [ready.id, waiting.id, blocker.id]
        for item in listed.tasks:
            single = r.svc.graph.get_task(ADMIN, item.view.task.id)
            assert (item.view.status, item.view.blocked_reasons) == (
                single.status,
                single.blocked_reasons,
            )
        assert [t.view.status for t in listed.tasks] == [
            TaskStatus.READY,
            TaskStatus.BLOCKED,
            TaskStatus.QUEUED,
        ]
        assert [t.view.task.id for t in blocked.tasks] == [waiting.id]
        assert blocked.tasks[0].view.blocked_reasons == (
            {"source": "dependency", "depends_on_task_ids": [blocker.id]},
        )
        assert blocked.next_cursor is None

        # The blockers' graph rows come in one batch, zeros for a task that has none.
        graphs = r.store.get_graphs([blocker.id, waiting.id, "task_none"])
        assert set(graphs) == {blocker.id, waiting.id, "task_none"}
        assert graphs[waiting.id].blockers_outstanding
        assert graphs["task_none"].task_id == "task_none"
        assert not graphs["task_none"].blockers_outstanding
