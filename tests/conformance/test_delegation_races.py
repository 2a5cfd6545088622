"""Delegation's bounds and stops on DynamoDB Local: filings racing from one lease token never
pass the pool's max_delegated_per_lease, filings racing from several leases of one tree never
pass its max_delegated_per_tree (each counted in the filing's own conditional write), and a
stopped creator stops all of its 230 children and their children, page by page through the
table's stream, each record doing a bounded amount of work.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from tenure.app.autonomy.delegation import STOP_PAGE
from tenure.app.ports import DELEGATED_CEILING, TREE_CEILING
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.errors import TenureError
from tenure.domain.model import Task
from tenure.domain.states import EndReason
from tenure.triggers.stream import handle
from tenure.wiring import RandomIds, SystemClock
from tenure_cli.local.engines import DynamoDBLocal
from tenure_cli.local.streams import StreamPump

from tests.conformance.bills import Bills
from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

# Each of THREADS threads tries this many filings: twice what the bound lets through.
TRIES_EACH = 2
BOUND = THREADS * TRIES_EACH // 2
# The 230 children of the stop's scenario are filed on this many threads (to save time).
FILERS = 5


def _claim(svc: Tenure, worker: str) -> str:
    won = svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None)
    assert won is not None
    return won.lease.id


def _delegate(svc: Tenure, lease_id: str, pool: str | None = None) -> Task:
    task, _ = svc.filing.create_task(
        lease_principal(lease_id), SPACE, "sub", None, None, {}, pool, None
    )
    return task


def _race(rig: Rig, leases: list[str]) -> tuple[list[str], list[str]]:
    """THREADS threads at once, each filing TRIES_EACH tasks with its lease of `leases` (round
    robin): the ids filed and the codes of the refusals."""
    services = [real_time_service(rig)[0] for _ in range(THREADS)]
    start = threading.Barrier(THREADS, timeout=60)

    def file(n: int) -> list[str]:
        start.wait()
        got = []
        for _ in range(TRIES_EACH):
            try:
                got.append(_delegate(services[n], leases[n % len(leases)]).id)
            except TenureError as refused:
                got.append(refused.code)
        return got

    answers = [a for each in run_threads(THREADS, file) for a in each]
    return [a for a in answers if a.startswith("task_")], [
        a for a in answers if not a.startswith("task_")
    ]


def _filed_by(rig: Rig, task_ids: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for task_id in task_ids:
        task = rig.store.get_task(task_id)
        assert task is not None, f"task {task_id} was answered but has no row"
        out[str(task.created_by_lease)] = out.get(str(task.created_by_lease), 0) + 1
    return out


def test_filings_racing_from_one_lease_never_pass_its_bound(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_delegated_per_lease": BOUND})
    rig.svc.filing.create_task(ADMIN, SPACE, "root", None, None, {}, ALPHA, None)
    creator = _claim(rig.svc, "w-root")
    filed, refused = _race(rig, [creator])
    assert len(filed) == BOUND, (filed, refused)
    assert set(refused) == {"validation_failed"}, refused
    assert _filed_by(rig, filed) == {creator: BOUND}
    assert rig.store.held_count(DELEGATED_CEILING, creator) == BOUND


def test_filings_racing_from_several_leases_of_one_tree_never_pass_its_bound(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(
        ADMIN, ALPHA, {"max_delegated_per_lease": 100, "max_delegated_per_tree": BOUND}
    )
    root_task, _ = rig.svc.filing.create_task(ADMIN, SPACE, "root", None, None, {}, ALPHA, None)
    root = _claim(rig.svc, "w-root")
    # Three children run and file too: four leases of one tree, racing for what is left.
    for _ in range(3):
        _delegate(rig.svc, root, pool=ALPHA)
    kids = [_claim(rig.svc, f"w-kid-{n}") for n in range(3)]
    filed, refused = _race(rig, [root, *kids])
    assert len(filed) == BOUND - 3, (filed, refused)
    assert set(refused) == {"validation_failed"}, refused
    for task_id in filed:
        task = rig.store.get_task(task_id)
        assert task is not None and task.delegation_root == root_task.id
    assert rig.store.held_count(TREE_CEILING, root_task.id) == BOUND


def _filing_cost(rig: Rig, bills: Bills, lease_id: str | None) -> tuple[float, float]:
    """(write units as AWS bills them, read units as DynamoDB Local reports them) of one
    filing into alpha, with the lease's token or an operator's."""
    rig.pump.drain()
    bills.writes.clear()
    read_before = rig.store.meter.read_units
    actor = ADMIN if lease_id is None else lease_principal(lease_id)
    rig.svc.filing.create_task(actor, SPACE, "metered", None, None, {}, ALPHA, None)
    read = rig.store.meter.read_units - read_before
    return sum(units for _, units in bills.writes), read


def test_what_the_bounds_cost_a_delegated_filing_and_an_operators(
    rig: Rig, ddb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    rig.svc.filing.create_task(ADMIN, SPACE, "root", None, None, {}, ALPHA, None)
    creator = _claim(rig.svc, "w-root")
    bills = Bills(rig, ddb_local.endpoint)
    for _ in range(2):  # warm: the counters' rows exist from the first filing on
        _filing_cost(rig, bills, creator)
    operator = _filing_cost(rig, bills, None)
    counted = _filing_cost(rig, bills, creator)
    with monkeypatch.context() as uncounted:
        uncounted.setattr(rig.svc.filing, "bounds", ())
        uncounted.setattr(rig.svc.delegation, "_root_of", lambda lease: lease.task_id)
        bare = _filing_cost(rig, bills, creator)
    operator_bare = _filing_cost(rig, bills, None)
    print(
        f"\nfiling (write units, read units): operator {operator}, delegated {counted}, "
        f"delegated without the bounds {bare}"
    )
    # Two small counter rows in the transaction, each billed twice as a transaction's item.
    assert counted[0] - bare[0] == 4
    # The tree's top, from the filing lease's task: one eventually consistent read.
    assert counted[1] - bare[1] == 0.5
    # An operator's filing is untouched.
    assert operator == operator_bare


class OneAtATime(StreamPump):
    """Delivers each stream record on its own, noting what the reactor read and wrote for it;
    it reads on from where the rig's own pump has got to."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(rig.pump.ddb.meta.endpoint_url, rig.pump.table, rig.store)
        self.iterators = dict(rig.pump.iterators)
        self.service = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
        self.meter = rig.store.meter
        # (items read, write calls, read units, write units as DynamoDB Local reports them)
        self.per_record: list[tuple[int, int, float, float]] = []

    def _deliver(self, batch: list[dict[str, Any]]) -> None:
        for record in batch:
            read, writes = self.meter.items_read, self._writes()
            units = (self.meter.read_units, self.meter.write_units)
            answer = handle({"Records": [record]}, None, self.store, self.service)
            assert not answer.get("batchItemFailures"), answer
            self.per_record.append(
                (
                    self.meter.items_read - read,
                    self._writes() - writes,
                    self.meter.read_units - units[0],
                    self.meter.write_units - units[1],
                )
            )

    def _writes(self) -> int:
        reads = ("get", "query", "batch_get")
        return sum(n for op, n in self.meter.calls.items() if op not in reads)


