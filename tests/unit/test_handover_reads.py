"""What a final report that claims the next lease (`complete`/`fail` with `next`) reads, and
that what it no longer reads twice still holds a paused scheduler, pool or space at once.

The report's pick and its claim's first try are one look at the queue: the scheduler row is
read once for both, as a claim reads it once per look. Every later look of a claim that
waits reads it afresh."""

from __future__ import annotations

import inspect
from typing import Any

from tenure.app.leases.claims import CONTENDED_CANDIDATES
from tenure.app.leases.handover import NextClaim
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind

from tests.unit.support import ADMIN, POOL, SPACE, WORKER, Rig


def _holding(rig: Rig, titles: tuple[str, ...] = ("a", "b")) -> Lease:
    """Tasks filed on the rig's pool and the first one claimed by the worker token."""
    for title in titles:
        rig.task(title=title)
    won = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None)
    assert won is not None
    return won.lease


def _complete_next(rig: Rig, lease: Lease, **ask: Any) -> tuple[Lease, Any]:
    claim = NextClaim(worker_id="w1", claim_id=f"next-of-{lease.id}", **ask)
    return rig.svc.handover.report_then_claim(WORKER, lease.id, ReportKind.COMPLETE, {}, claim)


def _counted(rig: Rig, name: str) -> list[Any]:
    """Each call of the store's `name` from now on, with its keyword arguments."""
    calls: list[Any] = []
    real = getattr(rig.store, name)

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(dict(inspect.signature(real).bind(*args, **kw).arguments))
        return real(*args, **kw)

    setattr(rig.store, name, counted)
    return calls


def _pending(rig: Rig) -> list[Lease]:
    return [r.lease for r in rig.store.lease_rows.values() if r.lease.state is LeaseState.PENDING]


def test_a_handover_reads_the_scheduler_row_once_for_its_pick_and_its_claim() -> None:
    rig = Rig()
    lease = _holding(rig)
    reads = _counted(rig, "get_scheduler")
    ended, won = _complete_next(rig, lease)
    assert ended.state is LeaseState.COMPLETED
    assert won is not None and won.lease.state is LeaseState.DISPATCHED
    assert len(reads) == 1, reads


def test_a_paused_scheduler_holds_the_next_claim_of_a_report_at_once() -> None:
    rig = Rig()
    lease = _holding(rig)
    rig.svc.scheduler.pause_scheduler(ADMIN)
    ended, won = _complete_next(rig, lease)
    assert ended.state is LeaseState.COMPLETED, "the report itself is applied"
    assert won is None
    assert len(_pending(rig)) == 1, "the next lease stays queued"


def test_a_scheduler_resumed_while_the_next_claim_waits_is_read_afresh() -> None:
    rig = Rig()
    lease = _holding(rig)
    rig.svc.scheduler.pause_scheduler(ADMIN)
    reads = _counted(rig, "get_scheduler")
    sleep = rig.clock.sleep

    def resumed_during_the_rest(seconds: float) -> None:
        sleep(seconds)
        if rig.store.scheduler.paused:
            rig.svc.scheduler.resume_scheduler(ADMIN)

    rig.clock.sleep = resumed_during_the_rest  # type: ignore[method-assign]
    _, won = _complete_next(rig, lease, wait_seconds=2)
    assert won is not None, "the look after the resume read the row again and claimed"
    assert len(reads) >= 2, reads


def test_a_paused_pool_holds_the_next_claim_of_a_report_at_once() -> None:
    rig = Rig()
    lease = _holding(rig)
    rig.svc.pools.pause_pool(ADMIN, POOL)
    _, won = _complete_next(rig, lease)
    assert won is None
    assert len(_pending(rig)) == 1


def test_an_archived_space_holds_the_next_claim_of_a_report_at_once() -> None:
    rig = Rig()
    lease = _holding(rig)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    _, won = _complete_next(rig, lease)
    assert won is None
    assert len(_pending(rig)) == 1


# ------------------------------------------------- the pick reads the one head it takes


def test_a_handover_s_pick_reads_one_queue_head_when_no_rival_claims_in_the_pool() -> None:
    rig = Rig()
    lease = _holding(rig, ("a", "b", "c", "d"))
    reads = _counted(rig, "queue_candidates")
    _, won = _complete_next(rig, lease)
    assert won is not None
    assert won.lease.task_id == _task_titled(rig, "b"), "the oldest head, as before"
    assert [call["limit"] for call in reads] == [1], reads


def test_a_paused_task_at_the_head_does_not_stop_the_handover_claiming_the_next() -> None:
    rig = Rig()
    lease = _holding(rig, ("a", "b", "c"))
    rig.svc.graph.pause_task(ADMIN, _task_titled(rig, "b"))
    _, won = _complete_next(rig, lease)
    assert won is not None and won.lease.task_id == _task_titled(rig, "c")


def test_while_rivals_claim_in_the_pool_the_pick_still_spreads_over_many_heads() -> None:
    rig = Rig()
    lease = _holding(rig, ("a", "b", "c", "d"))
    rig.svc.claims.candidates.contend(POOL)  # a race lost in this pool a moment ago
    reads = _counted(rig, "queue_candidates")
    _, won = _complete_next(rig, lease)
    assert won is not None
    assert reads and reads[0]["limit"] == CONTENDED_CANDIDATES, reads


def _task_titled(rig: Rig, title: str) -> str:
    return next(t.id for t in rig.store.tasks.values() if t.title == title)
