"""Plain-HTTP helpers for the end-to-end tier: a recording client, waits, and set-up calls."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from tenure.domain.fencing import DEADLINE_SLACK

from tests.conftest import SESSION_SWEEP_SECONDS

T = TypeVar("T")

# Short timings (renew, grace, toleration) for the tests that wait for the sweeper.
SHORT = {"renew_seconds": 1, "grace_seconds": 3, "toleration_seconds": 4}
# With the session stack's sweep (a pass every 2 s), a silent short-timing lease is lost at
# most this long after its last sign of life: (1 + DEADLINE_SLACK) x 4 s + 2 s, 8 s.
SHORT_LOST_BY = SHORT["toleration_seconds"] * (1 + DEADLINE_SLACK) + SESSION_SWEEP_SECONDS
# How long a test waits for a silent short-timing lease to be swept; generous for 2 cores (a
# late pass there reads as the sweeper's absence and pushes deadlines out).
EXPIRY_WAIT = 30.0
# How long a test waits for the stream reactor to write a timeline event (~0.2 s lag).
TIMELINE_WAIT = 10.0


@dataclass
class Seen:
    method: str
    path: str
    status: int
    body: bytes


@dataclass
class Recorder:
    """Every response any e2e client received, and every raw secret a response handed out."""

    seen: list[Seen] = field(default_factory=list)
    lease_tokens: set[str] = field(default_factory=set)
    worker_tokens: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, response: httpx.Response) -> None:
        response.read()
        req = response.request
        row = Seen(req.method, req.url.path, response.status_code, response.content)
        with self.lock:
            self.seen.append(row)
            if response.status_code in (200, 201) and response.content:
                try:
                    body = response.json()
                except ValueError:
                    return
                if isinstance(body, dict) and isinstance(body.get("token"), str):
                    token = body["token"]
                    if token.startswith("tnr_l_"):
                        self.lease_tokens.add(token)
                    elif token.startswith("tnr_w_"):
                        self.worker_tokens.add(token)


@dataclass
class Api:
    base: str
    admin_token: str
    recorder: Recorder

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(
            base_url=self.base,
            headers=headers,
            timeout=60,
            event_hooks={"response": [self.recorder.hook]},
        )

    def admin(self) -> httpx.Client:
        return self.client(self.admin_token)


def suffix() -> str:
    return uuid.uuid4().hex[:10].upper()


def sha256_hex(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def assert_error(r: httpx.Response, status: int, code: str, mentions: str | None = None) -> str:
    """The exact error envelope, `{"error": {"code", "message"}}`; returns the message."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and message.strip(), body
    if mentions is not None:
        assert mentions in message, (mentions, message)
    return message


