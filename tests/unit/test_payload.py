"""The worker's payload: shape by subject, prior attempts, recent activity."""

from __future__ import annotations

import json

import pytest
from tenure.api.views import event_view, iso
from tenure.app.ports import Change, LeaseWrite
from tenure.domain.errors import Forbidden, LeaseTokenMismatch
from tenure.domain.states import LeaseState, SubjectKind

from tests.unit.support import ADMIN, MEMBER, SPACE, T0, Rig, as_lease, make_lease


def test_a_task_payload_carries_the_documented_task_fields(rig: Rig) -> None:
    rig.task(title="Deploy", body="ship it", properties={"env": "prod"})
    won = rig.claim()
    bundle = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert bundle["lease"] == rig.lease(won.lease.id)
    assert bundle["kind"] == "command"
    subject = bundle["subject"]
    assert set(subject) == {
        "kind",
        "key",
        "title",
        "body",
        "properties",
        "dependencies",
        "prior_attempts",
        "activity",
    }
    assert (subject["kind"], subject["key"], subject["title"], subject["body"]) == (
        "task",
        "OPS-1",
        "Deploy",
        "ship it",
    )
    assert subject["properties"] == {"env": "prod"}
    assert (subject["dependencies"], subject["prior_attempts"]) == ([], [])
    assert [a["type"] for a in subject["activity"]] == ["lease.created", "lease.claimed"]
    assert "trigger" not in bundle  # only leases minted by an inbound rule carry one
    assert won.token not in json.dumps(bundle, default=str)


def test_a_payload_after_a_release_lists_the_prior_attempt(rig: Rig) -> None:
    rig.task()
    first = rig.claim("w1").lease
    rig.advance(1)
    rig.svc.reports.release(as_lease(first.id), first.id, {"reason": "handoff"})
    rig.advance(1)
    second = rig.claim("w2").lease
    prior = rig.svc.payloads.payload(as_lease(second.id), second.id)["subject"]["prior_attempts"]
    assert [(p["lease_id"], p["fence"], p["ended"]) for p in prior] == [(first.id, 1, "released")]
    assert prior[0]["at"] == iso(T0 + 1000)  # when it ended, ISO 8601 like every API time


def test_a_payload_after_a_failed_run_carries_its_error(rig: Rig) -> None:
    task, _ = rig.task()
    first = rig.claim().lease
    rig.svc.reports.fail(as_lease(first.id), first.id, {"error": "disk full"})
    rig.advance(1)
    rig.svc.filing.enqueue(MEMBER, task.id, "builders")
    second = rig.claim().lease
    prior = rig.svc.payloads.payload(as_lease(second.id), second.id)["subject"]["prior_attempts"]
    assert [(p["lease_id"], p["ended"], p["error"]) for p in prior] == [
        (first.id, "failed", "disk full")
    ]


def test_activity_in_a_payload_is_the_most_recent_twenty_oldest_first(rig: Rig) -> None:
    lease = rig.running()
    for _ in range(12):  # 24 more events: paused, resumed, ...
        rig.advance(1)
        rig.svc.operator.pause(MEMBER, lease.id)
        rig.advance(1)
        rig.svc.operator.resume(MEMBER, lease.id)
    activity = rig.svc.payloads.payload(as_lease(lease.id), lease.id)["subject"]["activity"]
    everything = rig.events(lease.task_id or "")
    assert len(everything) == 27
    # Each entry as GET /tasks/{id}/activity shows it: ISO 8601 `at`, and its `data`.
    assert activity == [event_view(e) for e in everything[-20:]]
    assert activity[0]["at"] == "2026-01-01T00:00:05.000Z" and "data" in activity[0]


def test_only_the_lease_itself_reads_its_payload(rig: Rig) -> None:
    first, second = rig.claimed("w1").lease, rig.claimed("w2").lease
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.payloads.payload(as_lease(first.id), second.id)
    with pytest.raises(Forbidden):
        rig.svc.payloads.payload(MEMBER, second.id)


def _held_lease_on(rig: Rig, kind: SubjectKind, subject_id: str, workflow: str | None) -> str:
    lease = make_lease(
        "lease_sched",
        pool="builders",
        subject_kind=kind,
        subject_id=subject_id,
        task_id=None,
        workflow=workflow,
        state=LeaseState.DISPATCHED,
    )
    rig.store.commit(Change(leases=[LeaseWrite(lease)]))
    return lease.id


def test_a_workflow_payload_carries_slug_name_description_and_activity(rig: Rig) -> None:
    rig.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly sweep", "every night")
    lease_id = _held_lease_on(rig, SubjectKind.WORKFLOW, "nightly", "nightly")
    subject = rig.svc.payloads.payload(as_lease(lease_id), lease_id)["subject"]
    assert set(subject) == {"kind", "slug", "name", "description", "activity"}
    assert (subject["kind"], subject["slug"], subject["name"], subject["description"]) == (
        "workflow",
        "nightly",
        "Nightly sweep",
        "every night",
    )


def test_a_space_payload_carries_key_and_name_and_no_slug_or_description(rig: Rig) -> None:
    lease_id = _held_lease_on(rig, SubjectKind.SPACE, SPACE, None)
    subject = rig.svc.payloads.payload(as_lease(lease_id), lease_id)["subject"]
    assert subject == {"kind": "space", "key": SPACE, "name": "Operations", "activity": []}
