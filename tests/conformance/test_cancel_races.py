"""Cancelling tasks on DynamoDB Local, with threads: a cancel racing a completion ends the task
one way only; a cancel racing claims lets no claim take a lease after the cancel of its task
committed; a cancel racing an expiry leaves nothing claimable; a subtree larger than one
request is finished by the stream, also after a crash between the two, each stream record
doing a bounded page; and what a cancel costs per task.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from tenure.app.ports import Change
from tenure.app.tasks.cancel import CANCEL_BUDGET, WALK_PAGE, Cancellation
from tenure.app.tasks.filing import TaskLinks
from tenure.app.tenure import Tenure
from tenure.domain.errors import InvalidTransition, TenureError
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease, Task, TaskGraph
from tenure.domain.states import REPORTABLE, LeaseState, Revoke
from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.bills import Bills
from tests.conformance.contract import ALPHA, SPACE, TOLERATION_MS, make_world
from tests.conformance.test_delegation_races import OneAtATime
from tests.conformance.test_races import THREADS, real_time_service, run_threads, seed, stored
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

WHY = "called off"


def _held(rig: Rig, n: int, start: bool = True) -> list[Lease]:
    seeded = seed(rig, n)
    for _ in seeded:
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
        assert won is not None
        if start:
            rig.svc.reports.start(lease_principal(won.lease.id), won.lease.id)
    return [stored(rig, x.id) for x in seeded]


def _task(rig: Rig, task_id: str) -> Task:
    task = rig.store.get_task(task_id)
    assert task is not None
    return task


def _lease_events(rig: Rig, task_ids: set[str]) -> dict[str, Counter[str]]:
    rig.pump.drain()
    found: dict[str, Counter[str]] = {}
    for task_id in task_ids:
        for event in rig.store.timeline("task", task_id, None):
            found.setdefault(event.lease_id or task_id, Counter())[event.type] += 1
    return found


def test_a_cancel_racing_a_completion_ends_the_task_one_way_only(rig: Rig) -> None:
    n = 30
    make_world(rig.svc)
    leases = _held(rig, n)
    both = threading.Barrier(2, timeout=60)
    # Each side gets a head start of 0-120 ms on every other task (a cancel reads more before
    # its write than a completion does, and a loaded machine slows both), so each wins some
    # and those without a head start race evenly.
    head_start = [(i // 2 % 5) * 0.03 for i in range(n)]
    completions: dict[str, Lease | TenureError] = {}
    cancels: dict[str, object] = {}
    finisher, canceller = real_time_service(rig)[0], real_time_service(rig)[0]

    def complete() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 0 else 0)
            try:
                completions[lease.id] = finisher.reports.complete(
                    lease_principal(lease.id), lease.id, {"outcome": "success"}
                )
            except TenureError as refused:
                completions[lease.id] = refused

    def cancel() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 1 else 0)
            try:
                cancels[lease.id] = canceller.cancellation.cancel(
                    ADMIN, str(lease.task_id), WHY, True
                )
            except TenureError as refused:
                cancels[lease.id] = refused

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(complete), threads.submit(cancel)]:
            f.result(timeout=120)
    events = _lease_events(rig, {str(x.task_id) for x in leases})
    outcome = Counter[str]()
    for lease in leases:
        task_id = str(lease.task_id)
        row, status = stored(rig, lease.id), rig.svc.graph.get_task(ADMIN, task_id).status.value
        on_task, on_lease = events.get(task_id, Counter()), events[lease.id]
        ends = on_lease["lease.completed"] + on_lease["lease.cancelled"]
        assert ends == 1, (lease.id, on_lease)  # one terminal event
        if isinstance(cancels[lease.id], InvalidTransition):
            outcome["completed"] += 1
            assert (row.state, status) == (LeaseState.COMPLETED, "completed")
            assert on_task["task.cancelled"] == 0
        else:
            outcome["cancelled"] += 1
            assert (row.state, status) == (LeaseState.CANCELLED, "cancelled"), lease.id
            assert on_task["task.cancelled"] == 1 and on_lease["lease.completed"] == 0
            assert rig.store.get_graph(task_id).succeeded_at is None  # no success counted
    print(f"\ncancel vs completion: {dict(outcome)}")
    assert sum(outcome.values()) == n
    assert outcome["completed"] > 0 and outcome["cancelled"] > 0, f"one-sided: {outcome}"


def test_no_claim_takes_a_lease_after_the_cancel_of_its_task_committed(rig: Rig) -> None:
    make_world(rig.svc)
    top, _ = rig.svc.filing.create_task(ADMIN, SPACE, "top", None, None, {}, ALPHA, None)
    kids = [
        rig.svc.filing.create_task(
            ADMIN, SPACE, "kid", None, None, {}, ALPHA, None, links=TaskLinks(parent_id=top.id)
        )[0]
        for _ in range(40)
    ]
    services = [real_time_service(rig)[0] for _ in range(THREADS + 1)]
    start = threading.Barrier(THREADS + 1, timeout=60)
    stop = threading.Event()

    def claim(n: int) -> list[Lease]:
        start.wait()
        won: list[Lease] = []
        while not stop.is_set():
            got = services[n].claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            if got is not None:
                won.append(got.lease)
        return won

    def cancel() -> None:
        start.wait()
        time.sleep(0.02)  # a few claims first: the cancel meets held leases and pending ones
        services[THREADS].cancellation.cancel(ADMIN, top.id, WHY, True)
        stop.set()

    with ThreadPoolExecutor(THREADS + 1) as pool:
        claimers = [pool.submit(claim, n) for n in range(THREADS)]
        pool.submit(cancel).result(timeout=120)
        claimed = [lease for f in claimers for lease in f.result(timeout=120)]
    rig.pump.drain()
    assert services[0].claims.claim(WORKER, ALPHA, "w-late", "1.0", 0, None) is None
    for lease in claimed:
        task = _task(rig, str(lease.task_id))
        assert task.cancelled is not None
        # Claimed before its task's cancel committed: the cancel then asked it to stop.
        assert lease.claimed_at is not None and lease.claimed_at < task.cancelled["at"]
        row = stored(rig, lease.id)
        assert (row.state, row.revoke) == (LeaseState.CANCELLING, Revoke.CANCEL), lease.id
    for task in [top, *kids]:
        row = _task(rig, task.id)
        assert row.cancelled is not None
        lease = rig.svc.kernel.newest_lease(row)
        assert lease is not None
        assert lease.state in (LeaseState.CANCELLED, LeaseState.CANCELLING), lease.state
    print(f"\n{len(claimed)} of 41 leases claimed before the cancel reached them")
    assert len(claimed) < 41


def test_a_cancel_racing_an_expiry_leaves_nothing_to_claim(rig: Rig) -> None:
    n = 30
    make_world(rig.svc)
    leases = _held(rig, n)
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)  # every deadline passed
    pool = rig.store.get_pool(ALPHA)
    assert pool is not None
    both = threading.Barrier(2, timeout=60)
    head_start = [(i // 2 % 5) * 0.03 for i in range(n)]  # as for the completion's race
    expired: dict[str, object] = {}

    def expire() -> None:
        for i, lease in enumerate(leases):
            seen = stored(rig, lease.id)
            assert seen.state in REPORTABLE
            both.wait()
            time.sleep(head_start[i] if i % 2 == 0 else 0)
            expired[lease.id] = rig.svc.recovery.expire(seen, pool)

    def cancel() -> None:
        for i, lease in enumerate(leases):
            both.wait()
            time.sleep(head_start[i] if i % 2 == 1 else 0)
            rig.svc.cancellation.cancel(ADMIN, str(lease.task_id), WHY, False)

    with ThreadPoolExecutor(2) as threads:
        for f in [threads.submit(cancel), threads.submit(expire)]:
            f.result(timeout=120)
    outcome = Counter[str]()
    for lease in leases:
        row, task = stored(rig, lease.id), _task(rig, str(lease.task_id))
        assert task.cancelled is not None
        newest = rig.svc.kernel.newest_lease(task)
        assert newest is not None
        if row.state is LeaseState.LOST:
            outcome["expired first"] += 1  # its successor was pending: the cancel ended it
            assert newest.id != row.id and newest.state is LeaseState.CANCELLED
            assert newest.fence == 2
        else:
            outcome["cancelled first"] += 1  # asked to stop; silence ends it cancelled
            assert row.state in (LeaseState.CANCELLING, LeaseState.CANCELLED), row.state
            assert row.revoke is Revoke.CANCEL or row.state is LeaseState.CANCELLED
            assert newest.id == row.id
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None) is None
    rig.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
    for lease in leases:
        row = stored(rig, lease.id)
        if row.state is LeaseState.CANCELLING:
            ended = rig.svc.recovery.expire(row, pool)
            assert ended is not None and ended.state is LeaseState.CANCELLED
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-3", "1.0", 0, None) is None
    print(f"\ncancel vs expiry: {dict(outcome)}")
    assert outcome["expired first"] > 0 and outcome["cancelled first"] > 0, outcome


def _big_tree(rig: Rig, children: int, grandchildren: int) -> tuple[Task, list[str]]:
    make_world(rig.svc)
    top, _ = rig.svc.filing.create_task(ADMIN, SPACE, "top", None, None, {}, None, None)
    filers = [real_time_service(rig)[0] for _ in range(4)]

    def file(n: int) -> list[str]:
        return [
            filers[n]
            .filing.create_task(
                ADMIN, SPACE, "kid", None, None, {}, ALPHA, None, links=TaskLinks(parent_id=top.id)
            )[0]
            .id
            for _ in range(children // 4)
        ]

    kids = [t for each in run_threads(4, file) for t in each]
    grand = [
        rig.svc.filing.create_task(
            ADMIN, SPACE, "grand", None, None, {}, ALPHA, None, links=TaskLinks(parent_id=k)
        )[0].id
        for k in kids[-grandchildren:]
    ]
    rig.pump.drain()
    return top, [*kids, *grand]


def _all_reached(rig: Rig, top: Task, below: list[str]) -> None:
    for task_id in below:
        task = _task(rig, task_id)
        assert task.cancelled is not None, task_id
        assert task.cancelled["root"] == top.id and task.cancelled["reason"] == WHY
        lease = rig.svc.kernel.newest_lease(task)
        assert lease is not None and lease.state is LeaseState.CANCELLED
    assert rig.store.get_scheduler().cancelled == frozenset()
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is None


def test_a_subtree_beyond_one_request_is_finished_by_the_stream_page_by_page(rig: Rig) -> None:
    top, below = _big_tree(rig, 240, 10)
    pump = OneAtATime(rig)
    done = rig.svc.cancellation.cancel(ADMIN, top.id, WHY, True)
    assert done.cancelled == CANCEL_BUDGET
    assert done.remaining >= 240 - (CANCEL_BUDGET - 1)
    # Not reached yet, yet they read cancelled and nothing claims them.
    assert {rig.svc.graph.get_task(ADMIN, t).status.value for t in below} == {"cancelled"}
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is None
    pump.drain()
    _all_reached(rig, top, below)
    reads, writes, read_units, write_units = (max(n) for n in zip(*pump.per_record, strict=True))
    print(
        f"\n{len(pump.per_record)} stream records; one at most read {reads} items "
        f"({read_units:g} read units) and made {writes} writes ({write_units:g} write units)"
    )
    # A page: per child its task, graph row, job and lease read, one write; and the page's mark.
    assert reads <= 5 * WALK_PAGE + 10
    assert writes <= WALK_PAGE + 5


class Crash(Exception):
    """The request's process dies after its top's commit."""


def test_a_crash_after_the_tops_commit_is_finished_by_the_stream(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, below = _big_tree(rig, 40, 4)

    def crash(self: Cancellation, root: str, walk: object) -> None:
        raise Crash(root)

    with monkeypatch.context() as dying:
        dying.setattr(Cancellation, "_walk_down", crash)
        with pytest.raises(Crash):
            rig.svc.cancellation.cancel(ADMIN, top.id, WHY, True)
    assert _task(rig, top.id).cancelled is not None
    assert all(_task(rig, t).cancelled is None for t in below)  # nothing below written yet
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is None  # yet held
    rig.pump.drain()
    _all_reached(rig, top, below)


def test_what_a_cancel_costs_per_task(rig: Rig, ddb_local: DynamoDBLocal) -> None:
    """Write units as AWS bills them, read units as DynamoDB Local reports them: a queued
    task's cancel, and the cost of each child a subtree cancel reaches in the request."""
    make_world(rig.svc)
    bills = Bills(rig, ddb_local.endpoint)

    def metered(fn: object) -> tuple[float, float]:
        rig.pump.drain()
        bills.writes.clear()
        before = rig.store.meter.read_units
        fn()  # type: ignore[operator]
        rig.pump.drain()  # and what the stream's reactions to it read and write
        return sum(u for _, u in bills.writes), rig.store.meter.read_units - before

    single, _ = rig.svc.filing.create_task(ADMIN, SPACE, "one", None, None, {}, ALPHA, None)
    one = metered(lambda: rig.svc.cancellation.cancel(ADMIN, single.id, WHY, False))
    costs = {}
    for size in (10, 20):
        top, _ = rig.svc.filing.create_task(ADMIN, SPACE, "top", None, None, {}, ALPHA, None)
        for _ in range(size):
            rig.svc.filing.create_task(
                ADMIN, SPACE, "kid", None, None, {}, ALPHA, None, links=TaskLinks(parent_id=top.id)
            )
        costs[size] = metered(lambda t=top: rig.svc.cancellation.cancel(ADMIN, t.id, WHY, True))
    per_child = tuple((costs[20][i] - costs[10][i]) / 10 for i in range(2))
    print(
        f"\ncancel of a queued task: {one[0]:g} write units, {one[1]:g} read units; "
        f"each child a subtree cancel reaches: {per_child[0]:g} write units, "
        f"{per_child[1]:g} read units; a top with 10 children in all: {costs[10]}"
    )
    # The task row and its lease in one transaction (twice their units as a transaction).
    assert one[0] <= 8
    assert per_child[0] <= 10


