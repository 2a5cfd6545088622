"""One worker token's long polls cannot fill the claim function: however many of its claims
arrive at once, on however many function instances, at most 8 of them wait, the rest answer
at once (as with `wait_seconds: 0`), and every slot is free again when the waits end.

On DynamoDB Local with real threads: the bound is a conditional write, and moto does not apply
conditional writes atomically across threads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tenure.app.leases.claims.waits import MAX_WAITING_CLAIMS
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.domain.model import Principal
from tenure.store.dynamo import OneTable
from tenure.wiring import RandomIds, SystemClock

from tests.conformance.contract import ALPHA, make_world
from tests.conformance.test_races import run_threads
from tests.conftest import WORKER, Rig

CLAIMS = 20
# Long enough that every claim has made its first look (twenty at once on DynamoDB Local and
# two shared cores take a second or two) before the first wait ends and frees its slot.
WAIT_SECONDS = 6.0
# Where another thread must see the first token's claims waiting before their waits end: eight
# first looks at once took more than three seconds while the other tiers ran beside this one.
LONG_WAIT_SECONDS = 2 * WAIT_SECONDS


class HeldSlots:
    """The real store, keeping count of the slots held at once (thread-safe)."""

    def __init__(self, inner: OneTable) -> None:
        self.inner = inner
        self.held = 0
        self.most = 0
        self.holders: set[int] = set()  # the threads that took a slot
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def take_wait_slot(self, token_id: str, slot: int, now_ms: int, until_ms: int) -> None:
        self.inner.take_wait_slot(token_id, slot, now_ms, until_ms)
        with self._lock:
            self.held += 1
            self.most = max(self.most, self.held)
            self.holders.add(threading.get_ident())

    def free_wait_slot(self, token_id: str, slot: int, until_ms: int) -> None:
        with self._lock:
            self.held -= 1
        self.inner.free_wait_slot(token_id, slot, until_ms)


class SleepsKept(SystemClock):
    """The system clock, keeping how long each thread slept: a claim that answers at once
    never sleeps, however long a loaded machine takes to serve its reads and writes."""

    def __init__(self) -> None:
        self.slept: dict[int, float] = {}
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            me = threading.get_ident()
            self.slept[me] = self.slept.get(me, 0.0) + seconds
        super().sleep(seconds)


def test_at_most_eight_claims_of_one_token_wait_and_the_rest_answer_at_once(rig: Rig) -> None:
    make_world(rig.svc)
    # Two function instances (two services, each with its own process-local state) on one
    # table, as Lambda runs them: the bound is the table's, not an instance's.
    store = HeldSlots(rig.store)
    clock = SleepsKept()
    instances = [compose(Rows.of(store, store), clock, RandomIds()) for _ in range(2)]
    start = threading.Barrier(CLAIMS)

    def poll(n: int) -> tuple[bool, float, float]:
        svc = instances[n % 2]
        start.wait()
        began = time.monotonic()
        won = svc.claims.claim(WORKER, ALPHA, f"w{n}", "1.0", WAIT_SECONDS, None)
        assert won is None  # the pool stays empty
        me = threading.get_ident()
        return me in store.holders, clock.slept.get(me, 0.0), time.monotonic() - began

    answers = run_threads(CLAIMS, poll)
    waited = [(slept, took) for held, slept, took in answers if held]
    at_once = [(slept, took) for held, slept, took in answers if not held]
    assert store.most <= MAX_WAITING_CLAIMS
    assert 1 <= len(waited) <= MAX_WAITING_CLAIMS, answers
    assert len(at_once) >= CLAIMS - MAX_WAITING_CLAIMS, answers
    # Those without a slot never slept; those with one slept, and answered after their whole
    # wait. The time an answer took also includes the store's reads and writes, which two
    # loaded cores can stretch to seconds, so the quick answers are only held to being
    # quicker than every waited one.
    assert all(slept == 0.0 for slept, _ in at_once), answers
    assert all(slept > 0.0 for slept, _ in waited), answers
    assert all(took >= WAIT_SECONDS - 0.1 for _, took in waited), answers
    assert max(took for _, took in at_once) < min(took for _, took in waited), answers
    assert sum(svc.counters["claims_not_waited"] for svc in instances) == len(at_once)
    assert rig.store.wait_slots(WORKER.token_id) == {}  # every slot given back


def test_another_token_waits_while_one_token_has_every_slot(rig: Rig) -> None:
    make_world(rig.svc)
    svc = compose(Rows.of(rig.store, rig.store), SystemClock(), RandomIds())
    other = Principal(kind="worker", token_id="test-worker-2")
    start = threading.Barrier(MAX_WAITING_CLAIMS + 1)
    found: dict[str, object] = {}

    def poll(n: int) -> float:
        actor = WORKER if n < MAX_WAITING_CLAIMS else other
        start.wait()
        if actor is other:
            # Look until the first token's claims are waiting: on two loaded cores their first
            # look can take longer than any fixed pause. Bounded well inside their wait.
            deadline = time.monotonic() + LONG_WAIT_SECONDS / 2
            found["slots"] = {}
            while time.monotonic() < deadline:
                found["slots"] = rig.store.wait_slots(WORKER.token_id)
                if len(found["slots"]) >= MAX_WAITING_CLAIMS // 2:  # type: ignore[arg-type]
                    break
                time.sleep(0.05)
        began = time.monotonic()
        svc.claims.claim(actor, ALPHA, f"w{n}", "1.0", LONG_WAIT_SECONDS, None)
        return time.monotonic() - began

    took = run_threads(MAX_WAITING_CLAIMS + 1, poll)
    assert len(found["slots"]) >= MAX_WAITING_CLAIMS // 2  # type: ignore[arg-type]
    assert took[-1] >= LONG_WAIT_SECONDS - 0.1  # its own slots: it waited