def wait_for(check: Callable[[], T | None], timeout: float, what: str, every: float = 0.2) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` on timeout."""
    give_up = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > give_up:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def activity_types(client: httpx.Client, task_id: str) -> list[str]:
    r = client.get(f"/tasks/{task_id}/activity")
    assert r.status_code == 200, r.text
    return [ev["type"] for ev in r.json()["events"]]


def wait_for_activity(
    client: httpx.Client, task_id: str, wanted: list[str], timeout: float = TIMELINE_WAIT
) -> list[dict[str, Any]]:
    """Wait until every type in `wanted` is on the task's timeline; return the events."""

    seen: list[str] = []

    def check() -> list[dict[str, Any]] | None:
        r = client.get(f"/tasks/{task_id}/activity")
        assert r.status_code == 200, r.text
        events: list[dict[str, Any]] = r.json()["events"]
        seen[:] = [ev["type"] for ev in events]
        return events if all(t in seen for t in wanted) else None

    try:
        return wait_for(check, timeout, f"{wanted} on the timeline of task {task_id}")
    except AssertionError as late:
        raise AssertionError(f"{late}; the timeline holds {seen}") from None


def wait_for_lease_state(
    client: httpx.Client, lease_id: str, states: set[str], timeout: float
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        r = client.get(f"/leases/{lease_id}")
        assert r.status_code == 200, r.text
        lease: dict[str, Any] = r.json()
        return lease if lease["state"] in states else None

    return wait_for(check, timeout, f"lease {lease_id} to become one of {sorted(states)}")


@dataclass
class World:
    """One test's own space, with helpers to set up pools, tokens and tasks in it."""

    api: Api
    admin: httpx.Client
    space: str

    def pool(self, **fields: Any) -> dict[str, Any]:
        body = {"name": f"pool-{suffix().lower()}", "space": self.space, "kind": "command"}
        body.update(fields)
        r = self.admin.post("/pools", json=body)
        assert r.status_code == 201, r.text
        created: dict[str, Any] = r.json()
        return created

    def worker_token(self, pools: list[str] | None) -> str:
        body: dict[str, Any] = {"name": f"worker-{suffix().lower()}", "kind": "worker"}
        if pools is not None:
            body["pools"] = pools
        r = self.admin.post("/tokens", json=body)
        assert r.status_code == 201, r.text
        token: str = r.json()["token"]
        return token

    def operator_token(self, role: str, spaces: list[str] | None = None) -> str:
        body: dict[str, Any] = {"name": f"op-{suffix().lower()}", "kind": "operator", "role": role}
        if spaces is not None:
            body["spaces"] = spaces
        r = self.admin.post("/tokens", json=body)
        assert r.status_code == 201, r.text
        token: str = r.json()["token"]
        return token

    def task(self, pool: str | None = None, **fields: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"space": self.space, "title": f"task {suffix()}"}
        if pool is not None:
            body["pool"] = pool
        body.update(fields)
        r = self.admin.post("/tasks", json=body)
        assert r.status_code == 201, r.text
        created: dict[str, Any] = r.json()
        return created

    def claim(
        self, worker: httpx.Client, pool: str, worker_id: str = "w-1", **fields: Any
    ) -> dict[str, Any]:
        r = worker.post(f"/pools/{pool}/claim", json={"worker_id": worker_id, **fields})
        assert r.status_code == 200, r.text
        won: dict[str, Any] = r.json()
        return won

    def held(self, pool: str, worker: httpx.Client, **task_fields: Any) -> Held:
        """A task enqueued on `pool` and claimed by `worker`; its lease is `dispatched`."""
        task = self.task(pool=pool, **task_fields)
        won = self.claim(worker, pool)
        assert won["lease"]["id"] == task["lease"]["id"], "the pool held another lease"
        return Held(task=task["task"], won=won, lease=self.api.client(won["token"]))


@dataclass
class Held:
    task: dict[str, Any]
    won: dict[str, Any]
    lease: httpx.Client  # speaks with the lease's own token

    @property
    def id(self) -> str:
        lease_id: str = self.won["lease"]["id"]
        return lease_id


def proc_table() -> dict[int, tuple[int, str, str]]:
    """pid -> (parent pid, state, command line) of every live process (Linux /proc)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        table[int(entry.name)] = (int(fields[1]), fields[0], cmd)
    return table


def descendants(pid: int) -> dict[int, str]:
    table = proc_table()
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _, cmd) in table.items():
            if ppid == parent and child not in found:
                found[child] = cmd
                frontier.append(child)
    return found


def alive(pids: dict[int, str]) -> dict[int, str]:
    table = proc_table()
    return {
        pid: cmd
        for pid, cmd in pids.items()
        if pid in table and table[pid][1] != "Z" and table[pid][2] == cmd
    }


def reap(pids: dict[int, str], patience: float = 10.0) -> dict[int, str]:
    """End the processes of `pids` (started by this tier) still alive; return those that were."""
    left = alive(pids)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    give_up = time.monotonic() + patience
    while alive(left) and time.monotonic() < give_up:
        time.sleep(0.2)
    for pid in alive(left):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left
