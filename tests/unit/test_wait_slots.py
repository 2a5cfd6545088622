"""A worker token has at most 8 claims waiting at once (app/leases/claims/waits.py): a claim takes a
slot only when it is about to wait, gives it back when it answers, and with every slot held
answers at once. The race of many claims for the slots is proven on DynamoDB Local
(tests/conformance/test_wait_slot_races.py); these pin the rules on the fake store."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.leases.bound import BOUND_WAIT_SECONDS
from tenure.app.leases.claims.waits import (
    MAX_WAITING_CLAIMS,
    SHARED_WAITING_CLAIMS,
    SHARED_WAITS,
    SLOT_MARGIN_MS,
)
from tenure.domain.model import Principal

from tests.unit.support import ADMIN, POOL, T0, WORKER, Rig


class Watched:
    """The fake store, counting the slot reads (the fake's `writes` counts the slot writes)."""

    def __init__(self, rig: Rig) -> None:
        self.reads = 0
        inner = rig.store.wait_slots

        def wait_slots(token_id: str) -> dict[int, int]:
            self.reads += 1
            return inner(token_id)

        rig.store.wait_slots = wait_slots  # type: ignore[method-assign]


@pytest.fixture
def rig() -> Rig:
    return Rig()


def _slot_writes(rig: Rig) -> list[str]:
    return [w for w in rig.store.writes if w.endswith("_wait_slot")]


def _fill(rig: Rig, until: int, token_id: str = WORKER.token_id) -> None:
    """Every slot of the token held until `until`, as claims waiting elsewhere hold them."""
    for slot in range(MAX_WAITING_CLAIMS):
        rig.store.take_wait_slot(token_id, slot, rig.clock.now_ms(), until)
    rig.store.writes.clear()


def _claim(rig: Rig, wait: float, actor: Principal = WORKER, **kw: Any) -> Any:
    return rig.svc.claims.claim(actor, POOL, "w1", "1.0", wait, None, **kw)


def test_a_claim_that_finds_work_or_does_not_wait_costs_no_slot_read_or_write(rig: Rig) -> None:
    watched = Watched(rig)
    rig.task()
    assert _claim(rig, 20) is not None  # found at the first look: never about to wait
    assert _claim(rig, 0) is None  # empty, and asked not to wait
    assert watched.reads == 0 and _slot_writes(rig) == []


def test_a_long_poll_holds_a_slot_while_it_waits_and_gives_it_back(rig: Rig) -> None:
    seen: list[dict[int, int]] = []
    sleep = rig.clock.sleep

    def look_at_slots(seconds: float) -> None:
        seen.append(rig.store.wait_slots(WORKER.token_id))
        sleep(seconds)

    rig.clock.sleep = look_at_slots  # type: ignore[method-assign]
    assert _claim(rig, 3) is None
    assert rig.clock.now_ms() >= T0 + 3000  # it waited the whole wait
    assert all(len(slots) == 1 for slots in seen) and len(seen) >= 6
    (until,) = seen[0].values()
    assert until == T0 + 3000 + SLOT_MARGIN_MS
    assert rig.store.wait_slots(WORKER.token_id) == {}
    assert _slot_writes(rig) == ["take_wait_slot", "free_wait_slot"]


def test_with_every_slot_held_a_claim_answers_at_once_and_counts_it(rig: Rig) -> None:
    _fill(rig, until=T0 + 20_000)
    assert _claim(rig, 20) is None
    assert rig.clock.now_ms() == T0  # no wait at all
    assert rig.svc.counters["claims_not_waited"] == 1
    assert _slot_writes(rig) == []
    # Another token's claims wait on slots of their own.
    other = Principal(kind="worker", token_id="tok-other")
    assert _claim(rig, 2, actor=other) is None
    assert rig.clock.now_ms() >= T0 + 2000


def test_a_slot_left_by_a_claim_that_died_is_free_once_its_time_has_passed(rig: Rig) -> None:
    _fill(rig, until=T0 + 5_000)  # eight claims whose functions died while waiting
    rig.advance(5.001)
    began = rig.clock.now_ms()
    assert _claim(rig, 2) is None
    assert rig.clock.now_ms() >= began + 2000  # it waited: a run-out slot was free


def test_a_claim_that_finds_work_while_waiting_gives_its_slot_back(rig: Rig) -> None:
    sleep = rig.clock.sleep
    filed: list[bool] = []

    def file_once(seconds: float) -> None:
        if not filed:
            filed.append(True)
            rig.task()  # work arrives while the claim waits
        sleep(seconds)

    rig.clock.sleep = file_once  # type: ignore[method-assign]
    assert _claim(rig, 10) is not None
    assert rig.store.wait_slots(WORKER.token_id) == {}


def test_an_exact_claim_that_waits_takes_a_slot_too(rig: Rig) -> None:
    _, lease = rig.task()
    assert lease is not None
    rig.svc.pools.pause_pool(ADMIN, POOL)  # the lease stays pending and nothing is handed out
    assert _claim(rig, 2, lease_id=lease.id) is None
    assert rig.clock.now_ms() >= T0 + 2000
    assert _slot_writes(rig) == ["take_wait_slot", "free_wait_slot"]
    _fill(rig, until=rig.clock.now_ms() + 60_000)
    at = rig.clock.now_ms()
    assert _claim(rig, 2, lease_id=lease.id) is None
    assert rig.clock.now_ms() == at


def test_an_mcp_claim_with_wait_waits_a_few_seconds_on_a_slot_of_its_token(rig: Rig) -> None:
    assert BOUND_WAIT_SECONDS <= 5
    assert rig.svc.bound.claim_next(WORKER, POOL, "w1", True, None, None) is None
    assert rig.clock.now_ms() - T0 >= BOUND_WAIT_SECONDS * 1000
    # Its token's slot and one of the slots every token's MCP claims share.
    assert _slot_writes(rig) == ["take_wait_slot"] * 2 + ["free_wait_slot"] * 2
    _fill(rig, until=rig.clock.now_ms() + 60_000)
    at = rig.clock.now_ms()
    assert rig.svc.bound.claim_next(WORKER, POOL, "w1", True, None, None) is None
    assert rig.clock.now_ms() == at  # the token's slots are the HTTP claims' too


def test_mcp_claims_of_every_token_together_wait_on_a_bounded_number_of_shared_slots(
    rig: Rig,
) -> None:
    # They wait in the function that serves operators, the board and MCP's heartbeats: many
    # tokens' idle agents, each within its own eight, must not take all of it.
    for slot in range(SHARED_WAITING_CLAIMS):
        rig.store.take_wait_slot(SHARED_WAITS, slot, rig.clock.now_ms(), T0 + 60_000)
    rig.store.writes.clear()
    other = Principal(kind="worker", token_id="tok-other", pools=None)
    assert rig.svc.bound.claim_next(other, POOL, "w1", True, None, None) is None
    assert rig.clock.now_ms() == T0, "answered at once, as with wait false"
    assert rig.store.wait_slots(other.token_id) == {}, "the token's slot taken is given back"
    assert rig.svc.counters["claims_not_waited"] == 1
    # An HTTP claim waits on the claim function: the shared slots are not its.
    assert _claim(rig, 2, actor=other) is None
    assert rig.clock.now_ms() >= T0 + 2000


def test_an_mcp_claim_that_waits_holds_a_shared_slot_and_gives_both_back(rig: Rig) -> None:
    seen: list[dict[int, int]] = []
    sleep = rig.clock.sleep

    def look_at_slots(seconds: float) -> None:
        seen.append(rig.store.wait_slots(SHARED_WAITS))
        sleep(seconds)

    rig.clock.sleep = look_at_slots  # type: ignore[method-assign]
    assert rig.svc.bound.claim_next(WORKER, POOL, "w1", True, None, None) is None
    assert seen and all(len(slots) == 1 for slots in seen)
    assert rig.store.wait_slots(SHARED_WAITS) == {}
    assert rig.store.wait_slots(WORKER.token_id) == {}
    rig.task()
    rig.store.writes.clear()
    assert rig.svc.bound.claim_next(WORKER, POOL, "w1", True, None, None) is not None
    assert _slot_writes(rig) == [], "a claim that finds work at once takes no slot"
