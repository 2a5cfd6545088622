"""The work bundle a holder reads: the lease, its subject (task, workflow or space), the
trigger of an inbound rule's lease, and what the pool's kind adds (docs/api.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure.app.flow.events import received
from tenure.app.rows import LeaseRows, SpaceRows, TimelineRows
from tenure.domain import authz
from tenure.domain.errors import TenureError
from tenure.domain.events import (
    LEASE_CANCELLED,
    LEASE_COMPLETED,
    LEASE_FAILED,
    LEASE_KILLED,
    LEASE_LOST,
    LEASE_RELEASED,
)
from tenure.domain.fencing import iso_ms
from tenure.domain.model import Event, Lease, Principal, Task, first_job_id
from tenure.domain.states import SubjectKind

if TYPE_CHECKING:
    from tenure.app.flow.inputs import Inputs
    from tenure.app.kernel import Kernel
    from tenure.app.setup.versions import Versions

ACTIVITY_IN_PAYLOAD = 20
# The payload reads this many of the subject's newest events at most: its recent activity and
# its prior attempts come from them (a long history is summarised by its newest part).
HISTORY_IN_PAYLOAD = 200


class Payloads:
    def __init__(
        self,
        kernel: Kernel,
        versions: Versions,
        inputs: Inputs,
        *,
        leases: LeaseRows,
        spaces: SpaceRows,
        timeline: TimelineRows,
    ) -> None:
        self.inputs = inputs
        self.kernel = kernel
        self.leases = leases
        self.spaces = spaces
        self.timeline = timeline
        self.versions = versions

    def payload(self, actor: Principal, lease_id: str) -> dict[str, Any]:
        lease = self.kernel.owned.own_lease(actor, lease_id, authz.SHIP)
        self.kernel.stale.refuse_if_stale(lease, "payload")
        return self._bundle(lease)

    def claimed_payload(self, lease: Lease, task: Task | None = None) -> dict[str, Any] | None:
        """The bundle a claim answer carries, so a worker needs no GET payload (one request
        fewer per lease).
        The lease is already won when this runs: a bundle that cannot be read now (a throttled
        read, a subject gone) must not lose the worker its token, so it answers None and the
        worker falls back to GET /leases/{id}/payload. `task`: the lease's task as the claim
        read it just before its write (a lease marked task-pending), not read again."""
        try:
            return self._bundle(lease, task)
        except TenureError:
            self.kernel.counters["claim_payload_deferred"] += 1
            return None

    def _bundle(self, lease: Lease, task: Task | None = None) -> dict[str, Any]:
        pool = self.kernel.catalog.pool(lease.pool)
        # The lease in hand is the row the claim just wrote or the report read consistently:
        # its own stamps (created, claimed, started) are taken from it, not read again.
        events = self.timeline.timeline(
            lease.subject_kind, lease.subject_id, HISTORY_IN_PAYLOAD, held=(lease,)
        )
        recent = [_event_summary(e) for e in events[-ACTIVITY_IN_PAYLOAD:]]
        subject: dict[str, Any]
        # What the tasks around a task produced; other subjects have none.
        flow: dict[str, Any] = {"inputs": []}
        got: list[dict[str, Any]] = []
        if lease.subject_kind is SubjectKind.TASK:
            if task is None or task.id != lease.task_id:
                task = self.kernel.task(lease.task_id or "")
            flow, around = self.inputs.of(task)
            got = received(events)
            subject = {
                "kind": "task",
                "key": task.key,
                "title": task.title,
                "body": task.body,
                "properties": task.properties,
                "dependencies": _dependencies(around, task.depends_on or ()),
                "prior_attempts": _prior_attempts(events, lease.id),
                "activity": recent,
            }
        elif lease.subject_kind is SubjectKind.WORKFLOW:
            wf = self.spaces.get_workflow(lease.space, lease.workflow or "")
            subject = {
                "kind": "workflow",
                "slug": lease.workflow,
                "name": wf.name if wf else None,
                "description": wf.description if wf else None,
                "activity": recent,
            }
        else:
            space = self.kernel.catalog.space(lease.space)
            subject = {"kind": "space", "key": space.key, "name": space.name, "activity": recent}
        bundle: dict[str, Any] = {
            "lease": lease,
            "subject": subject,
            "kind": pool.kind.value,
            **self.versions.kind_fields(lease, pool),
            **flow,
            "events": got,
        }
        # Only a lease an inbound rule minted carries its trigger ({topic, occurred_at, data});
        # a lease a schedule or a manual fire minted carries none. The trigger is written once,
        # with the job, so any copy of the row has it: eventually consistent (half a read
        # unit), and consistently only when the copy is not visible yet (a job just minted).
        # A task's first job opened by its filing has none (and may have no row to read).
        if lease.task_id is not None and lease.job_id == first_job_id(lease.task_id):
            return bundle
        job = self.leases.get_job(lease.job_id, consistent=False) or self.leases.get_job(
            lease.job_id
        )
        if job is not None and job.trigger is not None:
            bundle["trigger"] = job.trigger
        return bundle


def _event_summary(event: Event) -> dict[str, Any]:
    """An entry of the subject's recent activity, as GET /tasks/{id}/activity shows it."""
    return {
        "type": event.type,
        "at": iso_ms(event.at),
        "lease_id": event.lease_id,
        "fence": event.fence,
        "data": event.data,
    }


_ENDINGS = {LEASE_COMPLETED, LEASE_FAILED, LEASE_CANCELLED, LEASE_KILLED, LEASE_LOST}


def _prior_attempts(events: list[Event], current_lease_id: str) -> list[dict[str, Any]]:
    return [
        {
            "lease_id": e.lease_id,
            "fence": e.fence,
            "ended": e.type.removeprefix("lease."),
            "at": iso_ms(e.at),
            "outcome": e.data.get("outcome"),
            "error": e.data.get("error"),
        }
        for e in events
        if e.type in _ENDINGS | {LEASE_RELEASED} and e.lease_id != current_lease_id
    ]


def _dependencies(around: dict[str, Task], ids: tuple[str, ...]) -> list[dict[str, Any]]:
    """The tasks this one waited for (at most 50): id, key and title (read with its inputs)."""
    found = [around.get(task_id) for task_id in ids]
    return [{"id": t.id, "key": t.key, "title": t.title} for t in found if t is not None]
