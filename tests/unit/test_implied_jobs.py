"""A task's first job, opened with the task, has no row until it moves on: its first lease and
the task imply it, every reader finds the same job, and the first write that changes it creates
the row. A table an earlier release may still share keeps writing the row."""

from __future__ import annotations

from tenure.app.migrations import IMPLIED_JOBS_FROM_SCHEMA, SchemaState, migrate
from tenure.domain.model import first_job_id
from tenure.domain.states import LeaseState
from tenure.domain.timeline import first_lease_id

from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, Rig, as_lease


def test_a_filed_task_s_first_job_is_implied_whole_by_its_lease_and_task(rig: Rig) -> None:
    task, lease = rig.task(max_attempts=4)
    assert lease is not None
    assert lease.id == first_lease_id(task.id) and lease.job_id == first_job_id(task.id)
    assert rig.store.jobs == {}  # no job row was written
    job = rig.svc.kernel.job_of(lease)
    assert job is not None
    assert (job.id, job.lease_id, job.fence, job.attempt, job.recovery_count) == (
        lease.job_id,
        lease.id,
        1,
        1,
        0,
    )
    assert (job.max_attempts, job.task_id, job.pool, job.space) == (4, task.id, POOL, SPACE)
    assert rig.svc.kernel.newest_lease(task) == lease


def test_a_release_hands_the_job_on_and_creates_its_row_once(rig: Rig) -> None:
    won = rig.claimed()
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {"reason": "handoff"})
    row = rig.store.get_job(won.lease.job_id)
    assert row is not None and row.fence == 2 and row.lease_id != won.lease.id
    task = rig.store.get_task(won.lease.task_id or "")
    assert task is not None
    newest = rig.svc.kernel.newest_lease(task)
    assert newest is not None and (newest.id, newest.fence) == (row.lease_id, 2)
    [entry] = rig.svc.listing.list_tasks(ADMIN, SPACE, 10, None).tasks
    assert entry.view.lease is not None and entry.view.lease.id == row.lease_id
    assert newest.state is LeaseState.PENDING


def test_a_later_run_of_a_task_has_a_job_row_of_its_own(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    assert lease.job_id != first_job_id(task.id)
    assert rig.store.get_job(lease.job_id) is not None


def test_below_the_schema_that_allows_it_every_job_has_its_row(rig: Rig) -> None:
    assert rig.store.save_schema(
        SchemaState(), SchemaState(version=IMPLIED_JOBS_FROM_SCHEMA - 1, step=1)
    )
    task, lease = rig.task()
    assert lease is not None and lease.job_id != first_job_id(task.id)
    assert rig.store.get_job(lease.job_id) is not None
    assert [o.status for o in migrate(rig.store)][-1] == "applied"
    rig.advance(31)  # the schema is read once per 30 s
    later, first = rig.task()
    assert first is not None and first.job_id == first_job_id(later.id)
    assert rig.store.get_job(first.job_id) is None
