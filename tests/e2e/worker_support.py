"""Helpers for the worker SDK / `tenure` CLI tests: real `tenure worker run` subprocesses.

Every process a test starts carries a tag in its environment (the worker hands its own
environment to the shim and the job), so the fixture can find and end all of them, even jobs
that outlived a killed worker in sessions of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.support import SHORT, TIMELINE_WAIT, World, wait_for

TAG_VAR = "TENURE_E2E_WORKER_TAG"
BIN = Path(sys.executable).parent
CLI: list[str] = (
    [str(BIN / "tenure")] if (BIN / "tenure").exists() else [sys.executable, "-m", "tenure_cli"]
)


def service_url(base: str) -> str:
    """The address a worker is given: the stack's base without `/api/v1`."""
    return base.removesuffix("/api/v1")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any TENURE_* setting, the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        env=env if env is not None else clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def tagged_pids(tag: str) -> list[int]:
    """Live processes whose environment carries `tag`."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


@dataclass
class WorkerRun:
    proc: subprocess.Popen[bytes]
    stderr_path: Path
    stdout_path: Path
    state_dir: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {self.pid} still running after {timeout:.0f}s; stderr:\n{self.stderr()}"
            ) from None

    def wait_for_log(self, text: str, timeout: float) -> str:
        return wait_for(
            lambda: self.stderr() if text in self.stderr() else None,
            timeout,
            f"{text!r} in the worker's stderr",
        )

    def state_files(self) -> list[dict[str, Any]]:
        """The worker's persisted leases (`<lease>.json`, not the payload files)."""
        out = []
        for path in self.state_dir.glob("*.json"):
            if path.name.endswith(".payload.json"):
                continue
            with contextlib.suppress(OSError, ValueError):
                out.append(json.loads(path.read_text()))
        return out


@dataclass
class Workers:
    """Starts `tenure worker run` processes and ends them, and everything they started."""

    root: Path
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    runs: list[WorkerRun] = field(default_factory=list)

    def start(
        self,
        base: str,
        token: str,
        pool: str,
        script: str,
        *,
        state_dir: Path | None = None,
        once: bool = True,
        kill_grace: float | None = None,
        token_in_env: bool = False,
        extra: list[str] | None = None,
    ) -> WorkerRun:
        n = len(self.runs)
        state = state_dir or self.root / f"state-{n}"
        args = [*CLI, "worker", "run", "--api", service_url(base), "--pool", pool]
        env = clean_env(**{TAG_VAR: self.tag})
        if token_in_env:
            env["TENURE_TOKEN"] = token  # the job must not inherit it
        else:
            args += ["--token", token]
        args += ["--state-dir", str(state)]
        if once:
            args.append("--once")
        if kill_grace is not None:
            args += ["--kill-grace", str(kill_grace)]
        args += [*(extra or []), "--", "sh", "-c", script]
        out, err = self.root / f"worker-{n}.out", self.root / f"worker-{n}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(
                args,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                cwd=self.root,
                start_new_session=True,
            )
        run = WorkerRun(proc, err, out, state)
        self.runs.append(run)
        return run

    def cleanup(self) -> None:
        for run in self.runs:
            with contextlib.suppress(ProcessLookupError):
                run.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.proc.wait(timeout=10)
        own_group = os.getpgrp()
        for _ in range(3):
            pids = tagged_pids(self.tag)
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    group = os.getpgid(pid)
                    if group != own_group:
                        os.killpg(group, signal.SIGCONT)  # a paused job must die too
                        os.killpg(group, signal.SIGKILL)
                    else:
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)


def running_workers(root: Path) -> Iterator[Workers]:
    """Body of each test module's `workers` fixture: ends every process it started."""
    w = Workers(root)
    try:
        yield w
    finally:
        w.cleanup()


@dataclass
class Site:
    """A test's own pool (short timings) in its own space, and a worker token for it."""

    world: World
    pool: str
    token: str

    @classmethod
    def make(cls, world: World, **timings: int) -> Site:
        """`timings`: any of the pool's timings other than SHORT's."""
        pool = world.pool(**{**SHORT, **timings})["name"]
        return cls(world, pool, world.worker_token([pool]))

    @property
    def admin(self) -> httpx.Client:
        return self.world.admin

    def task(self, title: str | None = None) -> tuple[str, str, str]:
        """A task enqueued on the pool: (task id, lease id, title)."""
        title = title or f"job {uuid.uuid4().hex[:8]}"
        created = self.world.task(pool=self.pool, title=title)
        return created["task"]["id"], created["lease"]["id"], title

    def operator(self) -> httpx.Client:
        return self.world.api.client(self.world.operator_token("member", [self.world.space]))


