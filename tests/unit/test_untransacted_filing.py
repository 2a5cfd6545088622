"""A task's first lease written before its task, met by every kind of claim: claim-next, an
exact claim (`lease_id`), and a claim with a `claim_id`. None of them hands the lease out, or
points a claim record at it, before the task is there; the one that meets it once its filing
is taken for dead ends it. (The races are proven on DynamoDB Local in
tests/conformance/test_untransacted_filing.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.leases.orphans import ORPHAN_AFTER_MS
from tenure.app.ports import Change
from tenure.app.runs import RunControls
from tenure.domain.errors import InvalidTransition
from tenure.domain.model import Lease
from tenure.domain.outbound import ends_orphan, task_ending_of_lease
from tenure.domain.states import EndReason, LeaseState

from tests.conftest import WORKER
from tests.unit.support import POOL, Rig


def _dead_filing(rig: Rig, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Lease:
    """A filing whose process died after writing the lease, before the task."""
    real = rig.store.commit

    def dies(change: Change) -> None:
        if change.tasks and not change.leases:
            raise RuntimeError("the filing's process died here")
        real(change)

    monkeypatch.setattr(rig.store, "commit", dies)
    with pytest.raises(RuntimeError):
        rig.task(**kw)
    monkeypatch.undo()
    [lease] = [row.lease for row in rig.store.lease_rows.values()]
    assert lease.tp and lease.task_id is not None
    return lease


def _exact(rig: Rig, lease_id: str, **kw: Any) -> Any:
    return rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, lease_id=lease_id, **kw)


def test_an_exact_claim_waits_for_the_task_then_ends_a_dead_filings_lease(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = _dead_filing(rig, monkeypatch)
    assert _exact(rig, lease.id) is None  # 204: its task may still come
    assert rig.lease(lease.id).state is LeaseState.PENDING
    rig.advance(ORPHAN_AFTER_MS / 1000)
    with pytest.raises(InvalidTransition):  # it has ended: nothing to claim
        _exact(rig, lease.id)
    ended = rig.lease(lease.id)
    assert ended.state is LeaseState.CANCELLED and ended.fence == lease.fence
    assert rig.store.get_task(lease.task_id or "") is None
    assert rig.store.voided_tasks == {lease.task_id}
    assert rig.svc.kernel.counters["orphans_ended"] == 1
    # Nothing else is ended by the claims that come after.
    assert rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 0, None) is None
    assert rig.svc.kernel.counters["orphans_ended"] == 1


def test_a_claim_with_a_claim_id_points_no_record_at_a_lease_without_its_task(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = _dead_filing(rig, monkeypatch)
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1")
    assert won is None
    assert rig.store.claims == {}
    assert rig.lease(lease.id).state is LeaseState.PENDING


def test_a_claim_of_a_lease_filed_whole_takes_its_task_along_and_clears_the_mark(
    rig: Rig,
) -> None:
    task, lease = rig.task()
    assert lease is not None and lease.tp and rig.lease(lease.id).tp
    won = rig.claim()
    assert won.lease.id == lease.id and won.task == task
    assert rig.lease(lease.id).tp is None
    # Its payload is built from that task, with no read of its own.
    reads: list[str] = []
    real = rig.store.get_task

    def counted(task_id: str, consistent: bool = True) -> Any:
        reads.append(task_id)
        return real(task_id, consistent)

    rig.store.get_task = counted  # type: ignore[method-assign]
    bundle = rig.svc.payloads.claimed_payload(won.lease, won.task)
    assert bundle is not None and bundle["subject"]["title"] == task.title
    assert reads == []


def test_a_queue_timeout_ends_a_dead_filings_lease_as_an_orphan_once_its_filing_is_dead(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = _dead_filing(rig, monkeypatch, controls=RunControls(expires_in_seconds=1))
    rig.advance(2)
    assert rig.sweep().queue_timed_out == []  # its task may still be on its way
    assert rig.lease(lease.id).state is LeaseState.PENDING
    rig.advance(ORPHAN_AFTER_MS / 1000)
    assert rig.sweep().queue_timed_out == [lease.id]
    ended = rig.lease(lease.id)
    assert ended.state is LeaseState.CANCELLED and ended.end_reason is EndReason.QUEUE_TIMEOUT
    assert ends_orphan(ended) and task_ending_of_lease(lease, ended) is None
    assert rig.store.voided_tasks == {lease.task_id}  # its filing's task can never come now


def test_a_queue_timeout_of_a_filed_tasks_unclaimed_lease_still_ends_its_task(rig: Rig) -> None:
    _, lease = rig.task(controls=RunControls(expires_in_seconds=1))
    assert lease is not None and lease.tp
    rig.advance(2)
    assert rig.sweep().queue_timed_out == [lease.id]
    ended = rig.lease(lease.id)
    assert ended.tp and not ends_orphan(ended)
    assert task_ending_of_lease(lease, ended) == "task.cancelled"
    assert rig.store.voided_tasks == set()
