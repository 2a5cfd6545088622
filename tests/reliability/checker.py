"""The properties a whole history must have (lease states, fencing), as plain functions.

Each check takes what was recorded (operations as the wire saw them, holds as the workers
lived them, and the server's truth read afterwards) and returns the violations it found, in
words; an empty list means the property held over the whole history.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable

from tests.reliability.history import FINAL, Hold, Op, Truth

# How far two holders of one job may overlap in wall-clock time: the resolution of the holds
# (the job ticks every 50 ms) plus scheduling jitter on a loaded 2-core machine.
OVERLAP_BOUND_S = 0.25
# Timestamps on the API are whole milliseconds; the proxy's and the service's clocks are one.
CLOCK_EPSILON_S = 0.002

ENDED_BY_REPORT = {"completed", "failed"}


def fences_increase(ops: list[Op], truth: Truth) -> list[str]:
    """Per job, each new lease has a higher fence than every earlier one, and no two leases
    share a fence; every claim answer names the fence the lease really has."""
    found: list[str] = []
    by_job: dict[str, list] = defaultdict(list)
    for lease in truth.leases.values():
        by_job[lease.job_id].append(lease)
    for job_id, leases in by_job.items():
        leases.sort(key=lambda x: (x.created_at or 0.0, x.fence))
        for before, after in itertools.pairwise(leases):
            if after.fence <= before.fence:
                found.append(
                    f"job {job_id}: lease {after.id} (fence {after.fence}) was created after "
                    f"lease {before.id} (fence {before.fence})"
                )
    for task in truth.tasks.values():
        created = [ev for ev in task.events if ev["type"] == "lease.created"]
        for before, after in itertools.pairwise(created):
            if (after.get("fence") or 0) <= (before.get("fence") or 0):
                found.append(
                    f"task {task.id}: the timeline creates fence {after.get('fence')} "
                    f"after fence {before.get('fence')}"
                )
    claims = sorted((op for op in ops if op.kind == "claim" and op.lease_id), key=lambda o: o.end)
    newest: dict[str, tuple[int, str]] = {}  # task -> (highest fence claimed, its lease)
    for op in claims:
        assert op.lease_id is not None and op.fence is not None
        real = truth.leases.get(op.lease_id)
        if real is not None and real.fence != op.fence:
            found.append(
                f"claim by {op.worker} answered fence {op.fence} for lease {op.lease_id}, "
                f"whose fence is {real.fence}"
            )
        if op.task_id is None:
            continue
        seen = newest.get(op.task_id)
        if seen is not None and seen[1] != op.lease_id and op.fence <= seen[0]:
            found.append(
                f"task {op.task_id}: lease {op.lease_id} claimed with fence {op.fence} after "
                f"lease {seen[1]} was claimed with fence {seen[0]}"
            )
        if seen is None or op.fence > seen[0]:
            newest[op.task_id] = (op.fence, op.lease_id)
    return found


def holders_do_not_overlap(holds: list[Hold], bound: float = OVERLAP_BOUND_S) -> list[str]:
    """No job has two holders acting at once (beyond `bound`), and a job's holders act in
    fence order."""
    found: list[str] = []
    by_task: dict[str, list[Hold]] = defaultdict(list)
    for hold in holds:
        by_task[hold.task_id].append(hold)
    for task_id, held in by_task.items():
        held.sort(key=lambda h: h.start)
        for i, first in enumerate(held):
            for second in held[i + 1 :]:
                if second.lease_id == first.lease_id:
                    continue
                overlap = min(first.end, second.end) - second.start
                if overlap > bound:
                    found.append(
                        f"task {task_id}: {first.worker} (lease {first.lease_id}, fence "
                        f"{first.fence}) and {second.worker} (lease {second.lease_id}, fence "
                        f"{second.fence}) both acted for {overlap:.2f}s"
                    )
                if second.fence < first.fence:
                    found.append(
                        f"task {task_id}: fence {second.fence} acted after fence {first.fence}"
                    )
    return found


def tasks_end_once(truth: Truth, task_ids: Iterable[str]) -> list[str]:
    """Every task ends, and exactly once: one lease of its run ended by a report (completed or
    failed), or none and the run's recoveries were exhausted; every other lease was handed
    on (lost or released); nothing is still active; the task's status says the same."""
    found: list[str] = []
    leases_of: dict[str, list] = defaultdict(list)
    for lease in truth.leases.values():
        leases_of[lease.task_id].append(lease)
    for task_id in task_ids:
        task = truth.tasks.get(task_id)
        if task is None:
            found.append(f"task {task_id}: never read back")
            continue
        leases = leases_of.get(task_id, [])
        active = [x.id for x in leases if x.ended_at is None]
        if active:
            found.append(f"task {task_id}: leases {active} never ended")
        enders = [x for x in leases if x.state in ENDED_BY_REPORT]
        handed_on = [x for x in leases if x.state in ("lost", "cancelled")]
        odd = [f"{x.id}:{x.state}" for x in leases if x not in enders and x not in handed_on]
        odd = [o for o in odd if o.split(":")[0] not in active]
        if odd:
            found.append(f"task {task_id}: leases ended in unexpected states {odd}")
        exhausted = [ev for ev in task.events if ev["type"] == "task.run.lease_recovery_exhausted"]
        endings = len(enders) + len(exhausted)
        if endings != 1:
            found.append(
                f"task {task_id}: ended {endings} times ({[x.id for x in enders]} by report, "
                f"{len(exhausted)} exhaustions)"
            )
            continue
        if enders:
            lease = enders[0]
            wanted = (
                "completed"
                if lease.state == "completed"
                and lease.outcome
                in (
                    None,
                    "success",
                )
                else "failed"
            )
            if task.status != wanted:
                found.append(
                    f"task {task_id}: lease {lease.id} ended {lease.state}"
                    f" ({lease.outcome}) but the task is {task.status}"
                )
        elif task.status != "needs_attention":
            found.append(f"task {task_id}: recoveries exhausted but the task is {task.status}")
        on_timeline = [
            ev for ev in task.events if ev["type"] in ("lease.completed", "lease.failed")
        ]
        if len(on_timeline) != len(enders):
            found.append(
                f"task {task_id}: the timeline records {len(on_timeline)} report endings, "
                f"the leases {len(enders)}"
            )
    return found


