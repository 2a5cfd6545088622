"""Retry on failure: a pool's policy opens the next attempt in the failing report's commit."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.ports import Change
from tenure.domain.model import Lease
from tenure.domain.retry import RetryPolicy
from tenure.domain.states import LeaseState

from tests.unit.support import ADMIN, POOL, SPACE, T0, WORKER, Rig, as_lease

NO_JITTER = {
    "on_failure": True,
    "backoff": {"initial_seconds": 10, "multiplier": 2, "max_seconds": 600, "jitter": False},
}


def _retrying(rig: Rig, retry: dict[str, Any] | None = None) -> str:
    rig.make_pool("retrying", retry=retry or NO_JITTER)
    return "retrying"


def _newest(rig: Rig, task_id: str) -> Lease:
    newest = rig.svc.kernel.newest_lease(rig.svc.kernel.task(task_id))
    assert newest is not None
    return newest


def _commits(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[Change]:
    seen: list[Change] = []
    real = rig.store.commit

    def spy(change: Change) -> None:
        seen.append(change)
        real(change)

    monkeypatch.setattr(rig.store, "commit", spy)
    return seen


def test_backoff_grows_by_the_multiplier_up_to_the_max_and_jitter_draws_below_it() -> None:
    policy = RetryPolicy(on_failure=True, initial_seconds=10, multiplier=2, max_seconds=60)
    assert [policy.backoff_ms(a, 0.5) for a in (1, 2, 3, 4, 5)] == [
        5_000,
        10_000,
        20_000,
        30_000,
        30_000,
    ]
    fixed = RetryPolicy(
        on_failure=True, initial_seconds=10, multiplier=2, max_seconds=60, jitter=False
    )
    assert [fixed.backoff_ms(a, 0.5) for a in (1, 2, 3, 4)] == [10_000, 20_000, 40_000, 60_000]


def test_a_failed_lease_with_attempts_left_gets_its_next_attempt_after_the_backoff(
    rig: Rig,
) -> None:
    pool = _retrying(rig)
    won = rig.claimed(pool=pool, max_attempts=3)
    rig.advance(5)
    ended = rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    assert ended.state is LeaseState.FAILED
    assert ended.event_data["retry_scheduled"] is True
    nxt = _newest(rig, won.lease.task_id or "")
    assert nxt.id != won.lease.id
    assert nxt.state is LeaseState.PENDING
    assert (nxt.attempt, nxt.previous_lease_id) == (2, won.lease.id)
    assert nxt.not_before == T0 + 5_000 + 10_000
    assert "lease.retry_scheduled" in rig.types(won.lease.task_id or "")
    # Not claimable before the backoff; claimable after it.
    assert rig.svc.claims.claim(WORKER, pool, "w2", "1.0", 0, None) is None
    rig.advance(10)
    again = rig.claim("w2", pool)
    assert again.lease.id == nxt.id


def test_the_second_retry_waits_twice_as_long(rig: Rig) -> None:
    pool = _retrying(rig)
    won = rig.claimed(pool=pool, max_attempts=3)
    rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    rig.advance(10)
    second = rig.claim("w1", pool)
    rig.svc.reports.fail(as_lease(second.lease.id), second.lease.id, {"error": "boom"})
    third = _newest(rig, won.lease.task_id or "")
    assert third.attempt == 3
    assert third.not_before == rig.clock.now_ms() + 20_000


def test_a_completion_with_outcome_failure_is_retried_too(rig: Rig) -> None:
    pool = _retrying(rig)
    won = rig.claimed(pool=pool, max_attempts=2)
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"outcome": "failure"})
    assert _newest(rig, won.lease.task_id or "").attempt == 2


def test_the_last_attempt_and_a_fail_that_is_not_retryable_end_the_run(rig: Rig) -> None:
    pool = _retrying(rig)
    last = rig.claimed(pool=pool, max_attempts=1)
    rig.svc.reports.fail(as_lease(last.lease.id), last.lease.id, {"error": "boom"})
    assert _newest(rig, last.lease.task_id or "").id == last.lease.id
    final = rig.claimed(pool=pool, max_attempts=5)
    ended = rig.svc.reports.fail(
        as_lease(final.lease.id), final.lease.id, {"error": "bad input", "retryable": False}
    )
    assert "retry_scheduled" not in ended.event_data
    assert _newest(rig, final.lease.task_id or "").id == final.lease.id
    assert "lease.retry_scheduled" not in rig.types(final.lease.task_id or "")


def test_a_replayed_failing_report_answers_the_first_answer_and_schedules_nothing_more(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _retrying(rig)
    won = rig.claimed(pool=pool, max_attempts=3)
    body = {"error": "boom", "report_id": "r-1"}
    first = rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, dict(body))
    retry = _newest(rig, won.lease.task_id or "")
    commits = _commits(rig, monkeypatch)
    again = rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, dict(body))
    assert again == first
    assert commits == []
    assert _newest(rig, won.lease.task_id or "") == retry
    assert rig.types(won.lease.task_id or "").count("lease.retry_scheduled") == 1


def test_a_pool_that_does_not_retry_commits_the_failure_alone(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    won = rig.claimed(pool=POOL, max_attempts=3)
    commits = _commits(rig, monkeypatch)
    ended = rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    assert "retry_scheduled" not in ended.event_data
    assert [(len(c.leases), len(c.jobs), len(c.tasks)) for c in commits] == [(1, 0, 0)]
    assert _newest(rig, won.lease.task_id or "").id == won.lease.id


def test_a_retrying_pools_failure_is_one_commit_with_the_next_run(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _retrying(rig)
    won = rig.claimed(pool=pool, max_attempts=3)
    commits = _commits(rig, monkeypatch)
    rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    assert [(len(c.leases), len(c.jobs), len(c.tasks), len(c.job_checks)) for c in commits] == [
        (2, 1, 1, 1)
    ]


def test_a_wake_for_a_child_whose_failure_is_retried_says_it_is_not_final(rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    pool = _retrying(rig)
    creator = rig.running("w-creator", pool=pool)
    child, _ = rig.svc.filing.create_task(
        as_lease(creator.id), SPACE, "sub", None, None, {}, pool, 3, links=TaskLinks()
    )
    won = rig.claim("w-child", pool)
    assert won.lease.task_id == child.id
    rig.svc.reports.fail(as_lease(won.lease.id), won.lease.id, {"error": "boom"})
    wakes = [e.data for e in rig.events(creator.task_id or "") if e.type == "task.wake_creator"]
    assert [(w["child_status"], w["final"]) for w in wakes] == [("failed", False)]


def test_the_pool_routes_take_show_and_validate_the_retry_policy(rig: Rig) -> None:
    from pydantic import ValidationError
    from tenure.api import models as m
    from tenure.api.views import pool_view

    assert pool_view(rig.svc.pools.get_pool(ADMIN, POOL))["retry"] == {
        "on_failure": False,
        "backoff": {"initial_seconds": 10, "multiplier": 2.0, "max_seconds": 600, "jitter": True},
    }
    body = m.PoolPatch.model_validate({"retry": {"on_failure": True}})
    assert body.retry is not None
    updated = rig.svc.pools.update_pool(ADMIN, POOL, {"retry": body.retry.model_dump()})
    assert pool_view(updated)["retry"]["on_failure"] is True
    for bad in (
        {"on_failure": "sometimes"},
        {"backoff": {"initial_seconds": 0}},
        {"backoff": {"initial_seconds": 60, "max_seconds": 30}},
        {"backoff": {"multiplier": 0.5}},
        {"backoff": {"jitter": True, "spread": 3}},
    ):
        with pytest.raises(ValidationError):
            m.PoolCreate.model_validate(
                {"name": "p2", "space": SPACE, "kind": "command", "retry": bad}
            )