def test_no_claim_answer_hands_out_a_lease_under_a_subtree_cancel_that_committed_first(
    rig: Rig,
) -> None:
    """Claimers hammer the queued descendants of a three-level tree while its top is cancelled
    with `subtree`. A claim reads the scheduler row (whose `cancelled` set holds every lease
    under the top back) before it writes its lease, so one that read it just before the top's
    commit writes just after it, while its task already reads cancelled and the walk has not
    reached it. Every claim write is held 80 ms after that read, and one due while the cancel
    is under way waits for its commit, so such claims are sure to happen however slow the
    machine; each notes whether the top's commit had returned before its own write began
    (then it surely committed after). None of those may come back as a claim answer;
    each task still records `task.cancelled` once and each lease ends once."""
    make_world(rig.svc)
    top, _ = rig.svc.filing.create_task(ADMIN, SPACE, "top", None, None, {}, None, None)

    def child_of(parent: str, title: str) -> Task:
        return rig.svc.filing.create_task(
            ADMIN, SPACE, title, None, None, {}, ALPHA, None, links=TaskLinks(parent_id=parent)
        )[0]

    mids = [child_of(top.id, "mid") for _ in range(4)]
    leaves = [child_of(m.id, "leaf") for m in mids for _ in range(12)]
    below = {t.id for t in [*mids, *leaves]}
    rig.pump.drain()
    services = [real_time_service(rig)[0] for _ in range(THREADS + 1)]
    cancelling = threading.Event()  # the top's cancel has begun
    committed = threading.Event()  # the top's cancel has committed
    late: dict[str, bool] = {}  # claimed lease id -> its write began after that commit
    lock = threading.Lock()

    def held_claims(svc: Tenure) -> None:
        real = svc.kernel.commit

        def commit(change: Change) -> None:
            claims = [
                w.new.id
                for w in change.leases
                if w.seen is not None
                and w.seen.state is LeaseState.PENDING
                and w.new.state in REPORTABLE
            ]
            if claims:
                time.sleep(0.08)  # between the claim's read of the scheduler row and its write
                if cancelling.is_set():  # a write due while the cancel commits waits for it
                    committed.wait(timeout=10)
                after = committed.is_set()
            real(change)
            if claims:
                with lock:
                    late.update(dict.fromkeys(claims, after))

        svc.kernel.commit = commit  # type: ignore[method-assign]

    def tells_commit(svc: Tenure) -> None:
        real = svc.kernel.commit

        def commit(change: Change) -> None:
            real(change)
            if any(h.set_name == "cancelled" and h.add for h in change.holds):
                committed.set()

        svc.kernel.commit = commit  # type: ignore[method-assign]

    for svc in services[:THREADS]:
        held_claims(svc)
    canceller = services[THREADS]
    tells_commit(canceller)
    # The request reaches nothing below the top: as in a tree larger than one request, the
    # stream's walk reaches the rest later, and the claims race that stretch.
    canceller.cancellation._walk_down = lambda root, walk: None  # type: ignore[method-assign]
    start = threading.Barrier(THREADS + 1, timeout=60)
    stop = threading.Event()
    some_claimed = threading.Event()

    def claim(n: int) -> list[Lease]:
        start.wait()
        won: list[Lease] = []
        while not stop.is_set():
            got = services[n].claims.claim(WORKER, ALPHA, f"w-{n}", "1.0", 0, None)
            if got is not None:
                won.append(got.lease)
                with lock:
                    if sum(1 for x in late.values() if not x) >= THREADS:
                        some_claimed.set()
        return won

    def cancel() -> None:
        start.wait()
        # Some claims first: the cancel meets held leases and pending ones.
        assert some_claimed.wait(timeout=60)
        cancelling.set()
        canceller.cancellation.cancel(ADMIN, top.id, WHY, True)
        time.sleep(0.3)  # claims go on after it, until the walk comes
        stop.set()

    with ThreadPoolExecutor(THREADS + 1) as pool:
        claimers = [pool.submit(claim, n) for n in range(THREADS)]
        pool.submit(cancel).result(timeout=120)
        answered = [lease for f in claimers for lease in f.result(timeout=120)]
    raced = [x for x, after in late.items() if after]
    handed_out = [x.id for x in answered if late.get(x.id)]
    print(
        f"\n{len(answered)} claim answers, {len(raced)} claim writes began after the top's "
        f"cancel committed, {len(handed_out)} of those handed out"
    )
    assert raced, "no claim raced the cancel: the test proves nothing"
    assert handed_out == []
    rig.pump.drain()
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-late", "1.0", 0, None) is None
    events = _lease_events(rig, below)
    for task_id in below:
        task = _task(rig, task_id)
        assert task.cancelled is not None and task.cancelled["root"] == top.id, task_id
        assert events[task_id]["task.cancelled"] == 1, task_id
    for lease in answered:  # claimed before the cancel committed: asked to stop
        row = stored(rig, lease.id)
        assert (row.state, row.revoke) == (LeaseState.CANCELLING, Revoke.CANCEL), lease.id
    for lease_id in raced:  # written after it: never handed out, ended, and only once
        row = stored(rig, lease_id)
        assert row.state is LeaseState.CANCELLED, lease_id
        assert events[lease_id]["lease.cancelled"] == 1, lease_id
    for counts in events.values():
        ends = sum(counts[t] for t in ("lease.cancelled", "lease.killed", "lease.lost"))
        assert ends <= 1


