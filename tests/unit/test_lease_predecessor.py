"""A lease that takes over its job from an ended one (lost, released) names it in
`previous_lease_id`, as its `lease.created` event does."""

from __future__ import annotations

from tenure.api.views import lease_view
from tenure.domain.states import LeaseState

from tests.unit.support import Rig, as_lease


def _successor(rig: Rig, lease_id: str) -> str:
    job = rig.svc.kernel.job_of(rig.lease(lease_id))
    assert job is not None and job.lease_id != lease_id, "the job was not handed on"
    return job.lease_id


def test_a_lost_lease_s_successor_names_it_like_its_created_event(rig: Rig) -> None:
    lost = rig.running("w1", max_attempts=3)
    for _ in range(9):  # minute by minute past the deadline (1.5 x the 300 s toleration)
        rig.advance(60)
        rig.sweep()
    assert rig.lease(lost.id).state is LeaseState.LOST
    after = rig.lease(_successor(rig, lost.id))
    created = [e for e in rig.events(after.task_id or "") if e.lease_id == after.id]
    assert created and created[0].type == "lease.created"
    assert created[0].data["previous_lease_id"] == lost.id
    assert after.previous_lease_id == lost.id
    assert lease_view(after, None)["previous_lease_id"] == lost.id


def test_a_released_lease_s_successor_names_it(rig: Rig) -> None:
    held = rig.running("w1")
    rig.svc.reports.release(as_lease(held.id), held.id, {})
    after = rig.lease(_successor(rig, held.id))
    assert after.state is LeaseState.PENDING and after.previous_lease_id == held.id


def test_a_first_lease_names_none(rig: Rig) -> None:
    _, first = rig.task()
    assert first is not None and lease_view(first, None)["previous_lease_id"] is None
