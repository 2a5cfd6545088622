"""Attacks on the reactor's trigger filter with the claim shapes the filter's replay suite
does not write, on DynamoDB Local: a claim that starts its lease in the same write (two
transitions, one row version apart), a claim retried under its claim_id (a fresh token, a
moved deadline), and a final report that claims the worker's next lease in the same call.
Each record with work for the reactor must pass the filter at every OutboundEvents setting,
and, delivered through the filter of the default setting, the timeline reads back every
transition once."""

from __future__ import annotations

from collections import Counter

from tenure.app.leases.handover import NextClaim
from tenure.domain import outbound as out
from tenure.domain.states import ReportKind
from tenure_cli.local.filters import reactor_patterns
from tenure_cli.local.streams import StreamPump

from tests.conformance.contract import ALPHA, SPACE, make_world, read_stream
from tests.conformance.test_reactor_filter_records import check_filter
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


def _filtered_pump(rig: Rig, setting: str) -> StreamPump:
    pump = StreamPump(None, rig.store.table, rig.store, patterns=reactor_patterns(None, setting))
    pump.ddb, pump.streams = rig.pump.ddb, rig.pump.streams
    return pump


def _types(rig: Rig, task_id: str) -> Counter[str]:
    return Counter(e.type for e in rig.store.timeline("task", task_id, None))


def test_claims_that_start_retry_or_hand_on_lose_no_event_to_the_filter(rig: Rig) -> None:
    make_world(rig.svc)
    pump = _filtered_pump(rig, out.ENDINGS)
    tasks = []
    for _ in range(4):
        task, _lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
        tasks.append(task.id)
        rig.clock.advance(1)
    # A claim that starts its lease at once.
    started = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, start=True)
    assert started is not None
    rig.clock.advance(1)
    # A claim retried under its claim_id (its first answer lost): the same lease again.
    first = rig.svc.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None, claim_id="c-1")
    assert first is not None
    rig.clock.advance(1)
    again = rig.svc.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None, claim_id="c-1")
    assert again is not None and again.lease.id == first.lease.id
    rig.clock.advance(1)
    # A completion that claims the worker's next lease in the same call.
    ask = NextClaim(worker_id="w-1", claim_id="n-1", start=True)
    ended, nxt = rig.svc.handover.report_then_claim(
        WORKER, started.lease.id, ReportKind.COMPLETE, {"outcome": "success"}, ask
    )
    assert ended.state.terminal and nxt is not None
    rig.clock.advance(1)
    for won in (first, nxt):
        rig.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {"result": {}})
        rig.clock.advance(1)
    pump.drain()
    records = read_stream(rig.pump.ddb, rig.pump.streams, rig.store.table)
    assert check_filter(rig.svc, records) > 0
    by_task = {task_id: _types(rig, task_id) for task_id in tasks}
    for won in (started, first, nxt):
        seen = by_task[won.lease.task_id or ""]
        assert seen["lease.created"] == 1 and seen["lease.claimed"] == 1, seen
        assert seen["lease.completed"] == 1, seen
    assert by_task[started.lease.task_id or ""]["lease.started"] == 1
    assert by_task[nxt.lease.task_id or ""]["lease.started"] == 1
    assert by_task[first.lease.task_id or ""]["lease.claim_retried"] == 1
