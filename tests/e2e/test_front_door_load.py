"""The front door under load: 64 workers at once on a busy machine lose no connection.

The workers long-poll for claims, some stall for seconds before they report, half of them
share one connection pool smaller than themselves (as threads sharing one `requests` session
do, so most of their requests open a new connection) and half keep their own, while CPU-bound
neighbours keep both cores busy. On 127.0.0.1 a connection is only ever slow to open, or reset
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
TASKS = 120
# How long the workers keep claiming; each request in flight at the end still finishes.
LOAD_SECONDS = 20.0
WAITS = (0.0, 1.0, 5.0, 20.0)  # the claim's wait_seconds, up to the API's ceiling
STALL = (5.0, 9.0)  # a stalled worker's pause before it reports
STALL_ONE_IN = 4
# Under the kernel's first SYN retransmission (1 s): longer means the handshake was dropped.
CONNECT_TIMEOUT = 0.9
# A busy machine makes answers slow, not lost: a read gets the claim's wait and this much.
READ_MARGIN = 30.0
SHARED_POOL = 10  # `requests`' default pool size, shared by half the workers
CORES = 2  # the machine the suite is sized for
# The neighbours end themselves if this test is killed before it ends them.
NEIGHBOUR_SECONDS = 120


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, route: str, status: int) -> None:
        with self.lock:
            self.answers[f"{route} {status}"] += 1

    def error(self, route: str, err: Exception) -> None:
        with self.lock:
            self.errors[type(err).__name__] += 1
            if len(self.samples) < 5:
                self.samples.append(f"{route}: {type(err).__name__}: {err}")


@contextlib.contextmanager
def busy_machine() -> Iterator[None]:
    """One CPU-bound process per core, as when other work shares the machine."""
    spin = f"import signal; signal.alarm({NEIGHBOUR_SECONDS})\nwhile True: pass"
    neighbours = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(CORES)]
    try:
        yield
    finally:
        for proc in neighbours:
            proc.kill()
            proc.wait(timeout=10)


def _client(world: World, token: str, pool_size: int | None) -> httpx.Client:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=pool_size)
    return httpx.Client(
        base_url=world.api.base,
        headers={"authorization": f"Bearer {token}"},
        timeout=httpx.Timeout(READ_MARGIN, connect=CONNECT_TIMEOUT),
        limits=limits,
    )


def _work(n: int, client: httpx.Client, pool: str, tally: Tally, end: float) -> None:
    """Claim, start, maybe stall, complete; until `end`. Any transport error ends the worker."""
    rng = random.Random(n)
    route = "claim"
    try:
        while time.monotonic() < end:
            wait = min(rng.choice(WAITS), max(0.0, end - time.monotonic()))
            route = "claim"
            r = client.post(
                f"/pools/{pool}/claim",
                json={"worker_id": f"load-{n}", "wait_seconds": wait},
                timeout=httpx.Timeout(READ_MARGIN + wait, connect=CONNECT_TIMEOUT),
            )
            tally.answer(route, r.status_code)
            if r.status_code != 200:
                continue
            won = r.json()
            lease = {"authorization": f"Bearer {won['token']}"}
            path = f"/leases/{won['lease']['id']}"
            route = "start"
            tally.answer(route, client.post(f"{path}/start", headers=lease).status_code)
            if rng.randrange(STALL_ONE_IN) == 0:
                time.sleep(rng.uniform(*STALL))
            route = "complete"
            r = client.post(f"{path}/complete", headers=lease, json={"outcome": "success"})
            tally.answer(route, r.status_code)
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
    threads = []
    with busy_machine():
        end = time.monotonic() + LOAD_SECONDS
        for n in range(CLIENTS):
            client = shared if n % 2 else own[n // 2]
            threads.append(
                threading.Thread(target=_work, args=(n, client, pool, tally, end), daemon=True)
            )
            threads[-1].start()
        give_up = end + max(WAITS) + READ_MARGIN * 2
        for thread in threads:
            thread.join(timeout=max(0.0, give_up - time.monotonic()))
    stuck = sum(thread.is_alive() for thread in threads)
    for client in (shared, *own):
        client.close()
    print(f"answers {dict(tally.answers)}, errors {dict(tally.errors)}")
    assert not tally.errors, f"{dict(tally.errors)}: {tally.samples}"
    assert stuck == 0, f"{stuck} workers still waiting for an answer"
    assert tally.answers["complete 200"] >= CLIENTS, dict(tally.answers)
    assert not [key for key in tally.answers if key.endswith((" 500", " 503"))], tally.answers