def _ends_as(op: Op) -> tuple[str, str | None]:
    """The state (and end reason) an acknowledged final report leaves its lease in."""
    if op.kind == "release":
        return "cancelled", "released"
    if op.kind == "complete" and op.outcome in (None, "success"):
        return "completed", None
    return "failed", None


def acknowledged_reports_kept(ops: list[Op], truth: Truth) -> list[str]:
    """A final report the service answered 2xx (whether or not the worker heard it) is what
    its lease ended as; a heartbeat answered 2xx was not on a lease already handed on."""
    found: list[str] = []
    for op in ops:
        if not op.acknowledged or op.lease_id is None:
            continue
        lease = truth.leases.get(op.lease_id)
        if lease is None:
            found.append(f"{op.kind} by {op.worker} acknowledged on unknown lease {op.lease_id}")
            continue
        if op.kind in FINAL:
            state, reason = _ends_as(op)
            if lease.state != state or (reason is not None and lease.end_reason != reason):
                found.append(
                    f"{op.kind} by {op.worker} on lease {op.lease_id} was acknowledged at "
                    f"{op.end:.3f}, but the lease ended {lease.state} ({lease.end_reason})"
                )
        elif op.kind in ("heartbeat", "start"):
            handed_on = lease.state == "lost" or lease.end_reason == "released"
            ended = lease.ended_at
            if handed_on and ended is not None and ended + CLOCK_EPSILON_S < op.start:
                found.append(
                    f"{op.kind} by {op.worker} on lease {op.lease_id} was acknowledged "
                    f"{op.start - ended:.3f}s after the lease ended {lease.state}"
                )
    return found


def stale_reports_refused(ops: list[Op], truth: Truth) -> list[str]:
    """Every report sent after its lease was lost or released (a replay of the same release
    aside) is refused 409 stale_lease, and each such refusal is on its task's timeline as a
    `lease.stale_report` of that lease."""
    found: list[str] = []
    refused: dict[str, int] = defaultdict(int)
    for op in ops:
        if op.kind not in ("start", "heartbeat", *FINAL) or op.lease_id is None:
            continue
        lease = truth.leases.get(op.lease_id)
        if op.status == 409 and op.code == "stale_lease":
            refused[op.lease_id] += 1
        if lease is None or lease.ended_at is None:
            continue
        handed_on = lease.state == "lost" or lease.end_reason == "released"
        if not handed_on or lease.ended_at + CLOCK_EPSILON_S >= op.start:
            continue
        if op.kind == "release" and lease.end_reason == "released":
            continue  # the same release again is answered with its first answer
        if op.status is None or op.status >= 500:
            continue  # no verdict either way (never answered, or throttled)
        if op.status != 409 or op.code != "stale_lease":
            found.append(
                f"{op.kind} by {op.worker} on lease {op.lease_id}, "
                f"{op.start - lease.ended_at:.3f}s after it ended {lease.state}, was answered "
                f"{op.status} {op.code or ''}".rstrip()
            )
    for lease_id, count in refused.items():
        lease = truth.leases.get(lease_id)
        task = truth.tasks.get(lease.task_id) if lease else None
        if task is None:
            found.append(f"lease {lease_id}: refused as stale but its task was never read back")
            continue
        recorded = sum(
            1
            for ev in task.events
            if ev["type"] == "lease.stale_report" and ev.get("lease_id") == lease_id
        )
        if recorded < count:
            found.append(
                f"lease {lease_id}: {count} reports refused as stale, "
                f"{recorded} recorded on the timeline of task {task.id}"
            )
    return found


def check(ops: list[Op], holds: list[Hold], truth: Truth, task_ids: Iterable[str]) -> list[str]:
    """Every property over the whole history."""
    return [
        *fences_increase(ops, truth),
        *holders_do_not_overlap(holds),
        *tasks_end_once(truth, task_ids),
        *acknowledged_reports_kept(ops, truth),
        *stale_reports_refused(ops, truth),
    ]
