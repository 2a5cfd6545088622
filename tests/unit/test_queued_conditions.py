"""Every queued condition, produced through the service and cleared again, and
the precedence when several hold."""

from __future__ import annotations

from typing import Any

from tenure.app.catalog import one_request
from tenure.app.conditions import PoolFacts, queued_condition
from tenure.app.migrations import POOL_GATES_FROM_SCHEMA, SchemaState
from tenure.app.ports import Settings
from tenure.domain.model import Lease, Space
from tenure.domain.states import LeaseState

from tests.unit.support import (
    ADMIN,
    POOL,
    SPACE,
    WORKER,
    Rig,
    as_lease,
    make_lease,
    queued,
    queued_code,
    settings_reads,
)

REFUSING = {"state": "refusing", "reason": "docker daemon down"}
UNREACHABLE = {"state": "unreachable", "reason": "vault sealed"}
OK = {"state": "ok"}


_code = queued_code
_queued = queued


def _say(rig: Rig, worker_id: str, **state: Any) -> None:
    rig.svc.reports.worker_heartbeat(WORKER, worker_id, [], pool=POOL, **state)


def test_awaiting_agent_then_starting_then_none(rig: Rig) -> None:
    lease = _queued(rig)
    assert _code(rig, lease) == "awaiting_agent"
    won = rig.claim()
    assert _code(rig, lease) == "starting"
    rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    assert _code(rig, lease) is None


def test_pool_paused_needs_a_person_and_clears_on_resume(rig: Rig) -> None:
    lease = _queued(rig)
    rig.svc.pools.pause_pool(ADMIN, POOL)
    found = rig.svc.conditions.queued_condition_of(rig.lease(lease.id))
    assert found is not None
    assert (found.code, found.label, found.needs_person) == ("pool_paused", "pool paused", True)
    rig.svc.pools.resume_pool(ADMIN, POOL)
    assert _code(rig, lease) == "awaiting_agent"


def test_space_archived_clears_on_unarchive(rig: Rig) -> None:
    lease = _queued(rig)
    rig.svc.spaces.archive_space(ADMIN, SPACE)
    assert _code(rig, lease) == "space_archived"
    rig.svc.spaces.unarchive_space(ADMIN, SPACE)
    assert _code(rig, lease) == "awaiting_agent"


def test_runtime_refusing_holds_only_when_every_reachable_worker_says_so(rig: Rig) -> None:
    lease = _queued(rig)
    _say(rig, "w1", runtime=REFUSING)
    assert _code(rig, lease) == "runtime_refusing"
    _say(rig, "w2", runtime=OK)
    assert _code(rig, lease) == "awaiting_agent"
    rig.advance(200)  # both fall silent past the pool's grace…
    _say(rig, "w1", runtime=REFUSING)  # …and only the refusing one comes back
    assert _code(rig, lease) == "runtime_refusing"
    _say(rig, "w1", runtime=OK)
    assert _code(rig, lease) == "awaiting_agent"


def test_token_pool_unreachable_follows_the_credentials_word(rig: Rig) -> None:
    lease = _queued(rig)
    _say(rig, "w1", credentials=UNREACHABLE)
    assert _code(rig, lease) == "token_pool_unreachable"
    _say(rig, "w1")  # saying nothing leaves the stored word as it was
    assert _code(rig, lease) == "token_pool_unreachable"
    _say(rig, "w1", credentials=OK)
    assert _code(rig, lease) == "awaiting_agent"


def test_a_heartbeat_that_says_the_same_writes_nothing_more(rig: Rig) -> None:
    _say(rig, "w1", runtime=REFUSING)
    before = rig.store.writes.count("note_worker")
    for _ in range(5):
        rig.advance(1)
        _say(rig, "w1", runtime=REFUSING)
    assert rig.store.writes.count("note_worker") == before
    _say(rig, "w1", runtime=OK)
    assert rig.store.writes.count("note_worker") == before + 1


def test_the_capacity_codes_clear_when_a_held_lease_ends(rig: Rig) -> None:
    for scope, setup in (
        ("pool", lambda: rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": 1})),
        ("instance", lambda: rig.svc.instance.update_instance(ADMIN, {"max_active": 1})),
    ):
        setup()
        won = rig.claimed(f"w-{scope}")
        lease = _queued(rig)
        assert _code(rig, lease) == f"{scope}_full"
        rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {})
        assert _code(rig, lease) == "awaiting_agent"
        rig.svc.operator.cancel(ADMIN, lease.id)
        rig.svc.pools.update_pool(ADMIN, POOL, {"max_active": None})
        rig.svc.instance.update_instance(ADMIN, {"max_active": None})


