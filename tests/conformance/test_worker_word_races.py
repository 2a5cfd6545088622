"""A worker's word, raced on DynamoDB Local: one process stores what the worker says of its
runtime while seven others, each with its own memory of the worker rows, write the same
worker's sign of life at the same moment. The word stands every time: a sign of life sets
last_seen and the version alone and never writes a word back.

moto does not apply writes atomically across threads, so none of this runs there."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tenure.app.tenure import Tenure
from tenure.domain.model import DEFAULT_GRACE_SECONDS, Worker
from tenure.wiring import SystemClock

from tests.conformance.contract import ALPHA, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads
from tests.conftest import WORKER, Rig

ROUNDS = 6
REFUSING = {"state": "refusing", "reason": "docker daemon down"}
OK = {"state": "ok"}


def _beats(services: list[Tenure]) -> Callable[[int], None]:
    """Process 0 says the worker refuses; every other one hears a silent worker heartbeat,
    all at once."""
    start = threading.Barrier(len(services), timeout=60)

    def beat(i: int) -> None:
        start.wait()
        said = {"runtime": REFUSING} if i == 0 else {}
        services[i].reports.worker_heartbeat(WORKER, "w1", [], pool=ALPHA, **said)

    return beat


def test_a_word_said_amid_seven_signs_of_life_is_never_written_back(rig: Rig) -> None:
    make_world(rig.svc)
    for round_ in range(ROUNDS):
        # The row of a worker heard from long enough ago that every process's next sign of
        # life writes, saying ok; each process reads it before it writes.
        old = SystemClock().now_ms() - DEFAULT_GRACE_SECONDS * 1000
        rig.store.note_worker(Worker(ALPHA, "w1", old, None, runtime=OK))
        services = [real_time_service(rig)[0] for _ in range(THREADS)]
        run_threads(THREADS, _beats(services))
        seen = rig.store.get_worker(ALPHA, "w1")
        assert seen is not None and seen.runtime == REFUSING, round_
        assert seen.last_seen > old
