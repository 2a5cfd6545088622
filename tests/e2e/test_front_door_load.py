"""The front door under load: 64 workers at once on a busy machine lose no connection.

The workers long-poll for claims, some stall for seconds before they report, half of them
share one connection pool smaller than themselves (as threads sharing one `requests` session
do, so most of their requests open a new connection) and half keep their own, while a CPU-bound
neighbour keeps a core busy. On 127.0.0.1 a connection is only ever slow to open, or reset
before the front door sees it, when the kernel dropped its handshake because the front door's
listen queue was full; so a connect timeout well under the kernel's first retransmission (1 s)
catches a dropped handshake even when no reset follows.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from tests.e2e.support import World

CLIENTS = 64
# Each worker claims once: half of them win a lease, the others long-poll until their wait
# has passed, the last while the winners report.
TASKS = CLIENTS // 2
# The claim's wait_seconds, up to the API's ceiling. Never 0: a claim that loses every race
# for a task still looks again, so every task is claimed while some claim still waits.
WAITS = (1.0, 2.0, 5.0, 20.0)
STALL = (5.0, 9.0)  # a stalled worker's pause before it reports
STALL_ONE_IN = 4
# Under the kernel's first SYN retransmission (1 s): longer means the handshake was dropped.
CONNECT_TIMEOUT = 0.9
# A busy machine makes answers slow, not lost: a read gets the claim's wait and this much
# (64 workers, their invocations, DynamoDB Local and the neighbour share two cores).
READ_MARGIN = 90.0
SHARED_POOL = 10  # `requests`' default pool size, shared by half the workers
# A bound on the run: a worker waits for three answers at most.
GIVE_UP_SECONDS = 3 * READ_MARGIN + max(WAITS)
# The neighbour ends itself if this test is killed before it ends it.
NEIGHBOUR_SECONDS = int(GIVE_UP_SECONDS) + 60


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    slowest: dict[str, float] = field(default_factory=dict)  # seconds, by route
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, route: str, r: httpx.Response) -> None:
        took = r.elapsed.total_seconds()
        with self.lock:
            self.answers[f"{route} {r.status_code}"] += 1
            self.slowest[route] = round(max(took, self.slowest.get(route, 0.0)), 1)

    def error(self, route: str, err: Exception) -> None:
        with self.lock:
            self.errors[type(err).__name__] += 1
            if len(self.samples) < 5:
                self.samples.append(f"{route}: {type(err).__name__}: {err}")


@contextlib.contextmanager
def busy_machine() -> Iterator[None]:
    """A CPU-bound process, as when other work shares the machine."""
    spin = f"import signal; signal.alarm({NEIGHBOUR_SECONDS})\nwhile True: pass"
    neighbour = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        neighbour.kill()
        neighbour.wait(timeout=10)


def _client(world: World, token: str, pool_size: int) -> httpx.Client:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=pool_size)
    return httpx.Client(
        base_url=world.api.base,
        headers={"authorization": f"Bearer {token}"},
        timeout=httpx.Timeout(READ_MARGIN, connect=CONNECT_TIMEOUT),
        limits=limits,
    )


def _work(n: int, client: httpx.Client, pool: str, tally: Tally) -> None:
    """One claim; if it wins a lease, start it, maybe stall, and complete it. A transport
    error ends the worker: it is what this test looks for."""
    rng = random.Random(n)
    route = "claim"
    try:
        wait = rng.choice(WAITS)
        r = client.post(
            f"/pools/{pool}/claim",
            json={"worker_id": f"load-{n}", "wait_seconds": wait},
            timeout=httpx.Timeout(READ_MARGIN + wait, connect=CONNECT_TIMEOUT),
        )
        tally.answer(route, r)
        if r.status_code != 200:
            return
        won = r.json()
        lease = {"authorization": f"Bearer {won['token']}"}
        path = f"/leases/{won['lease']['id']}"
        route = "start"
        tally.answer(route, client.post(f"{path}/start", headers=lease))
        if rng.randrange(STALL_ONE_IN) == 0:
            time.sleep(rng.uniform(*STALL))
        route = "complete"
        r = client.post(f"{path}/complete", headers=lease, json={"outcome": "success"})
        tally.answer(route, r)
    except httpx.TransportError as err:
        tally.error(route, err)


def test_64_workers_on_a_busy_machine_lose_no_connection(world: World) -> None:
    pool = world.pool(toleration_seconds=3600)["name"]
    token = world.worker_token([pool])
    with ThreadPoolExecutor(max_workers=8) as filing:
        list(filing.map(lambda _: world.task(pool=pool), range(TASKS)))
    tally = Tally()
    shared = _client(world, token, SHARED_POOL)
    own = [_client(world, token, 1) for _ in range(CLIENTS // 2)]
    threads = [
        threading.Thread(
            target=_work, args=(n, shared if n % 2 else own[n // 2], pool, tally), daemon=True
        )
        for n in range(CLIENTS)
    ]
    with busy_machine():
        for thread in threads:
            thread.start()
        give_up = time.monotonic() + GIVE_UP_SECONDS
        for thread in threads:
            thread.join(timeout=max(0.0, give_up - time.monotonic()))
    stuck = sum(thread.is_alive() for thread in threads)
    for client in (shared, *own):
        client.close()
    seen = f"answers {dict(tally.answers)}, slowest (s) {tally.slowest}"
    print(f"{seen}, errors {dict(tally.errors)}")
    assert not tally.errors, f"{dict(tally.errors)}: {tally.samples}; {seen}"
    assert stuck == 0, f"{stuck} workers still waiting for an answer; {seen}"
    assert tally.answers["claim 200"] == TASKS, seen
    assert tally.answers["claim 204"] == CLIENTS - TASKS, seen
    assert tally.answers["start 200"] == tally.answers["complete 200"] == TASKS, seen
