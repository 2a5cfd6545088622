"""The fake store keeps the DynamoDB adapter's contract: conditions, indexes, cursors, timelines."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import json
import typing
from dataclasses import replace

import pytest
from tenure.app.ports import Change, JobWrite, LeaseWrite, SweeperState, TaskWrite
from tenure.app.rows import Rows, Store
from tenure.domain.errors import AlreadyExists, Conflict, NotFound, ValidationFailed
from tenure.domain.model import Event, Job, Lease, Pool, Space, Task, Token, Workflow
from tenure.domain.states import LeaseState, PoolKind, SubjectKind
from tenure.store.dynamo import dynamo_rows
from tenure.store.dynamo.rows import OnFirstUse

from tests.unit.fake_store import FakeStore
from tests.unit.support import T0
from tests.unit.support import make_lease as _lease


def _job(fence: int = 1) -> Job:
    return Job(
        id="job_1",
        space="OPS",
        pool="p",
        subject_kind=SubjectKind.TASK,
        subject_id="task_1",
        created_at=T0,
        lease_id="lease_1",
        fence=fence,
    )


def _task(job_id: str | None = None) -> Task:
    return Task(id="task_1", key="OPS-1", space="OPS", title="t", created_at=T0, job_id=job_id)


def _store_with(*leases: Lease) -> FakeStore:
    store = FakeStore()
    for lease in leases:
        store.commit(Change(leases=[LeaseWrite(lease)]))
    return store


def _methods(port: type) -> dict[str, inspect.Signature]:
    """The methods a port (and the ports it unites) lists, by name."""
    return {
        name: inspect.signature(fn)
        for base in port.__mro__
        if base.__module__ == port.__module__
        for name, fn in vars(base).items()
        if callable(fn) and not name.startswith("_")
    }


def _same_parameters(impl: type, wanted: dict[str, inspect.Signature]) -> None:
    assert wanted, "the port lists no methods?"
    for name, signature in wanted.items():
        ours = getattr(impl, name, None)
        assert ours is not None, f"{impl.__name__} lacks {name}"
        theirs = inspect.signature(ours).parameters
        assert list(theirs) == list(signature.parameters), name
        # Defaults too: a caller leaving a parameter out gets the same answer from either.
        assert [p.default for p in theirs.values()] == [
            p.default for p in signature.parameters.values()
        ], name


def test_the_fake_implements_every_store_method_with_the_same_parameters() -> None:
    # Store is the union of the row ports: every method of every one of them.
    _same_parameters(FakeStore, _methods(Store))


def test_each_adapter_class_implements_its_port_with_the_same_parameters() -> None:
    rows = dynamo_rows(client=None, table="t")
    ports = typing.get_type_hints(Rows)
    assert len(ports) == len(dataclasses.fields(Rows))
    for field, port in ports.items():
        _same_parameters(type(_built(getattr(rows, field))), _methods(port))


def _built(port: object) -> object:
    """The adapter's port itself, where it is built on first use (the rules')."""
    return port.built() if isinstance(port, OnFirstUse) else port


def test_the_adapters_classes_stay_small() -> None:
    # One class per port, on the table's primitives: none grows back into the whole store.
    rows = dynamo_rows(client=None, table="t")
    for field in dataclasses.fields(Rows):
        impl = type(_built(getattr(rows, field.name)))
        methods = [n for n, f in vars(impl).items() if callable(f)]
        assert len(methods) <= 30, f"{impl.__name__} has {len(methods)} methods"


def test_commit_is_all_or_nothing_when_one_condition_fails() -> None:
    store = FakeStore()
    store.commit(Change(jobs=[JobWrite(_job(fence=1))]))
    change = Change(
        leases=[LeaseWrite(_lease("lease_2", fence=2))],
        jobs=[JobWrite(replace(_job(), fence=2), expect_fence=7)],
    )
    with pytest.raises(Conflict):
        store.commit(change)
    assert store.get_lease("lease_2") is None
    job = store.get_job("job_1")
    assert job is not None and job.fence == 1


def test_lease_write_lands_only_on_the_expected_state_and_fence() -> None:
    store = _store_with(_lease("lease_1"))
    claimed = replace(_lease("lease_1"), state=LeaseState.DISPATCHED)
    for wrong in [(LeaseState.DISPATCHED, 1), (LeaseState.PENDING, 2)]:
        with pytest.raises(Conflict):
            store.commit(Change(leases=[LeaseWrite(claimed, expect=wrong)]))
    assert store.get_lease("lease_1").state is LeaseState.PENDING  # type: ignore[union-attr]
    store.commit(Change(leases=[LeaseWrite(claimed, expect=(LeaseState.PENDING, 1))]))
    assert store.get_lease("lease_1").state is LeaseState.DISPATCHED  # type: ignore[union-attr]


def test_conditional_lease_write_on_a_missing_row_conflicts() -> None:
    with pytest.raises(Conflict):
        FakeStore().commit(
            Change(leases=[LeaseWrite(_lease("lease_9"), expect=(LeaseState.PENDING, 1))])
        )


def test_creating_a_lease_or_job_that_exists_conflicts() -> None:
    store = _store_with(_lease("lease_1"))
    with pytest.raises(Conflict):
        store.commit(Change(leases=[LeaseWrite(_lease("lease_1"))]))
    store.commit(Change(jobs=[JobWrite(_job())]))
    with pytest.raises(Conflict):
        store.commit(Change(jobs=[JobWrite(_job())]))


def test_task_write_conditions_follow_its_job_pointer() -> None:
    store = FakeStore()
    with pytest.raises(Conflict):  # no task yet: "still points at no job" needs the row
        store.commit(Change(tasks=[TaskWrite(_task("job_1"), expect_job_id=None)]))
    store.commit(Change(tasks=[TaskWrite(_task(), create=True)]))
    with pytest.raises(Conflict):
        store.commit(Change(tasks=[TaskWrite(_task(), create=True)]))
    with pytest.raises(Conflict):
        store.commit(Change(tasks=[TaskWrite(_task("job_2"), expect_job_id="job_0")]))
    store.commit(Change(tasks=[TaskWrite(_task("job_1"), expect_job_id=None)]))
    with pytest.raises(Conflict):  # it points at job_1 now, not at no job
        store.commit(Change(tasks=[TaskWrite(_task("job_2"), expect_job_id=None)]))
    store.commit(Change(tasks=[TaskWrite(_task("job_2"), expect_job_id="job_1")]))
    assert store.get_task("task_1").job_id == "job_2"  # type: ignore[union-attr]


def test_duplicate_space_workflow_pool_and_token_names_already_exist() -> None:
    store = FakeStore()
    store.put_space(Space(key="OPS", name="Ops", created_at=T0))
    with pytest.raises(AlreadyExists):
        store.put_space(Space(key="OPS", name="Other", created_at=T0))
    store.put_workflow(Workflow(space="OPS", slug="wf", name="W", created_at=T0))
    with pytest.raises(AlreadyExists):
        store.put_workflow(Workflow(space="OPS", slug="wf", name="W2", created_at=T0))
    store.put_workflow(Workflow(space="DEV", slug="wf", name="W", created_at=T0))
    store.put_pool(Pool(name="p", space="OPS", kind=PoolKind.AGENT, created_at=T0))
    with pytest.raises(AlreadyExists):
        store.put_pool(Pool(name="p", space="DEV", kind=PoolKind.AGENT, created_at=T0))
    token = Token(id="tok_1", name="ci", kind="worker", token_hash="h1", created_at=T0)
    store.put_token(token)
    with pytest.raises(AlreadyExists):
        store.put_token(replace(token, id="tok_2", token_hash="h2"))
    with pytest.raises(AlreadyExists):
        store.put_token(replace(token, id="tok_3", name="other"))
    assert store.get_token("h2") is None
    assert store.get_space("OPS").name == "Ops"  # type: ignore[union-attr]


def test_next_task_number_counts_per_space_and_refuses_a_missing_space() -> None:
    store = FakeStore()
    store.put_space(Space(key="OPS", name="Ops", created_at=T0))
    store.put_space(Space(key="DEV", name="Dev", created_at=T0))
    assert [store.next_task_number("OPS") for _ in range(3)] == [1, 2, 3]
    assert store.next_task_number("DEV") == 1
    with pytest.raises(NotFound):
        store.next_task_number("NOPE")


def test_queue_holds_the_pending_leases_of_one_pool_oldest_first() -> None:
    store = _store_with(
        _lease("lease_b", at=T0 + 2),
        _lease("lease_a", at=T0 + 1),
        _lease("lease_c", at=T0 + 3),
        _lease("lease_x", at=T0, pool="other"),
        _lease("lease_r", at=T0, state=LeaseState.RUNNING, due_at=T0 + 9),
    )
    assert store.queue_candidates("p", 10) == ["lease_a", "lease_b", "lease_c"]
    assert store.queue_candidates("p", 2) == ["lease_a", "lease_b"]
    claimed = replace(_lease("lease_a", at=T0 + 1), state=LeaseState.DISPATCHED)
    store.commit(Change(leases=[LeaseWrite(claimed, expect=(LeaseState.PENDING, 1))]))
    assert store.queue_candidates("p", 10) == ["lease_b", "lease_c"]


def _pages(
    store: FakeStore, limit: int, state: LeaseState | None = None, pool: str | None = None
) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = store.list_leases("OPS", limit, cursor, state, pool)
        pages.append([x.id for x in page.leases])
        if page.next_cursor is None:
            return pages
        assert isinstance(page.next_cursor, str)
        cursor = page.next_cursor


def test_space_list_is_newest_first_and_pages_with_a_cursor_null_on_the_last_page() -> None:
    store = _store_with(*[_lease(f"lease_{i}", at=T0 + i) for i in range(1, 6)])
    store.commit(Change(leases=[LeaseWrite(_lease("lease_dev", space="DEV"))]))
    assert _pages(store, 2) == [["lease_5", "lease_4"], ["lease_3", "lease_2"], ["lease_1"]]
    assert _pages(store, 5) == [["lease_5", "lease_4", "lease_3", "lease_2", "lease_1"]]
    one = _store_with(*[_lease(f"lease_{i}", at=T0 + i) for i in range(1, 5)])
    assert _pages(one, 2) == [["lease_4", "lease_3"], ["lease_2", "lease_1"]]


def test_space_list_filters_by_state_and_pool_across_pages() -> None:
    leases = [
        _lease(f"lease_{i}", at=T0 + i, pool="p" if i % 2 else "q", state=LeaseState.PENDING)
        for i in range(1, 8)
    ]
    store = _store_with(*leases)
    assert _pages(store, 2, pool="p") == [["lease_7", "lease_5"], ["lease_3", "lease_1"]]
    assert _pages(store, 10, state=LeaseState.RUNNING) == [[]]


@pytest.mark.parametrize(
    "cursor",
    [
        "%%% not base64 %%%",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"q": "1#x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"p": "no-separator"}).encode()).decode(),
    ],
)
def test_a_cursor_the_api_did_not_hand_out_is_validation_failed(cursor: str) -> None:
    store = _store_with(_lease("lease_1"))
    with pytest.raises(ValidationFailed):
        store.list_leases("OPS", 10, cursor, None, None)


def test_due_index_holds_held_leases_with_a_due_at_and_nothing_else() -> None:
    store = _store_with(
        _lease("pending", due_at=T0),
        _lease("dispatched", state=LeaseState.DISPATCHED, due_at=T0 + 10),
        _lease("running", state=LeaseState.RUNNING, due_at=T0 + 30),
        _lease("paused", state=LeaseState.PAUSED, due_at=T0 + 20),
        _lease("cancelling", state=LeaseState.CANCELLING, due_at=T0 + 40),
        _lease("undated", state=LeaseState.RUNNING),
        _lease("done", state=LeaseState.COMPLETED, due_at=T0),
        _lease("elsewhere", pool="q", state=LeaseState.RUNNING, due_at=T0),
    )
    assert store.due_leases("p", None) == ["dispatched", "paused", "running", "cancelling"]
    assert store.due_leases("p", T0 + 20) == ["dispatched", "paused"]
    assert store.count_held("p", 100) == 4
    assert store.count_held("p", 3) == 3
    assert store.get_lease("done").due_at is None  # type: ignore[union-attr]
    running = store.get_lease("running")
    assert running is not None
    store.commit(
        Change(
            leases=[
                LeaseWrite(
                    replace(running, state=LeaseState.COMPLETED), expect=(LeaseState.RUNNING, 1)
                )
            ]
        )
    )
    assert "running" not in store.due_leases("p", None)


def test_renew_and_move_deadline_are_conditional_and_only_move_due_at_when_asked() -> None:
    store = _store_with(_lease("l", state=LeaseState.RUNNING, due_at=T0, deadline=T0))
    lease = store.get_lease("l")
    assert lease is not None
    moved = replace(lease, deadline=T0 + 500, heartbeat_at=T0 + 1, lease_seconds=60)
    with pytest.raises(Conflict):
        store.renew(moved, expect=(LeaseState.RUNNING, 2))
    with pytest.raises(Conflict):
        store.reindex(replace(moved, due_at=T0 + 500), expect=(LeaseState.PAUSED, 1))
    store.renew(replace(moved, due_at=T0 + 999), expect=(LeaseState.RUNNING, 1))
    renewed = store.get_lease("l")
    assert renewed is not None
    assert (renewed.deadline, renewed.heartbeat_at, renewed.lease_seconds) == (T0 + 500, T0 + 1, 60)
    assert renewed.due_at == T0  # a heartbeat never touches the index key
    with pytest.raises(Conflict):  # the absence push moves only the deadline it read
        store.move_deadline(replace(renewed, deadline=T0 + 900, due_at=T0 + 900), seen=lease)
    store.reindex(replace(renewed, due_at=T0 + 500), expect=(LeaseState.RUNNING, 1))
    assert store.get_lease("l").due_at == T0 + 500  # type: ignore[union-attr]
    assert store.get_lease("l").deadline == T0 + 500  # type: ignore[union-attr]
    assert store.due_leases("p", T0 + 499) == []


def test_sweeper_state_is_claimed_only_from_the_last_pass_read() -> None:
    store = FakeStore()
    assert store.get_sweeper_state() == SweeperState()
    with pytest.raises(Conflict):
        store.put_sweeper_state(SweeperState(last_pass_at=T0), expect_last=T0 - 1)
    store.put_sweeper_state(SweeperState(last_pass_at=T0), expect_last=None)
    with pytest.raises(Conflict):  # a second "first pass" loses
        store.put_sweeper_state(SweeperState(last_pass_at=T0 + 1), expect_last=None)
    with pytest.raises(Conflict):
        store.put_sweeper_state(SweeperState(last_pass_at=T0 + 1), expect_last=T0 - 5)
    store.put_sweeper_state(SweeperState(T0 + 1, holds={"builders": T0 + 9}), expect_last=T0)
    assert store.get_sweeper_state() == SweeperState(T0 + 1, {"builders": T0 + 9})


def _event(event_id: str, at: int) -> Event:
    return Event(id=event_id, subject_kind="task", subject_id="task_1", type="x", at=at)


def test_timeline_is_oldest_first_and_a_limit_keeps_the_newest() -> None:
    store = FakeStore()
    for event_id, at in [("e3", T0 + 3), ("e1", T0 + 1), ("e2", T0 + 2), ("e4", T0 + 4)]:
        store.put_event(_event(event_id, at))
    store.put_event(replace(_event("other", T0), subject_id="task_2"))
    assert [e.id for e in store.timeline("task", "task_1", None)] == ["e1", "e2", "e3", "e4"]
    assert [e.id for e in store.timeline("task", "task_1", 2)] == ["e3", "e4"]
    assert store.timeline("task", "nobody", None) == []


def test_put_event_with_an_id_already_written_conflicts() -> None:
    store = FakeStore()
    store.put_event(_event("e1", T0))
    with pytest.raises(Conflict):
        store.put_event(replace(_event("e1", T0), type="y"))
    assert [e.type for e in store.timeline("task", "task_1", None)] == ["x"]


def test_commit_derives_one_timeline_event_per_row_version() -> None:
    store = FakeStore()
    created = _lease("lease_1", event_type="lease.created", updated_at=T0)
    store.commit(Change(leases=[LeaseWrite(created)]))
    claimed = replace(
        created,
        state=LeaseState.DISPATCHED,
        version=2,
        event_type="lease.claimed",
        updated_at=T0 + 5,
    )
    store.commit(Change(leases=[LeaseWrite(claimed, expect=(LeaseState.PENDING, 1))]))
    same_version = replace(claimed, state=LeaseState.RUNNING)  # not a transition of its own
    store.commit(Change(leases=[LeaseWrite(same_version, expect=(LeaseState.DISPATCHED, 1))]))
    events = store.timeline("task", "task_1", None)
    assert [(e.type, e.at, e.lease_id, e.fence) for e in events] == [
        ("lease.created", T0, "lease_1", 1),
        ("lease.claimed", T0 + 5, "lease_1", 1),
    ]


def test_stored_documents_come_back_as_a_dynamodb_round_trip_returns_them() -> None:
    report = {"score": 1.0, "ratio": 0.5, "tags": ("a", "b")}
    store = _store_with(_lease("l", report=report))
    assert store.get_lease("l").report == {  # type: ignore[union-attr]
        "score": 1,
        "ratio": 0.5,
        "tags": ["a", "b"],
    }
    report["score"] = 2.0
    assert store.get_lease("l").report["score"] == 1  # type: ignore[index,union-attr]
