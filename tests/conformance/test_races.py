"""Claim, report and expiry races with real threads, on DynamoDB Local only.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tenure.api.views import lease_view
from tenure.app.leases.claims import Claimed
from tenure.app.ports import Change
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.errors import Conflict, StaleLease, TenureError
from tenure.domain.fencing import DEADLINE_SLACK, hash_token
from tenure.domain.model import Lease
from tenure.domain.states import REPORTABLE, EndReason, LeaseState
from tenure.store.dynamo import OneTable
from tenure.wiring import RandomIds, SystemClock

from tests.conformance.contract import ALPHA, SPACE, TOLERATION_MS, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

THREADS = 8


class CountingStore:
    """The real store, counting the conditional writes that won and lost (thread-safe)."""

    def __init__(self, inner: OneTable) -> None:
        self.inner = inner
        self.won = 0
        self.lost = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, change: Change) -> None:
        try:
            self.inner.commit(change)
        except Conflict:
            with self._lock:
                self.lost += 1
            raise
        with self._lock:
            self.won += 1


def real_time_service(rig: Rig) -> tuple[Tenure, CountingStore]:
    counting = CountingStore(rig.store)
    return compose(Rows.of(counting, counting), SystemClock(), RandomIds()), counting  # type: ignore[arg-type]


def seed(rig: Rig, n: int) -> list[Lease]:
    """n pending leases in pool alpha, one task each (created on two threads to save time)."""

    def one(_: int) -> Lease:
        _, lease = rig.svc.filing.create_task(ADMIN, SPACE, "race", None, None, {}, ALPHA, None)
        assert lease is not None
        return lease

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(n)))


def run_threads(n: int, target: Callable[[int], Any]) -> list[Any]:
    """Run target(0..n-1) on n threads started together; re-raise the first failure."""
    with ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(target, i) for i in range(n)]
        return [f.result(timeout=120) for f in futures]


def stored(rig: Rig, lease_id: str) -> Lease:
    lease = rig.store.get_lease(lease_id)
    assert lease is not None
    return lease


def events_by_lease(rig: Rig, task_ids: set[str]) -> dict[str | None, Counter[str]]:
    rig.pump.drain()
    found: dict[str | None, Counter[str]] = defaultdict(Counter)
    for task_id in task_ids:
        for event in rig.store.timeline("task", task_id, None):
            found[event.lease_id][event.type] += 1
    return found


# ------------------------------------------------------------------------------ claims


def test_eight_workers_racing_for_200_queued_leases_claim_each_exactly_once(rig: Rig) -> None:
    make_world(rig.svc)
    seeded = seed(rig, 200)
    svc, counting = real_time_service(rig)
    start = threading.Barrier(THREADS, timeout=60)

    def worker(n: int) -> list[Claimed]:
        mine: list[Claimed] = []
        start.wait()
        while True:
            won = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            if won is None:  # only when the queue was seen empty
                return mine
            mine.append(won)

    began = time.monotonic()
    per_worker = run_threads(THREADS, worker)
    elapsed = time.monotonic() - began
    claims = [c for mine in per_worker for c in mine]
    handed_out = Counter(c.lease.id for c in claims)
    print(
        f"\nclaim race: {len(claims)} claims by {THREADS} threads in {elapsed:.2f}s "
        f"({len(claims) / elapsed:.0f}/s); conditional writes won {counting.won}, "
        f"lost {counting.lost}; per worker {[len(m) for m in per_worker]}"
    )

    assert [i for i, times in handed_out.items() if times > 1] == []  # no double claim
    assert set(handed_out) == {x.id for x in seeded}  # every queued lease handed out
    assert counting.won == 200
    assert rig.store.queue_candidates(ALPHA, 16) == []
    tokens = {c.lease.id: (c.token, c.lease.worker_id) for c in claims}
    rows = rig.store.get_leases(tokens)
    assert len(rows) == 200
    for lease_id, row in rows.items():
        token, worker_id = tokens[lease_id]
        assert row.state is LeaseState.DISPATCHED
        assert row.fence == 1 and row.version == 2
        assert row.worker_id == worker_id
        assert row.token_hash == hash_token(token)  # the one token hash: the winner's
    assert sorted(rig.store.due_leases(ALPHA, None)) == sorted(rows)
    events = events_by_lease(rig, {x.subject_id for x in seeded})
    assert all(events[i]["lease.claimed"] == 1 for i in rows)


def test_fences_grow_by_one_per_job_while_released_leases_are_reclaimed_concurrently(
    rig: Rig,
) -> None:
    jobs, rounds = 24, 4
    make_world(rig.svc)
    seeded = seed(rig, jobs)
    svc, counting = real_time_service(rig)
    lock = threading.Lock()
    claimed: dict[str, list[tuple[int, str]]] = defaultdict(list)  # job -> [(fence, lease)]
    done: list[str] = []
    give_up = time.monotonic() + 90

    def worker(n: int) -> None:
        while True:
            with lock:
                if len(done) == jobs:
                    return
            assert time.monotonic() < give_up, "the jobs never all completed"
            won = svc.claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            if won is None:  # every job is held right now; a release will requeue one
                time.sleep(0.005)
                continue
            lease = won.lease
            with lock:  # recorded before the release, so the job's next claim comes after
                claimed[lease.job_id].append((lease.fence, lease.id))
            me = lease_principal(lease.id)
            if lease.fence < rounds:
                svc.reports.release(me, lease.id, {"reason": f"w-{n} is busy"})
            else:
                svc.reports.complete(me, lease.id, {"outcome": "success"})
                with lock:
                    done.append(lease.job_id)

    run_threads(THREADS, worker)
    print(
        f"\nrelease/re-claim race: {jobs} jobs x {rounds} fences; conditional writes won "
        f"{counting.won}, lost {counting.lost}"
    )

    assert sorted(done) == sorted({x.job_id for x in seeded})
    for job_id, history in claimed.items():
        fences = [fence for fence, _ in history]
        assert fences == list(range(1, rounds + 1)), (job_id, history)
        assert len({lease_id for _, lease_id in history}) == rounds
        job = rig.svc.kernel.job_of(stored(rig, history[-1][1]))
        assert job is not None
        assert job.fence == rounds and job.lease_id == history[-1][1]
        assert job.attempt == 1 and job.recovery_count == 0  # a release uses no attempt
        for fence, lease_id in history:
            row = stored(rig, lease_id)
            assert row.fence == fence and row.attempt == 1
            if fence < rounds:
                assert (row.state, row.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
            else:
                assert row.state is LeaseState.COMPLETED
    # No release minted a second successor: the space holds exactly jobs x rounds leases.
    total, cursor = 0, None
    while True:
        page = rig.store.list_leases(SPACE, 100, cursor, None, None)
        total += len(page.leases)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert total == jobs * rounds


# ------------------------------------------------- the same races, interleaved by hand
#
# The threaded races above hit the narrow windows below only now and then; these tests put
# the other writer's commit exactly into the window, so the outcome is the same on every run.


class Interleaved:
    """The real store; `hook` runs once, just before the `at`-th get_job call (or, `after`,
    just after it has read)."""

    def __init__(
        self, inner: OneTable, at: int, hook: Callable[[], Any], after: bool = False
    ) -> None:
        self.inner = inner
        self.calls = 0
        self.at = at
        self.hook = hook
        self.after = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_job(self, job_id: str, consistent: bool = True) -> Any:
        self.calls += 1
        if self.calls == self.at and not self.after:
            self.hook()
        found = self.inner.get_job(job_id, consistent)
        if self.calls == self.at and self.after:
            self.hook()
        return found


def _held(rig: Rig) -> Lease:
    make_world(rig.svc)
    seed(rig, 1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
    return stored(rig, won.lease.id)


def _service_over(rig: Rig, store: Interleaved) -> Tenure:
    return compose(Rows.of(store, store), rig.clock, RandomIds())  # type: ignore[arg-type]


def test_expiry_losing_to_a_release_after_its_job_read_expires_nothing(rig: Rig) -> None:
    lease = _held(rig)
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None

    def release() -> object:
        return rig.svc.reports.release(lease_principal(lease.id), lease.id, {"reason": "bye"})

    # expire() reads the job (fence 1; a task's first job, from its lease and task), and
    # mints the successor from that read: the worker's release lands in between.
    sweeper = _service_over(rig, Interleaved(rig.store, at=1, hook=release, after=True))
    try:
        answer: Lease | TenureError | None = sweeper.recovery.expire(lease, pool)
    except TenureError as leaked:
        answer = leaked
    assert answer is None, f"expire answered {answer!r}; a lost race must answer None"
    row = stored(rig, lease.id)
    assert (row.state, row.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
    job = rig.svc.kernel.job_of(stored(rig, lease.id))
    assert job is not None and (job.fence, job.recovery_count) == (2, 0)


def test_release_losing_to_an_expiry_between_its_reads_is_refused_as_stale(rig: Rig) -> None:
    lease = _held(rig)
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None
    expire = lambda: rig.svc.recovery.expire(stored(rig, lease.id), pool)  # noqa: E731
    # release() reads the lease (held), then the job to mint the successor: the sweeper's
    # expiry lands in between.
    worker = _service_over(rig, Interleaved(rig.store, at=1, hook=expire))
    try:
        answer: Lease | TenureError = worker.reports.release(
            lease_principal(lease.id), lease.id, {"reason": "bye"}
        )
    except TenureError as refused:
        answer = refused
    assert isinstance(answer, StaleLease), f"release answered {answer!r}, not stale_lease"
    assert stored(rig, lease.id).state is LeaseState.LOST
    events = events_by_lease(rig, {lease.subject_id})
    assert events[lease.id]["lease.stale_report"] == 1


def test_a_repeated_release_landing_after_the_first_answers_the_first_answer(rig: Rig) -> None:
    lease = _held(rig)
    body = {"reason": "bye", "report_id": "r-1"}
    first: list[Lease] = []

    def first_sender() -> None:
        first.append(rig.svc.reports.release(lease_principal(lease.id), lease.id, dict(body)))

    # The second sender read the lease while it was held; the first sender's release lands
    # before the second one reads the job.
    second = _service_over(rig, Interleaved(rig.store, at=1, hook=first_sender))
    try:
        answer: Lease | TenureError = second.reports.release(
            lease_principal(lease.id), lease.id, body
        )
    except TenureError as refused:
        answer = refused
    assert isinstance(answer, Lease), f"the repeated release answered {answer!r}"
    assert lease_view(answer) == lease_view(first[0]) == lease_view(stored(rig, lease.id))
    job = rig.svc.kernel.job_of(stored(rig, lease.id))
    assert job is not None and job.fence == 2


# ---------------------------------------------------------------- final report vs expiry


@pytest.mark.parametrize("kind", ["complete", "release"])
def test_final_report_racing_expiry_ends_each_lease_exactly_one_way(rig: Rig, kind: str) -> None:
    n = 40
    make_world(rig.svc)
    seeded = seed(rig, n)
    for _ in seeded:
        assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is not None
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)  # every deadline has passed
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None
    ids = [x.id for x in seeded]
    both = threading.Barrier(2, timeout=60)
    answers: dict[str, Lease | TenureError] = {}
    expiries: dict[str, Lease | TenureError | None] = {}
    # Each side gets a head start of 0-18 ms on every other lease, so each wins some of them
    # and the leases without a head start race evenly.
    head_start = [(i // 2 % 10) * 0.002 for i in range(n)]
    report_waits = [d if i % 2 == 0 else 0.0 for i, d in enumerate(head_start)]
    expiry_waits = [d if i % 2 == 1 else 0.0 for i, d in enumerate(head_start)]
    report = rig.svc.reports.complete if kind == "complete" else rig.svc.reports.release
    body = {"outcome": "success"} if kind == "complete" else {"reason": "shutting down"}

    def reporter() -> None:
        for lease_id, delay in zip(ids, report_waits, strict=True):
            both.wait()
            time.sleep(delay)
            try:
                answers[lease_id] = report(lease_principal(lease_id), lease_id, dict(body))
            except TenureError as refused:
                answers[lease_id] = refused

    def expirer() -> None:
        for lease_id, delay in zip(ids, expiry_waits, strict=True):
            lease = stored(rig, lease_id)  # the sweeper read it due before deciding
            assert lease.state in REPORTABLE
            both.wait()
            time.sleep(delay)
            try:
                expiries[lease_id] = rig.svc.recovery.expire(lease, pool)
            except TenureError as failed:  # expire answers None when it loses; never raises
                expiries[lease_id] = failed

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(reporter), threads.submit(expirer)]:
            f.result(timeout=120)

    events = events_by_lease(rig, {x.subject_id for x in seeded})
    ending = "lease.completed" if kind == "complete" else "lease.released"
    outcome = Counter[str]()
    for lease_id in ids:
        row = stored(rig, lease_id)
        job = rig.svc.kernel.job_of(row)
        assert job is not None
        answer, expired = answers[lease_id], expiries[lease_id]
        if row.state is LeaseState.LOST:
            outcome["lost"] += 1
            assert isinstance(answer, StaleLease), f"{lease_id}: {kind} answered {answer!r}"
            assert isinstance(expired, Lease), f"{lease_id}: expire answered {expired!r}"
            assert expired.state is LeaseState.LOST
            assert job.fence == 2 and job.recovery_count == 1
            assert events[lease_id]["lease.lost"] == 1
            assert events[lease_id]["lease.stale_report"] == 1
            assert events[lease_id][ending] == 0
        else:
            outcome[kind] += 1
            assert isinstance(answer, Lease), f"{lease_id}: {kind} answered {answer!r}"
            assert answer.state is row.state
            assert expired is None, f"{lease_id}: expire answered {expired!r} after the report"
            assert job.recovery_count == 0
            assert events[lease_id][ending] == 1
            assert events[lease_id]["lease.lost"] == 0
            assert events[lease_id]["lease.stale_report"] == 0
            if kind == "complete":
                assert row.state is LeaseState.COMPLETED
                assert (job.fence, job.lease_id) == (1, lease_id)  # no successor
                continue
            assert (row.state, row.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
            assert job.fence == 2
        successor = stored(rig, job.lease_id)
        assert successor.id != lease_id
        assert (successor.state, successor.fence, successor.attempt) == (LeaseState.PENDING, 2, 1)
        assert events[successor.id]["lease.created"] == 1
    print(f"\n{kind} vs expiry: {dict(outcome)}")
    assert sum(outcome.values()) == n
    assert outcome["lost"] > 0 and outcome[kind] > 0, f"the race was one-sided: {outcome}"
    assert len(rig.store.queue_candidates(ALPHA, 100)) == n - outcome["complete"]


# ------------------------------------------------------------ one report, many senders


@pytest.mark.parametrize("kind", ["complete", "release"])
def test_the_same_final_report_sent_concurrently_is_answered_alike_and_lands_once(
    rig: Rig, kind: str
) -> None:
    leases, senders = 8, 6
    make_world(rig.svc)
    seeded = seed(rig, leases)
    held = [rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) for _ in seeded]
    svc, counting = real_time_service(rig)  # real time: two writes could not look alike
    report = svc.reports.complete if kind == "complete" else svc.reports.release
    answers: dict[str, list[Lease | TenureError]] = defaultdict(list)
    lock = threading.Lock()

    for i, won in enumerate(held):
        assert won is not None
        lease_id = won.lease.id
        body: dict[str, Any] = (
            {"outcome": "success", "details": {"n": i}, "report_id": f"r-{i}"}
            if kind == "complete"
            else {"reason": "draining", "report_id": f"r-{i}"}
        )
        together = threading.Barrier(senders, timeout=60)

        def send(
            _: int,
            lease_id: str = lease_id,
            body: dict[str, Any] = body,
            together: threading.Barrier = together,
        ) -> None:
            together.wait()
            try:
                answer: Lease | TenureError = report(lease_principal(lease_id), lease_id, body)
            except TenureError as refused:
                answer = refused
            with lock:
                answers[lease_id].append(answer)

        run_threads(senders, send)

    events = events_by_lease(rig, {x.subject_id for x in seeded})
    ending = "lease.completed" if kind == "complete" else "lease.released"
    for won in held:
        assert won is not None
        row = stored(rig, won.lease.id)
        got = answers[row.id]
        refused = [a for a in got if not isinstance(a, Lease)]
        assert refused == [], f"{row.id}: {len(refused)} of {senders} senders got {refused!r}"
        # The answer a client sees is the lease's HTTP view: the same bytes for every sender.
        assert {json.dumps(lease_view(a), sort_keys=True) for a in got} == {
            json.dumps(lease_view(row), sort_keys=True)
        }
        assert row.version == won.lease.version + 1  # one terminal transition
        assert events[row.id][ending] == 1
        job = rig.svc.kernel.job_of(row)
        assert job is not None
        if kind == "complete":
            assert row.state is LeaseState.COMPLETED and job.fence == 1
        else:
            assert (row.state, row.end_reason) == (LeaseState.CANCELLED, EndReason.RELEASED)
            assert job.fence == 2  # one successor, not one per sender
            assert events[job.lease_id]["lease.created"] == 1
    print(f"\nsame {kind} x{senders}: conditional writes won {counting.won}, lost {counting.lost}")
    assert counting.won == leases
    queued = rig.store.queue_candidates(ALPHA, 100)
    assert len(queued) == (leases if kind == "release" else 0)


def test_one_claim_retried_from_eight_threads_at_once_takes_one_lease(rig: Rig) -> None:
    # A worker whose claim answer was lost retries with the same claim_id; here eight such
    # retries land together. However they interleave, they take one lease between them, and
    # only the last token minted for it authenticates (each retry's new hash replaces the one
    # before, so a lost token is dead).
    make_world(rig.svc)
    seed(rig, 20)
    svc, _ = real_time_service(rig)

    def retry(_: int) -> Claimed | None:
        return svc.claims.claim(WORKER, ALPHA, "w1", "1.0", 0, None, claim_id="lost-answer")

    won = run_threads(THREADS, retry)
    assert all(x is not None for x in won)
    assert len({x.lease.id for x in won if x is not None}) == 1
    lease = stored(rig, won[0].lease.id if won[0] else "")
    assert lease.state is LeaseState.DISPATCHED
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.DISPATCHED, None)
    assert [x.id for x in page.leases] == [lease.id]  # no orphan to expire later
    live = [x for x in won if x is not None and hash_token(x.token) == lease.token_hash]
    assert len(live) == 1
