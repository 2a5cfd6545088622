"""Retry on failure under races, with real threads on DynamoDB Local: a failing report racing
an expiry, and the same failing report sent at once from many threads, schedule at most one
retry."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from tenure.domain.errors import StaleLease, TenureError
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import REPORTABLE, LeaseState

from tests.conformance.contract import ALPHA, SPACE, TOLERATION_MS, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads, stored
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

RETRY = {
    "on_failure": True,
    "backoff": {"initial_seconds": 10, "multiplier": 2, "max_seconds": 600, "jitter": False},
}


def _retrying_world(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"retry": RETRY})


def _file(rig: Rig, n: int) -> list[Lease]:
    def one(_: int) -> Lease:
        _, lease = rig.svc.filing.create_task(ADMIN, SPACE, "race", None, None, {}, ALPHA, 3)
        assert lease is not None
        return lease

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(n)))


def _retries_of(rig: Rig, task_id: str) -> int:
    rig.pump.drain()
    types = Counter(e.type for e in rig.store.timeline("task", task_id, None))
    return types["lease.retry_scheduled"]


def test_a_failing_report_racing_an_expiry_schedules_at_most_one_retry(rig: Rig) -> None:
    n = 24
    _retrying_world(rig)
    seeded = _file(rig, n)
    for _ in seeded:
        assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is not None
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None
    ids = [x.id for x in seeded]
    both = threading.Barrier(2, timeout=60)
    answers: dict[str, Lease | TenureError] = {}
    expiries: dict[str, Lease | TenureError | None] = {}
    head_start = [(i // 2 % 6) * 0.002 for i in range(n)]
    report_waits = [d if i % 2 == 0 else 0.0 for i, d in enumerate(head_start)]
    expiry_waits = [d if i % 2 == 1 else 0.0 for i, d in enumerate(head_start)]

    def reporter() -> None:
        for lease_id, delay in zip(ids, report_waits, strict=True):
            both.wait()
            time.sleep(delay)
            try:
                answers[lease_id] = rig.svc.reports.fail(
                    lease_principal(lease_id), lease_id, {"error": "boom"}
                )
            except TenureError as refused:
                answers[lease_id] = refused

    def expirer() -> None:
        for lease_id, delay in zip(ids, expiry_waits, strict=True):
            lease = stored(rig, lease_id)
            assert lease.state in REPORTABLE
            both.wait()
            time.sleep(delay)
            try:
                expiries[lease_id] = rig.svc.recovery.expire(lease, pool)
            except TenureError as failed:
                expiries[lease_id] = failed

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(reporter), threads.submit(expirer)]:
            f.result(timeout=120)

    outcome = Counter[str]()
    for lease_id in ids:
        row = stored(rig, lease_id)
        task = rig.store.get_task(row.task_id or "")
        assert task is not None and task.job_id is not None
        job = rig.store.get_job(task.job_id)
        assert job is not None
        current = stored(rig, job.lease_id)
        retries = _retries_of(rig, task.id)
        if row.state is LeaseState.LOST:
            outcome["lost"] += 1
            assert isinstance(answers[lease_id], StaleLease)
            assert job.id == row.job_id  # the expiry's successor, in the same run
            assert (current.attempt, current.fence, current.state) == (1, 2, LeaseState.PENDING)
            assert retries == 0
        else:
            outcome["failed"] += 1
            assert row.state is LeaseState.FAILED
            assert expiries[lease_id] is None
            assert row.event_data.get("retry_scheduled") is True
            assert job.id != row.job_id  # a new run: the retry
            assert (current.attempt, current.previous_lease_id) == (2, lease_id)
            assert current.state is LeaseState.PENDING
            assert retries == 1
    assert outcome["lost"] + outcome["failed"] == n


def test_the_same_failing_report_from_eight_threads_schedules_one_retry(rig: Rig) -> None:
    _retrying_world(rig)
    [lease] = _file(rig, 1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.id == lease.id
    body = {"error": "boom", "report_id": "r-1"}
    services = [real_time_service(rig)[0] for _ in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=60)

    def report(i: int) -> Lease:
        start.wait()
        return services[i].reports.fail(lease_principal(lease.id), lease.id, dict(body))

    answers = run_threads(THREADS, report)
    row = stored(rig, lease.id)
    assert {a.event_data.get("retry_lease_id") for a in answers} == {
        row.event_data["retry_lease_id"]
    }
    task = rig.store.get_task(lease.task_id or "")
    assert task is not None and task.job_id is not None
    job = rig.store.get_job(task.job_id)
    assert job is not None and job.lease_id == row.event_data["retry_lease_id"]
    assert _retries_of(rig, task.id) == 1


def _fail_metered(rig: Rig, pool: str) -> tuple[float, float, dict[str, int]]:
    _, lease = rig.svc.filing.create_task(ADMIN, SPACE, "m", None, None, {}, pool, 3)
    assert lease is not None
    assert rig.svc.claims.claim(WORKER, pool, "w-1", "1.0", 0, None) is not None
    meter = rig.store.meter
    reads, writes, _ = meter.snapshot()
    calls = Counter(meter.calls)
    rig.svc.reports.fail(lease_principal(lease.id), lease.id, {"error": "boom"})
    after_reads, after_writes, _ = meter.snapshot()
    return after_reads - reads, after_writes - writes, dict(Counter(meter.calls) - calls)


def test_a_pool_that_does_not_retry_writes_a_failure_as_one_item_and_a_retrying_one_adds_a_run(
    rig: Rig,
) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, "beta", {"retry": RETRY})
    off_reads, off_writes, off_calls = _fail_metered(rig, ALPHA)
    on_reads, on_writes, on_calls = _fail_metered(rig, "beta")
    # Off: the lease row alone, one single-item write, and the lease read (the pool's policy
    # is on its cached row): an eventually consistent copy, half a unit, since the copy shows
    # the lease held and the write is conditional on that very row. On: the job and the task
    # read too, the new run's job written ahead (nothing names it yet), and one transaction
    # with the run's lease and the task.
    assert off_calls == {"get": 1, "put": 1}
    assert on_calls == {"get": 3, "put": 1, "transact": 1}
    assert (off_reads, on_reads) == (0.5, 2.5)
    assert on_writes > off_writes
