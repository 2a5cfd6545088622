"""Timeline events derived from row changes: one per transition, with an idempotent id."""

from __future__ import annotations

from dataclasses import replace

from tenure.domain.model import Task
from tenure.domain.states import EndReason, LeaseState
from tenure.domain.timeline import lease_event, task_event

from tests.unit.support import T0, make_lease


def test_a_new_lease_row_naming_a_transition_is_one_event_with_a_per_version_id() -> None:
    new = make_lease("lease_1", event_type="lease.created", event_data={"pool": "p"}, updated_at=T0)
    event = lease_event(None, new)
    assert event is not None
    assert (event.id, event.type, event.at, event.lease_id, event.fence) == (
        "lease_1.v000001",
        "lease.created",
        T0,
        "lease_1",
        1,
    )
    assert (event.subject_kind, event.subject_id, event.data) == ("task", "task_1", {"pool": "p"})


def test_a_row_rewrite_without_a_new_version_or_transition_is_no_event() -> None:
    old = make_lease("lease_1", event_type="lease.created", updated_at=T0)
    assert lease_event(old, replace(old, deadline=T0 + 5)) is None
    assert lease_event(None, make_lease("lease_1")) is None


def test_a_terminal_lease_event_says_how_it_ended_and_what_was_reported() -> None:
    old = make_lease("lease_1", state=LeaseState.RUNNING, version=3)
    new = replace(
        old,
        state=LeaseState.FAILED,
        end_reason=EndReason.FAILED,
        version=4,
        event_type="lease.failed",
        event_data={"report": "fail"},
        report={"error": "boom"},
        updated_at=T0 + 9,
    )
    event = lease_event(old, new)
    assert event is not None
    assert event.id == "lease_1.v000004" and event.at == T0 + 9
    assert event.data == {
        "report": "fail",
        "state": "failed",
        "end_reason": "failed",
        "outcome": None,
        "error": "boom",
    }


def test_task_events_follow_the_task_version() -> None:
    task = Task(id="task_1", key="OPS-1", space="OPS", title="t", created_at=T0)
    assert task_event(None, task) is None
    flagged = replace(
        task, version=2, event_type="task.run.lease_recovery_exhausted", updated_at=T0 + 1
    )
    event = task_event(task, flagged)
    assert event is not None
    assert (event.id, event.type, event.at, event.subject_kind) == (
        "task_1.v000002",
        "task.run.lease_recovery_exhausted",
        T0 + 1,
        "task",
    )
    assert task_event(flagged, replace(flagged, title="renamed")) is None