def test_space_full(rig: Rig) -> None:
    rig.store.spaces[SPACE] = Space(key=SPACE, name="Ops", created_at=0, max_active=1)
    # As a pool made in a space with a ceiling says (its row carries the space's gates).
    rig.store.update_pool(POOL, Settings(set={"space_ceiling": True}))
    rig.svc.kernel.catalog._spaces.clear()
    won = rig.claimed()
    lease = _queued(rig)
    assert _code(rig, lease) == "space_full"
    rig.svc.reports.release(as_lease(won.lease.id), won.lease.id, {})
    assert _code(rig, lease) == "awaiting_agent"


# Each fact and the code it gives, in precedence order (waiting_until sits after the four
# that need a person and before the ceilings; a deferred lease's not_before
# sets it, tests/unit/test_deferred.py).
PRECEDENCE = [
    ("paused", "pool_paused"),
    ("space_archived", "space_archived"),
    ("runtime_refusing", "runtime_refusing"),
    ("token_pool_unreachable", "token_pool_unreachable"),
    (None, "waiting_until"),
    ("instance_full", "instance_full"),
    ("space_full", "space_full"),
    ("pool_full", "pool_full"),
]
NOT_BEFORE = 1_767_231_000_000  # 2026-01-01T01:30:00Z


def _judge(lease: Lease, facts: PoolFacts, not_before: int | None) -> tuple[str, str, bool]:
    found = queued_condition(lease, facts, not_before)
    assert found is not None
    return found.code, found.label, found.needs_person


def test_each_code_wins_over_every_code_after_it() -> None:
    pending = make_lease("l1")
    holding = {fact for fact, _ in PRECEDENCE if fact}
    not_before: int | None = NOT_BEFORE
    for fact, code in PRECEDENCE:
        facts = PoolFacts(**{name: True for name in holding})
        assert _judge(pending, facts, not_before)[0] == code
        if fact is None:
            not_before = None
        else:
            holding.discard(fact)
    assert _judge(pending, PoolFacts(), None)[0] == "awaiting_agent"


def test_waiting_until_reads_its_time_in_utc_and_needs_no_person() -> None:
    assert _judge(make_lease("l1"), PoolFacts(), NOT_BEFORE) == (
        "waiting_until",
        "waiting until 01:30",
        False,
    )


def test_dispatched_is_starting_and_a_running_lease_has_no_condition() -> None:
    dispatched = make_lease("l2", state=LeaseState.DISPATCHED)
    assert _judge(dispatched, PoolFacts(), None)[0] == "starting"
    assert _judge(dispatched, PoolFacts(pool_full=True), None)[0] == "pool_full"
    running = make_lease("l3", state=LeaseState.RUNNING)
    assert queued_condition(running, PoolFacts(paused=True)) is None


def test_a_claims_answer_judges_by_the_rows_the_claim_read_fresh(rig: Rig) -> None:
    _queued(rig)
    reads = settings_reads(rig)
    with one_request():
        won = rig.claim()
        # The pool row says what its space and the instance say (no ceiling, not archived).
        assert sorted(reads) == ["get_pool"]
        found = rig.svc.conditions.queued_condition_of(won.lease)
    assert found is not None and found.code == "starting"
    assert sorted(reads) == ["get_pool"]  # nothing read again
    # Outside a request (the reactor, the sweeper, a direct caller) it reads it fresh.
    rig.svc.conditions.queued_condition_of(won.lease)
    assert len(reads) == 2


def test_before_the_pool_gates_version_a_claims_answer_reads_the_three_rows() -> None:
    rig = Rig()
    rig.store.schema = SchemaState(version=POOL_GATES_FROM_SCHEMA - 1, step=1)
    _queued(rig)
    reads = settings_reads(rig)
    with one_request():
        won = rig.claim()
        assert sorted(reads) == ["get_instance", "get_pool", "get_space"]
        found = rig.svc.conditions.queued_condition_of(won.lease)
    assert found is not None and found.code == "starting"
    assert sorted(reads) == ["get_instance", "get_pool", "get_space"]  # nothing read again


def test_a_change_the_request_wrote_is_what_its_view_judges_by(rig: Rig) -> None:
    lease = _queued(rig)
    with one_request():
        assert _code(rig, lease) == "awaiting_agent"
        rig.svc.pools.pause_pool(ADMIN, POOL)
        assert _code(rig, lease) == "pool_paused"
        rig.svc.spaces.archive_space(ADMIN, SPACE)
        rig.svc.pools.resume_pool(ADMIN, POOL)
        assert _code(rig, lease) == "space_archived"


def test_each_request_reads_afresh(rig: Rig) -> None:
    lease = _queued(rig)
    with one_request():
        assert _code(rig, lease) == "awaiting_agent"
    rig.store.update_pool(POOL, Settings(set={"paused": True}))  # another process pauses it
    with one_request():
        assert _code(rig, lease) == "pool_paused"
