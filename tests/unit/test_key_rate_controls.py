"""Keyed concurrency (a pool's max_active_per_key over its tasks' concurrency_key) and the
rate limit (a pool's max_claims_per_minute): enforced by the claim's own write, shown as
queued conditions, given back (the key) when a held lease ends, counted when set late."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.api import models as m
from tenure.app.ports import KEY_CEILING, RATE_CEILING, Change, key_ceiling, rate_ceiling
from tenure.app.runs import RunControls
from tenure.domain.errors import ValidationFailed

from tests.unit.support import ADMIN, MEMBER, POOL, WORKER, Rig, as_lease, schema_of, shaped
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)


def _claim(rig: Rig, worker: str = "w", wait: float = 0) -> Any:
    return rig.svc.claims.claim(WORKER, POOL, worker, "1.0", wait, None)


def _held(rig: Rig, key: str) -> int:
    return rig.store.held_count(KEY_CEILING, key_ceiling(POOL, key))


def _condition(rig: Rig, lease_id: str) -> tuple[str, str, bool] | None:
    found = rig.svc.conditions.queued_condition_of(rig.lease(lease_id))
    return None if found is None else (found.code, found.label, found.needs_person)


# ------------------------------------------------------------------ keyed concurrency


def test_a_full_key_holds_its_leases_back_and_the_claim_moves_on_to_other_keys(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    _, first = rig.task(concurrency_key="deploy:prod")
    _, second = rig.task(concurrency_key="deploy:prod")
    _, other = rig.task(concurrency_key="deploy:staging")
    _, plain = rig.task()
    assert first and second and other and plain
    won = [_claim(rig, f"w{i}") for i in range(4)]
    taken = {w.lease.id for w in won if w is not None}
    # One of prod, staging, and the lease without a key: a full key is not a full pool.
    assert len(taken) == 3 and other.id in taken and plain.id in taken
    waiting = second.id if first.id in taken else first.id
    assert waiting not in taken
    assert _held(rig, "deploy:prod") == 1 and _held(rig, "deploy:staging") == 1
    assert _condition(rig, waiting) == ("key_full", "waiting for deploy:prod", False)


def test_a_claim_with_a_claim_id_that_meets_a_full_key_moves_on_without_a_trace(
    rig: Rig,
) -> None:
    # The claim's record goes in the claim's own transaction when the claim counts a key, so a
    # full key cancels it with the claim: the record never named the waiting lease, nothing had
    # to be shunned, and the record names the lease the claim took.
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    _, first = rig.task(concurrency_key="k")
    _, waiting = rig.task(concurrency_key="k")
    _, other = rig.task(concurrency_key="j")
    assert first and waiting and other
    assert _claim(rig, "w1").lease.id == first.id  # oldest first: "k" is now full
    won = rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 0, None, claim_id="c-1")
    assert won is not None and won.lease.id == other.id
    assert rig.lease(waiting.id).shunned is None
    assert rig.lease(waiting.id).version == waiting.version  # not written at all
    record = rig.store.find_claim(POOL, WORKER.token_id, "w2", "c-1")
    assert record is not None and record.lease_id == other.id
    assert rig.lease(other.id).claim_ref is not None


def test_the_end_of_a_held_lease_gives_its_key_back_exactly_once(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    rig.task(concurrency_key="k")
    _, waiting = rig.task(concurrency_key="k")
    assert waiting is not None
    held = _claim(rig, "w1")
    assert held.lease.counted == (f"{KEY_CEILING}:{key_ceiling(POOL, 'k')}",)
    assert _claim(rig, "w2") is None
    rig.svc.reports.complete(as_lease(held.lease.id), held.lease.id, {"outcome": "success"})
    rig.svc.reports.complete(as_lease(held.lease.id), held.lease.id, {"outcome": "success"})
    assert _held(rig, "k") == 0  # the replayed completion gave nothing back twice
    assert _condition(rig, waiting.id) == ("awaiting_agent", "awaiting agent", False)
    assert _claim(rig, "w2").lease.id == waiting.id
    rig.svc.reports.fail(as_lease(waiting.id), waiting.id, {"error": "no"})
    assert _held(rig, "k") == 0


def test_release_and_expiry_hand_the_key_on_to_the_successor_uncounted(rig: Rig) -> None:
    rig.svc.pools.update_pool(
        ADMIN,
        POOL,
        {"max_active_per_key": 1, "renew_seconds": 1, "grace_seconds": 2, "toleration_seconds": 3},
    )
    rig.task(concurrency_key="k")
    held = _claim(rig, "w1")
    rig.svc.reports.release(as_lease(held.lease.id), held.lease.id, {})
    assert _held(rig, "k") == 0
    again = _claim(rig, "w2")
    assert again.lease.concurrency_key == "k" and _held(rig, "k") == 1
    rig.sweep()
    rig.advance(10)
    assert len(rig.sweep().expired) == 1
    assert _held(rig, "k") == 0


def test_a_pool_without_the_setting_counts_no_key(rig: Rig) -> None:
    rig.task(concurrency_key="k")
    rig.task(concurrency_key="k")
    assert _claim(rig, "w1") is not None and _claim(rig, "w2") is not None
    assert _held(rig, "k") == 0


def test_setting_the_per_key_ceiling_while_leases_are_held_counts_them(rig: Rig) -> None:
    first = rig.running("w1", concurrency_key="k")
    rig.running("w2", concurrency_key="other")
    rig.running("w3")  # no key: counts toward nothing
    _, waiting = rig.task(concurrency_key="k")
    assert waiting is not None
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    assert _held(rig, "k") == 1 and _held(rig, "other") == 1
    assert rig.lease(first.id).counted == (f"{KEY_CEILING}:{key_ceiling(POOL, 'k')}",)
    assert _claim(rig, "w4") is None
    assert _condition(rig, waiting.id) == ("key_full", "waiting for k", False)
    rig.svc.reports.complete(as_lease(first.id), first.id, {})
    assert _held(rig, "k") == 0
    assert _claim(rig, "w4") is not None


def test_enqueue_takes_a_key_and_it_becomes_the_tasks(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    task, _ = rig.task(pool=None)
    lease = rig.svc.filing.enqueue(MEMBER, task.id, POOL, concurrency_key="batch")
    assert lease.concurrency_key == "batch"
    assert rig.svc.filing.kernel.task(task.id).concurrency_key == "batch"
    with pytest.raises(ValidationFailed):
        rig.task(concurrency_key="bad\x07key")
    with pytest.raises(ValidationFailed):
        rig.task(concurrency_key="k" * 129)


# ---------------------------------------------------------------------- rate limit


def test_claims_beyond_the_minutes_limit_wait_for_the_next_minute(rig: Rig) -> None:
    rig.clock.advance(60 - (rig.clock.now_ms() // 1000) % 60)  # the start of a minute
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_claims_per_minute": 2})
    leases = [rig.task()[1] for _ in range(3)]
    assert all(leases)
    assert _claim(rig, "w1") is not None and _claim(rig, "w2") is not None
    assert _claim(rig, "w3") is None  # 204: the minute's claims are used up
    minute = rate_ceiling(POOL, rig.clock.now_ms() // 60_000)
    assert rig.store.held_count(RATE_CEILING, minute) == 2
    waiting = next(le for le in leases if le and rig.lease(le.id).state.value == "pending")
    assert _condition(rig, waiting.id) == ("rate_limited", "rate limited", False)
    # A long poll waits into the next minute and then wins.
    rig.clock.advance(45)
    assert _claim(rig, "w3") is None
    won = _claim(rig, "w3", wait=20)
    assert won is not None and won.lease.id == waiting.id
    assert won.lease.counted is None  # a claim count is never given back


def test_a_rate_limited_claim_stops_writing_until_the_minute_turns(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.clock.advance(60 - (rig.clock.now_ms() // 1000) % 60)
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_claims_per_minute": 1})
    for _ in range(3):
        rig.task()
    assert _claim(rig, "w1") is not None
    commits: list[Change] = []
    real = rig.store.commit

    def spy(change: Change) -> None:
        commits.append(change)
        real(change)

    monkeypatch.setattr(rig.store, "commit", spy)
    assert _claim(rig, "w2", wait=10) is None
    assert len([c for c in commits if c.leases]) == 1  # one losing write, then it waited


def test_pools_without_controls_write_no_counter(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.task(concurrency_key="k")
    commits: list[Change] = []
    real = rig.store.commit

    def spy(change: Change) -> None:
        commits.append(change)
        real(change)

    monkeypatch.setattr(rig.store, "commit", spy)
    won = _claim(rig)
    assert won.lease.counted is None
    assert [c.ceilings for c in commits] == [[]]


# ------------------------------------------------------------- the API and the views


def test_the_routes_take_show_and_validate_the_controls(http: Any, rig: Rig) -> None:  # noqa: F811
    got: Answer = http(
        "PATCH", f"/pools/{POOL}", {"max_active_per_key": 2, "max_claims_per_minute": 30}, ADMIN
    )
    assert got.status == 200, got.data
    pool = shaped(m.PoolAnswer, got.data)["pool"]
    assert (pool["max_active_per_key"], pool["max_claims_per_minute"]) == (2, 30)
    got = http("PATCH", f"/pools/{POOL}", {"max_claims_per_minute": None}, ADMIN)
    assert got.data["pool"]["max_claims_per_minute"] is None
    assert got.data["pool"]["max_active_per_key"] == 2
    for bad in (
        {"max_active_per_key": 0},
        {"max_claims_per_minute": -1},
        {"max_active_per_key": "x"},
    ):
        refused = http("PATCH", f"/pools/{POOL}", bad, ADMIN)
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
    made = http(
        "POST",
        "/pools",
        {"name": "keyed", "space": "OPS", "kind": "command", "max_active_per_key": 1},
        ADMIN,
    )
    assert made.status == 201 and made.data["max_active_per_key"] == 1
    filed = http(
        "POST",
        "/tasks",
        {"space": "OPS", "title": "t", "pool": "keyed", "concurrency_key": "tenant-7"},
    )
    assert filed.status == 201, filed.data
    assert filed.data["task"]["concurrency_key"] == "tenant-7"
    assert filed.data["lease"]["concurrency_key"] == "tenant-7"
    for key in ("", "k" * 129, "a\nb", "tab\there", "del\x7f"):
        refused = http("POST", "/tasks", {"space": "OPS", "title": "t", "concurrency_key": key})
        assert (refused.status, refused.code) == (422, "validation_failed"), key
    task_id = filed.data["task"]["id"]
    refused = http("POST", f"/tasks/{task_id}/enqueue", {"pool": POOL, "concurrency_key": "a\x00"})
    assert (refused.status, refused.code) == (422, "validation_failed")


def test_the_openapi_enum_lists_the_new_codes_after_pool_full() -> None:
    codes = list(schema_of(m.QueuedConditionOut)["properties"]["code"]["enum"])
    at = codes.index("pool_full")
    assert codes[at + 1 : at + 3] == ["key_full", "rate_limited"]


def test_precedence_pool_full_before_key_full_before_rate_limited(rig: Rig) -> None:
    from tenure.app.conditions import PoolFacts, queued_condition

    _, lease = rig.task(concurrency_key="k")
    assert lease is not None
    full = queued_condition(lease, PoolFacts(pool_full=True, rate_limited=True), None, True)
    assert full is not None and full.code == "pool_full"
    keyed = queued_condition(lease, PoolFacts(rate_limited=True), None, True)
    assert keyed is not None and keyed.code == "key_full"
    limited = queued_condition(lease, PoolFacts(rate_limited=True), None, False)
    assert limited is not None and limited.code == "rate_limited"


def test_an_exact_claim_of_a_lease_whose_key_is_full_waits_without_writing_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    rig.task(concurrency_key="k")
    _, waiting = rig.task(concurrency_key="k")
    assert waiting is not None
    held = _claim(rig, "w1")
    commits: list[Change] = []
    real = rig.store.commit

    def spy(change: Change) -> None:
        commits.append(change)
        real(change)

    monkeypatch.setattr(rig.store, "commit", spy)
    got = rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 5, None, lease_id=waiting.id)
    assert got is None
    assert len([c for c in commits if c.leases]) == 1  # one losing write, then counter reads
    rig.svc.reports.complete(as_lease(held.lease.id), held.lease.id, {})
    won = rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 5, None, lease_id=waiting.id)
    assert won is not None and won.lease.id == waiting.id


@pytest.mark.parametrize("priority", [9, None])
def test_a_full_key_ahead_in_the_queue_does_not_hide_a_claimable_lease_behind_it(
    rig: Rig, priority: int | None
) -> None:
    # More leases of a full key than a claim call may try, ahead of (or above) a lease with
    # no key: the claim passes over the ones it knows are held back and takes the free one.
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_active_per_key": 1})
    rig.task(concurrency_key="hot")
    assert _claim(rig, "holder") is not None
    for _ in range(300):
        rig.task(concurrency_key="hot", controls=RunControls(priority=priority))
    _, free = rig.task()
    assert free is not None
    won = rig.svc.claims.claim(WORKER, POOL, "w2", "1.0", 5, None)
    assert won is not None and won.lease.id == free.id
