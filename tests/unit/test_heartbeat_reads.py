"""Heartbeats read leases eventually consistent, and judge anything but the common answer on
a consistent read: a copy that lags behind the table never refuses a held lease, never keeps
an expired one alive, and only delays a revoke by as long as it lags."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from tenure.domain.errors import StaleLease, TenureError
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, Revoke

from tests.unit.support import MEMBER, WORKER, Rig, as_lease

TOLERATION_S = 300  # the pool's default


class Lagging:
    """Eventually consistent reads answer from `copies` (what a replica behind the table still
    holds) where one is set; consistent reads answer from the table. Every read is counted."""

    def __init__(self, rig: Rig) -> None:
        self.copies: dict[str, Lease] = {}
        self.consistent: list[str] = []
        self.eventual: list[str] = []
        table = rig.store.get_leases

        def get_leases(lease_ids: Iterable[str], consistent: bool = True) -> dict[str, Lease]:
            ids = list(lease_ids)
            (self.consistent if consistent else self.eventual).extend(ids)
            found = table(ids)
            if not consistent:
                found.update({i: self.copies[i] for i in ids if i in self.copies})
            return found

        rig.store.get_leases = get_leases  # type: ignore[method-assign]

    def behind(self, lease: Lease) -> None:
        self.copies[lease.id] = lease


@pytest.fixture
def lag(rig: Rig) -> Lagging:
    return Lagging(rig)


def _beat(rig: Rig, lease: Lease) -> object:
    [(_, _, answer)] = rig.svc.reports.worker_heartbeat(WORKER, "w1", [(lease.id, lease.fence)])
    return answer


def test_a_running_lease_with_nothing_to_write_is_answered_from_the_cheap_read(
    rig: Rig, lag: Lagging
) -> None:
    won = rig.claimed()
    assert not isinstance(_beat(rig, won.lease), TenureError)  # the first beat starts it
    lag.consistent.clear()
    lag.eventual.clear()
    rig.advance(10)
    answer = _beat(rig, rig.lease(won.lease.id))
    assert not isinstance(answer, TenureError)
    assert lag.eventual == [won.lease.id] and lag.consistent == []


def test_a_lease_just_claimed_is_held_though_the_copy_read_still_shows_it_queued(
    rig: Rig, lag: Lagging
) -> None:
    rig.task()
    queued = next(iter(rig.store.lease_rows.values())).lease
    assert queued.state is LeaseState.PENDING
    lag.behind(queued)  # the replica has not seen the claim yet
    won = rig.claim()
    answer = _beat(rig, won.lease)
    assert not isinstance(answer, TenureError), answer
    assert rig.lease(won.lease.id).state is LeaseState.RUNNING  # and it started it
    assert lag.consistent == [won.lease.id]


def test_an_expired_lease_is_refused_though_the_copy_read_still_shows_it_running(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    lag.behind(rig.lease(lease.id))
    rig.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    rig.sweep()
    assert rig.lease(lease.id).state.terminal  # expired (and its job requeued)
    assert isinstance(_beat(rig, lease), StaleLease)
    assert isinstance(_beat(rig, lease), StaleLease)  # and again, while the copy still lags


def test_a_deadline_due_is_written_from_the_consistent_read_and_never_lost(
    rig: Rig, lag: Lagging
) -> None:
    lease = rig.running()
    rig.advance(TOLERATION_S * DEADLINE_SLACK + 10)  # the stored deadline needs moving now
    lag.behind(rig.lease(lease.id))
    before = rig.svc.counters["lost_writes"]
    answer = _beat(rig, lease)
    assert not isinstance(answer, TenureError)
    assert rig.lease(lease.id).heartbeat_at == rig.clock.now_ms()
    assert rig.svc.counters["lost_writes"] == before
    assert lag.consistent == [lease.id]


def test_a_cancel_reaches_the_answer_once_the_copy_catches_up(rig: Rig, lag: Lagging) -> None:
    lease = rig.running()
    lag.behind(rig.lease(lease.id))
    rig.svc.operator.cancel(MEMBER, lease.id)
    rig.advance(10)
    lagging = _beat(rig, lease)
    assert not isinstance(lagging, TenureError) and lagging.revoke is None  # type: ignore[attr-defined]
    assert rig.lease(lease.id).state is LeaseState.CANCELLING  # the heartbeat wrote nothing
    lag.copies.clear()
    caught_up = _beat(rig, lease)
    assert caught_up.revoke is Revoke.CANCEL  # type: ignore[attr-defined]


def test_a_copy_of_another_workers_lease_is_judged_on_the_table(rig: Rig, lag: Lagging) -> None:
    lease = rig.running()
    answers = rig.svc.reports.worker_heartbeat(WORKER, "w2", [(lease.id, lease.fence)])
    assert isinstance(answers[0][2], StaleLease)
    assert lag.consistent == [lease.id]


def test_the_lease_token_heartbeat_reads_the_same_way(rig: Rig, lag: Lagging) -> None:
    rig.task()
    queued = next(iter(rig.store.lease_rows.values())).lease
    lag.behind(queued)
    won = rig.claim()
    beat = rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert beat.lease.state is LeaseState.RUNNING
    lag.copies.clear()
    lag.consistent.clear()
    rig.advance(10)
    rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert lag.consistent == []
