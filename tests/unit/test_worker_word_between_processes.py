"""What a worker says of itself (its runtime, its credentials, its version) stands in the
table whichever process heard it: a process that heard the worker earlier never writes back
its own older copy of any of them, and never skips writing a new word because its copy
already says it. Two services on one store stand for two warm Lambda processes, each with
its memory of the worker rows it read or wrote."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.app.workers import SEEN_LAG_SHARE
from tenure.domain.model import DEFAULT_GRACE_SECONDS

from tests.unit.support import POOL, WORKER, Rig, as_lease, queued, queued_code

REFUSING = {"state": "refusing", "reason": "docker daemon down"}
UNREACHABLE = {"state": "unreachable", "reason": "vault sealed"}
OK = {"state": "ok"}
# Past the span in which a process trusts its copy of a worker row without writing, still
# well inside the pool's grace (the worker stays reachable).
PAST_THE_WINDOW_S = DEFAULT_GRACE_SECONDS * SEEN_LAG_SHARE + 1


@pytest.fixture
def other(rig: Rig) -> Tenure:
    """A second process: its own service and memory, the same table and clock."""
    return compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)


def _say(svc: Tenure, **state: Any) -> None:
    svc.reports.worker_heartbeat(WORKER, "w1", [], pool=POOL, **state)


@pytest.mark.parametrize(
    ("word", "said", "code"),
    [
        ("runtime", REFUSING, "runtime_refusing"),
        ("credentials", UNREACHABLE, "token_pool_unreachable"),
    ],
)
def test_a_later_silent_heartbeat_elsewhere_keeps_the_word(
    rig: Rig, other: Tenure, word: str, said: dict[str, Any], code: str
) -> None:
    lease = queued(rig)
    _say(rig.svc, **{word: OK})  # this process now holds a copy saying ok
    _say(other, **{word: said})  # the worker's new word lands through another process
    assert queued_code(rig, lease) == code
    rig.advance(PAST_THE_WINDOW_S)
    _say(rig.svc)  # says nothing of it: the first process writes its sign of life
    assert queued_code(rig, lease) == code
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None and getattr(seen, word) == said


def test_a_claim_elsewhere_keeps_the_word(rig: Rig, other: Tenure) -> None:
    rig.claimed("w1")  # the claim's process holds a copy of w1 saying nothing
    _say(other, runtime=REFUSING)
    rig.task()
    rig.advance(PAST_THE_WINDOW_S)
    rig.claim("w1")  # w1 claims again, heard by the first process
    waiting = queued(rig)
    assert queued_code(rig, waiting) == "runtime_refusing"


def test_a_word_its_copy_already_says_is_still_written(rig: Rig, other: Tenure) -> None:
    lease = queued(rig)
    _say(rig.svc, runtime=OK)
    _say(other, runtime=REFUSING)
    rig.advance(1)
    _say(rig.svc, runtime=OK)  # ok again, through the process whose copy says ok
    assert queued_code(rig, lease) == "awaiting_agent"


def test_a_word_said_again_through_the_same_process_still_writes_nothing(
    rig: Rig, other: Tenure
) -> None:
    _say(rig.svc, runtime=REFUSING)
    before = rig.store.writes.count("note_worker")
    for _ in range(5):
        rig.advance(1)
        _say(rig.svc, runtime=REFUSING)
        _say(other, runtime=REFUSING)
    assert rig.store.writes.count("note_worker") == before


def test_a_lease_heartbeat_elsewhere_keeps_the_word(rig: Rig, other: Tenure) -> None:
    won = rig.claimed("w1")
    waiting = queued(rig)
    _say(other, runtime=REFUSING)
    assert queued_code(rig, waiting) == "runtime_refusing"
    rig.advance(PAST_THE_WINDOW_S)
    rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert queued_code(rig, waiting) == "runtime_refusing"


def test_a_silent_heartbeat_elsewhere_keeps_the_version_a_later_claim_stored(
    rig: Rig, other: Tenure
) -> None:
    rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 0, None)  # this process's copy: 1.0
    other.claims.claim(WORKER, POOL, "w1", "2.0", 0, None)  # restarted at 2.0, heard elsewhere
    assert _version(rig) == "2.0"
    rig.advance(PAST_THE_WINDOW_S)
    _say(rig.svc)  # a worker heartbeat does not say its version
    assert _version(rig) == "2.0"
    _say(rig.svc, runtime=OK)  # nor does one that says a word
    assert _version(rig) == "2.0"


def _version(rig: Rig) -> str | None:
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None
    return seen.worker_version