def test_a_stop_reaches_all_230_children_and_their_children_page_by_page(rig: Rig) -> None:
    make_world(rig.svc)
    rig.svc.pools.update_pool(ADMIN, ALPHA, {"max_delegated_per_lease": 300})
    rig.svc.filing.create_task(ADMIN, SPACE, "root", None, None, {}, ALPHA, None)
    root = _claim(rig.svc, "w-root")
    rig.svc.reports.start(lease_principal(root), root)
    filers = [real_time_service(rig)[0] for _ in range(FILERS)]
    kids = [
        task_id
        for each in run_threads(
            FILERS, lambda n: [_delegate(filers[n], root, pool=ALPHA).id for _ in range(46)]
        )
        for task_id in each
    ]
    assert len(kids) == 230
    kid = _claim(filers[0], "w-kid")  # on the clock the children were filed by
    grandkids = [_delegate(filers[0], kid, pool=ALPHA).id for _ in range(5)]
    rig.pump.drain()
    pump = OneAtATime(rig)
    rig.svc.operator.cancel(ADMIN, root)
    rig.svc.reports.fail(lease_principal(root), root, {"error": "asked to stop"})
    pump.drain()
    still_open = []
    for task_id in [*kids, *grandkids]:
        task = rig.store.get_task(task_id)
        run = rig.svc.kernel.newest_lease(task) if task else None
        assert run is not None
        if not run.state.terminal:
            still_open.append(task_id)
        else:
            assert run.end_reason is EndReason.PARENT_STOPPED, (task_id, run.end_reason)
    assert still_open == []
    reads, writes, read_units, write_units = (max(n) for n in zip(*pump.per_record, strict=True))
    print(
        f"\n{len(pump.per_record)} stream records; one at most read {reads} items "
        f"({read_units:g} read units) and made {writes} writes ({write_units:g} write units)"
    )
    # A page: per child its task, job and lease read and one write, and the next page's mark.
    assert reads <= 4 * STOP_PAGE + 10
    assert writes <= STOP_PAGE + 5
