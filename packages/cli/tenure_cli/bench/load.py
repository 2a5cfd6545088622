"""`tenure bench load`: a steady mix of worker and operator traffic against a local stack, with
latency per route and throughput.

Each simulated worker is a thread with its own HTTP connection, looping as a real worker and
its operator would: file a task on the pool, claim (a short wait), renew every lease it holds
in one batched worker heartbeat, read (the lease, a page of the space's leases, the task's
timeline), then report — complete, or fail one time in five. Every answer is checked against
what the route promises; anything else is counted as an error with its status and route.

It runs against a stack that is already up (`--api`, `--token`), or starts its own `tenure
local` in a scratch directory (`--start`) and stops it afterwards. Timings are wall-clock on the
client, so they include the front door, the handler and DynamoDB Local (or moto), all on the
same machine as the load itself.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tenure_cli.stack_record import running_stack

FAIL_ONE_IN = 5  # one run in five reports a failure, the rest complete
CLAIM_WAIT_SECONDS = 0.5
HOLD = 2  # leases a worker holds at once, renewed together in one worker heartbeat
START_TIMEOUT_SECONDS = 180.0


@dataclass
class Tally:
    """Latencies per route and every unexpected answer, shared by the worker threads."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    samples: list[str] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    reported_in_all: int = 0  # warm-up and the requests in flight at the stop included
    seen: Counter[str] = field(default_factory=Counter)  # answers per route, whole run
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The measured window: requests that started after the warm-up (the front door starts its
    # worker processes, like Lambda's cold starts, on first use) and ended before the stop.
    window: tuple[float, float] = (0.0, float("inf"))

    def record(self, route: str, started: float, ended: float) -> None:
        with self.lock:
            self.seen[route] += 1
        if started >= self.window[0] and ended <= self.window[1]:
            with self.lock:
                self.latencies[route].append(ended - started)

    def reported(self, failed: bool, at: float) -> None:
        with self.lock:
            self.reported_in_all += 1
        if self.window[0] <= at <= self.window[1]:
            with self.lock:
                if failed:
                    self.failed += 1
                else:
                    self.completed += 1

    def error(self, route: str, detail: str) -> None:
        with self.lock:
            self.errors[route] += 1
            if len(self.samples) < 20:
                self.samples.append(f"{route}: {detail}")


class Unexpected(Exception):
    pass


@dataclass
class Worker:
    """One simulated worker: its HTTP clients, the leases it holds, and its loop."""

    n: int
    base: str
    admin_token: str
    worker_token: str
    space: str
    pool: str
    tally: Tally
    stop: threading.Event
    rng: random.Random
    held: list[dict[str, Any]] = field(default_factory=list)

    @property
    def worker_id(self) -> str:
        return f"load-{self.n:03d}"

    def call(
        self,
        client: httpx.Client,
        route: str,
        method: str,
        path: str,
        expect: tuple[int, ...],
        **kw: Any,
    ) -> httpx.Response:
        started = time.perf_counter()
        try:
            r = client.request(method, path, **kw)
        except httpx.HTTPError as err:
            self.tally.error(route, f"{type(err).__name__}: {err}")
            raise Unexpected(route) from err
        self.tally.record(route, started, time.perf_counter())
        if r.status_code not in expect:
            self.tally.error(route, f"{r.status_code} {r.text[:200]}")
            raise Unexpected(route)
        return r

    def run(self) -> None:
        limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
        with httpx.Client(base_url=self.base, timeout=60, limits=limits) as http:
            admin = {"authorization": f"Bearer {self.admin_token}"}
            worker = {"authorization": f"Bearer {self.worker_token}"}
            while not self.stop.is_set():
                try:
                    self.step(http, admin, worker)
                except Unexpected:
                    time.sleep(0.1)  # counted; keep the pressure steady, do not spin
            for lease in self.held:  # leave nothing held behind
                with suppress(Unexpected):
                    self.finish(http, lease)

    def step(self, http: httpx.Client, admin: dict[str, str], worker: dict[str, str]) -> None:
        body = {"space": self.space, "title": f"load {self.worker_id}", "pool": self.pool}
        self.call(http, "POST /tasks", "POST", "/tasks", (201,), json=body, headers=admin)
        claim = {"worker_id": self.worker_id, "wait_seconds": CLAIM_WAIT_SECONDS}
        claimed = self.call(
            http,
            "POST /pools/{pool}/claim",
            "POST",
            f"/pools/{self.pool}/claim",
            (200, 204),
            json=claim,
            headers=worker,
        )
        if claimed.status_code == 200:
            won = claimed.json()
            self.held.append(
                {"id": won["lease"]["id"], "fence": won["fence"], "token": won["token"]}
                | {"task_id": (won["lease"].get("task") or {}).get("id")}
            )
        if self.held:
            beat = {"leases": [{"id": x["id"], "fence": x["fence"]} for x in self.held]}
            r = self.call(
                http,
                "POST /workers/{worker_id}/heartbeat",
                "POST",
                f"/workers/{self.worker_id}/heartbeat",
                (200,),
                json=beat,
                headers=worker,
            )
            refused = [row for row in r.json()["leases"] if row.get("error")]
            if refused:
                self.tally.error("POST /workers/{worker_id}/heartbeat", f"refused rows {refused}")
        self.reads(http, admin)
        if len(self.held) >= HOLD or (self.held and claimed.status_code == 204):
            self.finish(http, self.held.pop(0))

    def reads(self, http: httpx.Client, admin: dict[str, str]) -> None:
        if self.held:
            lease = self.held[-1]
            self.call(
                http, "GET /leases/{id}", "GET", f"/leases/{lease['id']}", (200,), headers=admin
            )
            if lease["task_id"]:
                self.call(
                    http,
                    "GET /tasks/{id}/activity",
                    "GET",
                    f"/tasks/{lease['task_id']}/activity",
                    (200,),
                    headers=admin,
                )
        self.call(
            http,
            "GET /leases?space=",
            "GET",
            "/leases",
            (200,),
            params={"space": self.space, "limit": 20},
            headers=admin,
        )

    def finish(self, http: httpx.Client, lease: dict[str, Any]) -> None:
        own = {"authorization": f"Bearer {lease['token']}"}
        if self.rng.randrange(FAIL_ONE_IN) == 0:
            body: dict[str, Any] = {"error": "load: a simulated failure", "fence": lease["fence"]}
            path, route = f"/leases/{lease['id']}/fail", "POST /leases/{id}/fail"
        else:
            body = {"outcome": "success", "details": {"n": self.n}, "fence": lease["fence"]}
            path, route = f"/leases/{lease['id']}/complete", "POST /leases/{id}/complete"
        self.call(http, route, "POST", path, (200,), json=body, headers=own)
        self.tally.reported(route.endswith("fail"), time.perf_counter())


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _setup(base: str, admin_token: str) -> tuple[str, str, str]:
    """A space, a pool (default timings: nothing expires during a run) and a worker token."""
    space = f"LOAD{uuid.uuid4().hex[:8].upper()}"
    pool = f"load-{space.lower()}"
    with httpx.Client(
        base_url=base, timeout=60, headers={"authorization": f"Bearer {admin_token}"}
    ) as admin:
        for path, body in (
            ("/spaces", {"key": space, "name": "load test"}),
            ("/pools", {"name": pool, "space": space, "kind": "command"}),
        ):
            r = admin.post(path, json=body)
            if r.status_code != 201:
                raise RuntimeError(f"set-up {path} answered {r.status_code}: {r.text}")
        r = admin.post("/tokens", json={"name": f"{pool}-w", "kind": "worker", "pools": [pool]})
        if r.status_code != 201:
            raise RuntimeError(f"set-up /tokens answered {r.status_code}: {r.text}")
        return space, pool, str(r.json()["token"])


def run(
    base: str,
    admin_token: str,
    workers: int = 64,
    duration: float = 120.0,
    seed: int = 17,
    warmup: float = 15.0,
) -> dict[str, Any]:
    """Drive `workers` simulated workers for `warmup` + `duration` seconds; the figures of the
    last `duration` seconds as a dict (errors are counted over the whole run)."""
    space, pool, worker_token = _setup(base, admin_token)
    tally, stop = Tally(), threading.Event()
    crew = [
        Worker(
            n, base, admin_token, worker_token, space, pool, tally, stop, random.Random(seed + n)
        )
        for n in range(workers)
    ]
    threads = [threading.Thread(target=w.run, name=w.worker_id, daemon=True) for w in crew]
    begin = time.perf_counter() + warmup
    tally.window = (begin, begin + duration)
    for thread in threads:
        thread.start()
    stop.wait(warmup + duration)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    elapsed = duration
    routes = {}
    total = 0
    for route, values in sorted(tally.latencies.items()):
        ordered = sorted(values)
        total += len(ordered)
        routes[route] = {
            "requests": len(ordered),
            "p50_ms": round(1000 * _percentile(ordered, 0.50), 1),
            "p99_ms": round(1000 * _percentile(ordered, 0.99), 1),
            "max_ms": round(1000 * ordered[-1], 1),
        }
    return {
        "workers": workers,
        "warmup_seconds": warmup,
        "seconds": round(elapsed, 1),
        "requests": total,
        "requests_per_second": round(total / elapsed, 1),
        "leases_reported": tally.completed + tally.failed,
        "leases_per_second": round((tally.completed + tally.failed) / elapsed, 2),
        "completed": tally.completed,
        "leases_reported_whole_run": tally.reported_in_all,
        "requests_whole_run": dict(sorted(tally.seen.items())),
        "failed": tally.failed,
        "errors": sum(tally.errors.values()),
        "errors_by_route": dict(tally.errors),
        "error_samples": tally.samples,
        "routes": routes,
        "space": space,
        "stuck_threads": sum(t.is_alive() for t in threads),
    }


@contextmanager
def local_stack() -> Iterator[tuple[str, str, str]]:
    """`tenure local` in a scratch directory: (api base, admin token, dynamodb engine)."""
    from tenure_cli.local.engines import free_port

    token = f"tnr_o_load-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory(prefix="tenure-load-") as scratch:
        port = free_port()
        log = open(Path(scratch) / "stack.log", "wb")  # noqa: SIM115 - closed below
        data = str(Path(scratch) / "data")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tenure_cli.main",
                "local",
                "--port",
                str(port),
                "--data-dir",
                data,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TENURE_ADMIN_TOKEN": token, "PYTHONUNBUFFERED": "1"},
        )
        base = f"http://127.0.0.1:{port}/api/v1"
        try:
            give_up = time.monotonic() + START_TIMEOUT_SECONDS
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        "tenure local exited early:\n" + (Path(scratch) / "stack.log").read_text()
                    )
                # Up is its record written: the front door answers a moment before the start
                # has finished, and the record, which names the engine, comes last.
                info = running_stack(Path(data))
                try:
                    if info and httpx.get(f"{base}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > give_up:
                    raise RuntimeError("tenure local did not come up in time")
                time.sleep(0.3)
            yield base, token, str(info.get("dynamodb", {}).get("engine"))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            log.close()


def main(args: argparse.Namespace) -> int:
    if args.start:
        with local_stack() as (base, token, engine):
            figures = run(base, token, args.workers, args.duration, args.seed, args.warmup)
            figures["engine"] = engine
    else:
        token = args.token or os.environ.get("TENURE_ADMIN_TOKEN") or ""
        if not token:
            admin_file = Path(args.data_dir) / "admin-token"
            token = admin_file.read_text().strip() if admin_file.exists() else ""
        if not token:
            print(
                "error: no admin token (--token, TENURE_ADMIN_TOKEN or --data-dir)", file=sys.stderr
            )
            return 2
        figures = run(args.api, token, args.workers, args.duration, args.seed, args.warmup)
    print(json.dumps(figures, indent=2))
    return 0 if figures["errors"] == 0 and figures["stuck_threads"] == 0 else 1