# ----------------------------------------------------------------------- API reads


def lease(client: httpx.Client, lease_id: str) -> dict[str, Any]:
    r = client.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def wait_lease(
    client: httpx.Client, lease_id: str, states: set[str], timeout: float = 15
) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def check() -> dict[str, Any] | None:
        nonlocal last
        last = lease(client, lease_id)
        return last if last["state"] in states else None

    try:
        return wait_for(check, timeout, f"lease {lease_id} in {sorted(states)}")
    except AssertionError as err:
        raise AssertionError(f"{err}; last seen: {last.get('state')}") from None


def wait_event(
    client: httpx.Client, task_id: str, event_type: str, timeout: float = TIMELINE_WAIT
) -> dict[str, Any]:
    """The first `event_type` event on the task's timeline (events arrive asynchronously)."""

    def check() -> dict[str, Any] | None:
        r = client.get(f"/tasks/{task_id}/activity")
        assert r.status_code == 200, r.text
        for ev in r.json()["events"]:
            if ev["type"] == event_type:
                found: dict[str, Any] = ev
                return found
        return None

    return wait_for(check, timeout, f"{event_type} on the timeline of task {task_id}")


def events(client: httpx.Client, task_id: str) -> list[dict[str, Any]]:
    r = client.get(f"/tasks/{task_id}/activity")
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["events"]
    return found


def wait_file_lines(path: Path, count: int, timeout: float) -> list[str]:
    return wait_for(
        lambda: lines if len(lines := read_lines(path)) >= count else None,
        timeout,
        f"{count} lines in {path.name}",
    )


class Blackhole:
    """A TCP relay to the stack that can be made to go silent: it keeps accepting connections
    and holds them open, answering nothing (a hung service, not a refused one)."""

    def __init__(self, base: str) -> None:
        target = httpx.URL(base)
        self.upstream = (target.host, target.port or 80)
        self.silent = threading.Event()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}{target.path}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _keep(self, sock: socket.socket) -> None:
        with self.lock:
            self.sockets.append(sock)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._keep(client)
            if self.silent.is_set():
                continue  # held open, never answered
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            self._keep(upstream)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.closed.is_set():
                chunk = src.recv(65536)
                if not chunk:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                if self.silent.is_set():
                    return  # swallow it; the connection stays open and answers nothing
                dst.sendall(chunk)
        except OSError:
            return

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.close()


def _read_http_message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message (head and a Content-Length body) off `sock`; b"" on EOF first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class LosesFirstClaimAnswer:
    """A relay (127.0.0.1 only) that delivers the first claim request to the stack, waits for
    the stack's answer, keeps it, and closes the worker's connection without it: a claim the
    service applied whose answer was lost. Everything else passes through, one request per
    connection (the SDK sends `Connection: close`)."""

    def __init__(self, base: str) -> None:
        target = httpx.URL(base)
        self.upstream = (target.host, target.port or 80)
        self.lost: list[bytes] = []  # the answers the worker never saw
        self.claims = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}{target.path}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with contextlib.ExitStack() as stack:
            stack.callback(client.close)
            request = _read_http_message(client)
            if not request:
                return
            method, path = request.split(b" ", 2)[:2]
            upstream = socket.create_connection(self.upstream, timeout=60)
            stack.callback(upstream.close)
            upstream.sendall(request)
            answer = _read_http_message(upstream)
            with self.lock:
                is_claim = method == b"POST" and path.endswith(b"/claim")
                self.claims += is_claim
                drop = is_claim and not self.lost
                if drop:
                    self.lost.append(answer)
            if not drop:
                client.sendall(answer)

    def lost_answer(self) -> tuple[int, dict[str, Any]]:
        """The status and body of the claim answer the worker never saw."""
        head, _, body = self.lost[0].partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        return status, json.loads(body) if body else {}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.close()
