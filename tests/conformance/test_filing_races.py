"""A run's new job is written on its own just before the transaction that commits its lease and
points its task at it. These prove on DynamoDB Local that when that transaction loses (here:
eight enqueues of one task racing), the task ends up with exactly one run, whose job names its
lease, and the losers' jobs are unreachable rows that nothing names.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tenure.domain.errors import Conflict, InvalidTransition, TenureError
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads
from tests.conftest import ADMIN, Rig


def test_eight_enqueues_of_one_task_make_one_run_and_leave_nothing_dangling(rig: Rig) -> None:
    make_world(rig.svc)
    task, none = rig.svc.filing.create_task(ADMIN, SPACE, "once", None, None, {}, None, None)
    assert none is None  # filed without a pool: no run yet
    services = [real_time_service(rig)[0] for _ in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=60)

    def enqueue(i: int) -> Lease | str:
        start.wait()
        try:
            return services[i].filing.enqueue(ADMIN, task.id, ALPHA)
        except TenureError as refused:
            return refused.code

    answers = run_threads(THREADS, enqueue)
    won = [a for a in answers if isinstance(a, Lease)]
    assert len(won) == 1, answers
    assert [a for a in answers if not isinstance(a, Lease)] == ["invalid_transition"] * 7
    lease = won[0]
    stored = rig.store.get_task(task.id)
    assert stored is not None and stored.job_id == lease.job_id
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.lease_id == lease.id
    assert rig.store.queue_candidates(ALPHA, 100) == [lease.id]
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.PENDING, None)
    assert [x.id for x in page.leases] == [lease.id]
    # The other tries' jobs may be in the table, but no task, lease or index names them.
    entries = rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks
    assert [(t.view.task.id, t.view.lease.id if t.view.lease else None) for t in entries] == [
        (task.id, lease.id)
    ]


def test_an_enqueue_whose_transaction_loses_leaves_its_job_unreachable(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job lands, then the transaction of lease and task is lost (as to a rival's enqueue):
    # the task still has no run, nothing lists a lease, and the next enqueue makes one cleanly.
    make_world(rig.svc)
    task, _ = rig.svc.filing.create_task(ADMIN, SPACE, "once", None, None, {}, None, None)
    jobs: list[str] = []
    real_put = rig.store.rows.put_one

    def noting(put: dict[str, Any]) -> None:
        real_put(put)
        if put["Item"]["PK"]["S"].startswith("JOB#"):
            jobs.append(put["Item"]["PK"]["S"].removeprefix("JOB#"))

    def lost(ops: list[dict[str, Any]]) -> None:
        raise Conflict("a conditional write lost")

    monkeypatch.setattr(rig.store.rows, "put_one", noting)
    monkeypatch.setattr(rig.store.rows, "transact", lost)
    with pytest.raises(InvalidTransition):  # how an enqueue answers a lost transaction
        rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    monkeypatch.undo()
    [orphan] = jobs
    assert rig.store.get_job(orphan) is not None  # written ahead, and named by nothing:
    stored = rig.store.get_task(task.id)
    assert stored is not None and stored.job_id is None
    assert rig.store.queue_candidates(ALPHA, 100) == []
    lease = rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    assert lease.job_id != orphan
    assert rig.store.queue_candidates(ALPHA, 100) == [lease.id]