def test_what_the_subtree_cancel_check_costs_a_claim(rig: Rig) -> None:
    """Read units as DynamoDB Local reports them, per claim: a task with no parent reads
    nothing more than before; a task under others reads its ancestors' graph rows once its
    write has committed (one consistent unit per small row); no write is added."""
    make_world(rig.svc)

    def filed(parent: str | None) -> Task:
        links = TaskLinks(parent_id=parent)
        return rig.svc.filing.create_task(
            ADMIN, SPACE, "t", None, None, {}, ALPHA, None, links=links
        )[0]

    def claim_units() -> tuple[float, float]:
        rig.pump.drain()
        before, writes = rig.store.meter.read_units, rig.store.meter.write_units
        assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is not None
        return rig.store.meter.read_units - before, rig.store.meter.write_units - writes

    ancestor_reads: list[list[str]] = []
    get_graphs = rig.store.get_graphs

    def spied(task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        if consistent:
            ancestor_reads.append(list(task_ids))
        return get_graphs(task_ids, consistent)

    rig.store.get_graphs = spied  # type: ignore[method-assign]
    filed(None)
    claim_units()  # the first claim reads what later ones find cached
    top = filed(None)
    alone = claim_units()
    assert ancestor_reads == []  # a task with no parent reads no graph row
    child = filed(top.id)
    one = claim_units()
    grandchild = filed(child.id)
    two = claim_units()
    print(f"\nclaim (read units, writes): no parent {alone}, 1 ancestor {one}, 2 ancestors {two}")
    assert one[1] == two[1] == alone[1]
    # A task filed on its own is claimed with a read of its task (its lease is filed ahead of
    # it), which a child, filed with its parent's counters in one transaction, does without:
    # so the figures are compared between children, and the reads are counted by row.
    assert ancestor_reads == [[top.id], [top.id, child.id]]
    assert two[0] - one[0] == 1
    assert grandchild.ancestors == (top.id, child.id)
