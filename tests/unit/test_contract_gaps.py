"""Contract lines the first landing got wrong, each pinned at the core."""

from __future__ import annotations

import pytest
from tenure.app.ports import Change
from tenure.domain.errors import (
    Conflict,
    InvalidTransition,
    StaleLease,
    Unauthenticated,
    Unavailable,
)
from tenure.domain.states import EndReason, LeaseState

from tests.unit.support import MEMBER, POOL, WORKER, Rig, as_lease


@pytest.mark.parametrize("action", ["cancel", "kill"])
def test_cancel_or_kill_of_a_pending_lease_ends_it_cancelled(rig: Rig, action: str) -> None:
    _, lease = rig.task()
    assert lease is not None
    ended = getattr(rig.svc.operator, action)(MEMBER, lease.id)
    assert (ended.state, ended.end_reason) == (LeaseState.CANCELLED, EndReason.CANCELLED)
    assert rig.types(lease.task_id or "")[-1] == "lease.cancelled"


def test_complete_with_no_fields_and_with_the_default_outcome_are_the_same_report(
    rig: Rig,
) -> None:
    won = rig.claimed()
    first = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    again = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"outcome": "success"})
    nulls = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"details": None})
    assert first == again == nulls
    assert first.state is LeaseState.COMPLETED
    assert rig.types(won.lease.task_id or "").count("lease.completed") == 1


def test_a_report_id_reused_by_another_kind_of_report_is_not_a_replay(rig: Rig) -> None:
    won = rig.claimed()
    me = as_lease(won.lease.id)
    failed = rig.svc.reports.fail(me, won.lease.id, {"error": "boom", "report_id": "r1"})
    assert (
        rig.svc.reports.fail(me, won.lease.id, {"error": "other text", "report_id": "r1"}) == failed
    )
    with pytest.raises(InvalidTransition):
        rig.svc.reports.complete(me, won.lease.id, {"report_id": "r1"})
    assert rig.lease(won.lease.id).state is LeaseState.FAILED


def test_a_write_that_keeps_losing_is_bounded_and_answers_unavailable(rig: Rig) -> None:
    won = rig.claimed()
    tries: list[Change] = []

    def always_lose(change: Change) -> None:
        tries.append(change)
        raise Conflict("a conditional write lost")

    rig.store.commit = always_lose  # type: ignore[method-assign]
    with pytest.raises(Unavailable) as refused:
        rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
    assert refused.value.retry_after >= 1
    assert 1 < len(tries) <= 10
    with pytest.raises(Unavailable):
        rig.svc.operator.cancel(MEMBER, won.lease.id)


def test_rivals_that_lose_a_write_rest_a_growing_random_while_before_looking_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rivals that re-read at once collide again in lockstep; each lost write rests a random
    # share of 10 ms · 2^try first, so the whole bounded retry rests at most 0.31 s.
    won = rig.claimed()
    rests: list[float] = []
    monkeypatch.setattr(rig.ids, "jitter", lambda: 1.0)
    monkeypatch.setattr(rig.clock, "sleep", rests.append)

    def always_lose(change: Change) -> None:
        raise Conflict("a conditional write lost")

    rig.store.commit = always_lose  # type: ignore[method-assign]
    with pytest.raises(Unavailable):
        rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert rests == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.16])
    rests.clear()
    monkeypatch.setattr(rig.ids, "jitter", lambda: 0.25)
    with pytest.raises(Unavailable):
        rig.svc.operator.cancel(MEMBER, won.lease.id)
    assert rests == pytest.approx([0.0025, 0.005, 0.01, 0.02, 0.04])


def test_a_claim_retried_with_its_claim_id_gets_the_same_lease_under_a_new_token(
    rig: Rig,
) -> None:
    rig.task()
    rig.task()
    first = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1", host="box")
    assert first is not None
    again = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-1", host="box")
    assert again is not None
    assert again.lease.id == first.lease.id and again.lease.fence == first.lease.fence
    assert again.token != first.token
    held = [x for x in rig.store.list_leases("OPS", 10, None, None, None).leases if x.worker_id]
    assert [x.id for x in held] == [first.lease.id]  # never a second lease
    with pytest.raises(Unauthenticated):  # the lost token died with its hash
        rig.svc.tokens.authenticate(first.token)
    assert rig.svc.tokens.authenticate(again.token).lease_id == first.lease.id
    assert rig.lease(first.lease.id).host == "box"
    fresh = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None, claim_id="c-2")
    assert fresh is not None and fresh.lease.id != first.lease.id


