"""Timeline stamps: a task lease's claim, start and completion are stamped on its row by the
write that makes them, exactly when the row alone gives back the event the reactor would have
written; the row codec leaves out what a task's lease can be told without."""

from __future__ import annotations

from dataclasses import replace

from tenure.domain.model import Event, Lease
from tenure.domain.states import EndReason, LeaseState, ReportKind, SubjectKind
from tenure.domain.timeline import (
    first_lease_id,
    first_stamps,
    is_stamped,
    lease_event,
    stamped_events,
    with_stamp,
)
from tenure.store import items
from tenure.triggers.stream import record_event

from tests.unit.support import POOL, T0, Rig, as_lease, make_lease


def _claimed(tl: dict[str, object] | None = None) -> tuple[Lease, Lease]:
    pending = make_lease("lease_1", tl={} if tl is None else tl)
    claimed = replace(
        pending,
        state=LeaseState.DISPATCHED,
        worker_id="w-1",
        worker_version="1.0",
        claimed_at=T0 + 5,
        version=2,
        event_type="lease.claimed",
        event_data={"worker_id": "w-1", "worker_version": "1.0"},
        updated_at=T0 + 5,
    )
    return pending, claimed


def test_a_claim_the_row_can_tell_is_stamped_and_tells_the_same_event() -> None:
    pending, claimed = _claimed()
    stamped = with_stamp(pending, claimed)
    assert stamped.tl == {"c": 2}
    event = lease_event(pending, claimed)
    assert event is not None and stamped_events(stamped) == [event]
    assert is_stamped(stamped, event)
    assert with_stamp(pending, stamped) == stamped  # idempotent (the commit checks again)


def test_an_event_changed_after_its_stamp_loses_the_stamp() -> None:
    pending, claimed = _claimed()
    stamped = with_stamp(pending, claimed)
    changed = replace(stamped, event_data={**(stamped.event_data or {}), "extra": 1})
    assert with_stamp(pending, changed).tl == {}


def test_a_completion_with_more_to_say_than_the_row_keeps_a_row_of_its_own() -> None:
    running = make_lease("lease_1", state=LeaseState.RUNNING, version=3, tl={"c": 2})
    done = replace(
        running,
        state=LeaseState.COMPLETED,
        end_reason=EndReason.COMPLETED,
        ended_at=T0 + 9,
        outcome="success",
        report_kind=ReportKind.COMPLETE,
        version=4,
        event_type="lease.completed",
        event_data={"report": "complete"},
        updated_at=T0 + 9,
    )
    assert with_stamp(running, done).tl == {"c": 2, "e": 4}
    noted = replace(done, event_data={"report": "complete", "retry_scheduled": True})
    assert with_stamp(running, noted).tl == {"c": 2}


def test_stamps_are_written_once_and_only_on_a_task_lease_made_with_them() -> None:
    pending, claimed = _claimed()
    once = with_stamp(pending, claimed)
    again = replace(once, version=3, updated_at=T0 + 6)  # the same name, a later write
    assert with_stamp(once, again).tl == {"c": 2}
    old_pending, old_claimed = _claimed()
    unstamped = replace(old_claimed, tl=None)  # a lease made before stamps
    assert with_stamp(replace(old_pending, tl=None), unstamped).tl is None
    assert first_stamps(SubjectKind.TASK) == {}
    assert first_stamps(SubjectKind.WORKFLOW) is None
    assert first_stamps(SubjectKind.SPACE) is None


def test_every_stamp_a_lifecycle_leaves_is_the_event_on_the_timeline(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    rig.advance(1)
    won = rig.claim()
    rig.advance(1)
    rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    rig.advance(1)
    done = rig.svc.reports.complete(as_lease(lease.id), lease.id, {"details": {"n": 2}})
    stored = rig.lease(lease.id)
    assert stored == done  # the answer is the row written, stamps and all
    assert stored.tl == {"n": 1, "c": 2, "s": 3, "b": "start", "e": 4}
    events = {e.id: e for e in rig.events(task.id)}
    told = stamped_events(stored)
    assert [e.type for e in told] == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        "lease.completed",
    ]
    assert all(events[e.id] == e for e in told)


def test_a_task_lease_row_leaves_out_its_subject_and_a_zero_retry_depth() -> None:
    lease = make_lease("lease_1", pool=POOL, tl={})
    row = items.lease_item(lease)
    assert "subject_id" not in row and "retry_depth" not in row
    assert items.lease_from(row) == lease
    # A row written before keeps both, and reads the same.
    assert items.lease_from({**row, "subject_id": "task_1", "retry_depth": 0}) == lease
    retried = replace(lease, retry_depth=2, subject_kind=SubjectKind.SPACE, subject_id="OPS")
    row = items.lease_item(retried)
    assert (row["subject_id"], row["retry_depth"]) == ("OPS", 2)
    assert items.lease_from(row) == retried


class _Puts:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def put_event(self, event: Event) -> None:
        self.calls.append(("row", event.type))

    def put_anchor(self, event: Event) -> None:
        self.calls.append(("anchor", event.type))


def test_the_reactor_anchors_a_stamped_lease_by_its_first_event_whatever_its_name() -> None:
    puts = _Puts()
    born = make_lease(
        "lease_2", tl={}, event_type="lease.retried", event_data={"pool": "p"}, updated_at=T0
    )
    record_event(puts, "lease", born, lease_event(None, born))  # type: ignore[arg-type]
    pending, claimed = _claimed()
    stamped = with_stamp(pending, claimed)
    record_event(puts, "lease", stamped, lease_event(pending, stamped))  # type: ignore[arg-type]
    old = make_lease("lease_3", event_type="lease.created", event_data={}, updated_at=T0)
    record_event(puts, "lease", old, lease_event(None, old))  # type: ignore[arg-type]
    # The retry's first event anchors it; its stamped claim needs no row; a lease made
    # before stamps keeps a row for its creation.
    assert puts.calls == [("anchor", "lease.retried"), ("row", "lease.created")]


def test_a_tasks_first_lease_is_its_own_anchor(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    assert lease.id == first_lease_id(task.id)
    assert lease.tl == {"n": 1}
    created = lease_event(None, lease)
    assert created is not None and created.type == "lease.created"
    assert stamped_events(lease) == [created], "the row tells its lease.created exactly"
    puts = _Puts()
    record_event(puts, "lease", lease, created)  # type: ignore[arg-type]
    assert puts.calls == [], "no anchor row: a timeline read finds it by its id"


def test_only_a_first_lease_that_says_no_more_than_its_pool_is_stamped_as_created(
    rig: Rig,
) -> None:
    task, lease = rig.task()
    assert lease is not None
    # Its successor (a release: a new lease of the same run) is found by its anchor.
    won = rig.claim()
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {})
    job = rig.store.get_job(lease.job_id)
    assert job is not None
    successor = rig.lease(job.lease_id)
    assert successor.id != lease.id and successor.tl is not None
    assert "n" not in successor.tl
    # A lease named like a first lease but whose creation said more is not told by its row.
    told = make_lease(first_lease_id(task.id), tl={"n": 1}, task_id=task.id, subject_id=task.id)
    assert [e.type for e in stamped_events(told)] == ["lease.created"]
    stranger = make_lease("lease_other", tl={"n": 1}, task_id=task.id, subject_id=task.id)
    assert stamped_events(stranger) == [], "only the task's first lease id is read by key"
