"""A fault proxy between one worker and the service: forwards HTTP, drops or delays answers.

One proxy per worker, so every request it sees is that worker's. Each request is forwarded
to the service on a connection of its own; the answer is then handed on, handed on late, or
dropped (the connection closed with nothing written: the service acted, the worker never
hears of it). While the worker is cut off, requests are closed unforwarded and answers in
flight are dropped. The per-request fates come from the proxy's own seeded generator, drawn
in arrival order, so one seed gives one fault schedule. Every exchange goes to the journal,
minus any lease token an answer carries.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tests.reliability.history import Exchange, Journal

UPSTREAM_TIMEOUT_S = 60.0


@dataclass
class ProxyFaults:
    drop: float = 0.03  # share of answers dropped after the service acted
    delay: float = 0.05  # share of answers held back
    delay_range: tuple[float, float] = (0.3, 2.5)


class FaultProxy:
    def __init__(
        self, name: str, upstream: str, journal: Journal, seed: int, faults: ProxyFaults
    ) -> None:
        parts = urlsplit(upstream)
        self.name = name
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.journal = journal
        self.faults = faults
        self.rng = random.Random(f"{seed}:proxy:{name}")
        self.rng_lock = threading.Lock()
        self.cut_until = 0.0
        self.counts = {"dropped": 0, "delayed": 0, "cut": 0}
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, name=f"proxy-{name}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def start(self) -> FaultProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()

    def cut(self, seconds: float) -> None:
        """Cut the worker off from the service for `seconds` from now."""
        self.cut_until = max(self.cut_until, time.time() + seconds)

    def is_cut(self) -> bool:
        return time.time() < self.cut_until

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _fate(self) -> tuple[str, float]:
        with self.rng_lock:
            roll, pause = self.rng.random(), self.rng.uniform(*self.faults.delay_range)
        if roll < self.faults.drop:
            return "dropped", 0.0
        if roll < self.faults.drop + self.faults.delay:
            return "delayed", pause
        return "delivered", 0.0

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.closing(conn):
            conn.settimeout(UPSTREAM_TIMEOUT_S)
            reader = conn.makefile("rb")
            while True:
                request = _read_request(reader)
                if request is None:
                    return
                if not self._exchange(conn, *request):
                    return

    def _exchange(
        self, conn: socket.socket, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> bool:
        """One request through; False when the connection must close."""
        start = time.time()
        ex = Exchange(self.name, method, path, start, start, "cut", request=_json(body))
        if self.is_cut():
            self.counts["cut"] += 1
            ex.end = time.time()
            self.journal.exchange(ex)
            _reset(conn)
            return False
        fate, pause = self._fate()
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            forward = {k: v for k, v in headers.items() if k.lower() not in ("connection",)}
            upstream.request(method, path, body=body or None, headers=forward)
            answer = upstream.getresponse()
            raw = answer.read()
            status, answer_headers = answer.status, answer.getheaders()
        except OSError:
            ex.end, ex.fate = time.time(), "cut"  # the service never answered
            self.journal.exchange(ex)
            _reset(conn)
            return False
        finally:
            upstream.close()
        ex.status, ex.response = status, _scrub(_json(raw))
        if fate == "delayed":
            time.sleep(pause)
        if fate == "dropped" or self.is_cut():
            fate = "dropped"
            self.counts["dropped"] += 1
            ex.end, ex.fate = time.time(), fate
            self.journal.exchange(ex)
            _reset(conn)
            return False
        if fate == "delayed":
            self.counts["delayed"] += 1
        lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, '')}"]
        for key, value in answer_headers:
            if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                lines.append(f"{key}: {value}")
        lines += [f"content-length: {len(raw)}", "connection: close", "", ""]
        try:
            conn.sendall("\r\n".join(lines).encode() + raw)
        except OSError:
            fate = "dropped"  # the worker gave up waiting: it never heard
        ex.end, ex.fate = time.time(), fate
        self.journal.exchange(ex)
        return False


def _read_request(reader: Any) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        line = reader.readline(65537)
        if not line:
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = reader.readline(65537)
            if raw in (b"\r\n", b"\n", b""):
                break
            key, _, value = raw.decode("latin-1").partition(":")
            headers[key.strip()] = value.strip()
        length = int(headers.get("Content-Length") or headers.get("content-length") or 0)
        body = reader.read(length) if length else b""
    except (OSError, ValueError):
        return None
    return method, path, headers, body


def _reset(conn: socket.socket) -> None:
    """Close so the worker sees a broken connection, not a clean empty answer."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _scrub(body: Any) -> Any:
    """No raw token is kept in the journal (a claim's answer carries the lease token)."""
    if isinstance(body, dict) and "token" in body:
        return {**body, "token": "[redacted]"}
    return body