def test_a_claim_id_is_the_workers_own(rig: Rig) -> None:
    rig.task()
    rig.task()
    mine = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="same")
    theirs = rig.svc.claims.claim(WORKER, POOL, "w2", None, 0, None, claim_id="same")
    assert mine is not None and theirs is not None
    assert mine.lease.id != theirs.lease.id


def test_a_claim_id_whose_lease_has_ended_claims_afresh(rig: Rig) -> None:
    rig.task()
    rig.task()
    first = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="c-1")
    assert first is not None
    rig.svc.reports.complete(as_lease(first.lease.id), first.lease.id, {})
    again = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="c-1")
    assert again is not None and again.lease.id != first.lease.id


def test_a_report_with_an_older_fence_on_an_ended_lease_is_stale_and_recorded(rig: Rig) -> None:
    first = rig.claimed()
    rig.svc.reports.release(as_lease(first.lease.id), first.lease.id, {})
    second = rig.claim("w2")
    me = as_lease(second.lease.id)
    done = rig.svc.reports.complete(me, second.lease.id, {"fence": 2})
    assert rig.svc.reports.complete(me, second.lease.id, {"fence": 2}) == done  # a replay
    with pytest.raises(StaleLease):
        rig.svc.reports.complete(me, second.lease.id, {"fence": 1})
    stale = [e for e in rig.events(second.lease.task_id or "") if e.type == "lease.stale_report"]
    assert [e.data["fence"] for e in stale] == [1]


def test_a_worker_waiting_in_a_long_poll_stays_reachable(rig: Rig) -> None:
    rig.make_pool("quick", renew_seconds=1, grace_seconds=4, toleration_seconds=60)
    seen: list[bool] = []
    real_sleep = rig.clock.sleep

    def sleep_and_look(seconds: float) -> None:
        real_sleep(seconds)
        views = rig.svc.workers.list_workers(MEMBER, "quick")
        seen.append(all(v.reachable for v in views))

    rig.clock.sleep = sleep_and_look  # type: ignore[method-assign]
    assert rig.svc.claims.claim(WORKER, "quick", "idle", None, 20, None) is None
    assert len(seen) >= 39 and all(seen)


def test_a_pools_retention_can_be_patched_and_reset(rig: Rig) -> None:
    from tenure.domain.model import DEFAULT_RETENTION_SECONDS

    from tests.unit.support import ADMIN

    assert rig.svc.pools.update_pool(ADMIN, POOL, {"retention_seconds": 60}).retention_seconds == 60
    reset = rig.svc.pools.update_pool(ADMIN, POOL, {"retention_seconds": None})
    assert reset.retention_seconds == DEFAULT_RETENTION_SECONDS


def test_a_retried_claim_counts_the_lease_from_the_retry_the_worker_heard(rig: Rig) -> None:
    # The worker never heard the first answer; its lease clock (and its self-fence)
    # starts at the retry it did hear. Found building tests/reliability's dropped-claim path:
    # the retry kept the first claim's deadline, so the sweeper could expire the lease (and
    # hand the job on) while its holder, counting from the retry, still acted.
    rig.make_pool("quick", renew_seconds=1, grace_seconds=50, toleration_seconds=20)
    rig.task(pool="quick")
    rig.sweep()
    first = rig.svc.claims.claim(WORKER, "quick", "w1", None, 0, None, claim_id="c-1")
    assert first is not None
    rig.advance(15)
    rig.sweep()
    again = rig.svc.claims.claim(WORKER, "quick", "w1", None, 0, None, claim_id="c-1")
    assert again is not None and again.lease.id == first.lease.id
    heard_at = rig.clock.now_ms()
    held = rig.lease(first.lease.id)
    assert held.deadline is not None and held.deadline >= heard_at + 20_000
    # The holder may act until 2 renews before its toleration runs out, counted from the retry.
    rig.advance(20 - 2 * 1)
    assert rig.sweep().expired == []
    assert rig.lease(first.lease.id).state is LeaseState.DISPATCHED
