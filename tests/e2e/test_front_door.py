"""The local front door: its own answers (400, 405, 413, 500, 503) are the API's error envelope,
and how it holds connections: many at once, bodies read whole, none reset."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest
from tenure_cli.local import frontdoor
from tenure_cli.local.engines import free_port
from tenure_cli.local.frontdoor import MAX_BODY_BYTES, FrontDoor

from tests.conftest import LocalStack


def crash(event: dict[str, Any]) -> dict[str, Any]:
    """An invocation that fails, as a handler with an uncaught error would (runs in a worker)."""
    raise RuntimeError("the handler blew up")


def echo(event: dict[str, Any]) -> dict[str, Any]:
    """The request's body back, as the handlers would see it (runs in a worker)."""
    return {"statusCode": 200, "headers": {"content-type": "text/plain"}, "body": event["body"]}


def whose(event: dict[str, Any]) -> dict[str, Any]:
    """The worker's pid, after the pause the query asks for (runs in a worker)."""
    time.sleep(float((event.get("queryStringParameters") or {}).get("sleep", 0)))
    return {"statusCode": 200, "headers": {"content-type": "text/plain"}, "body": str(os.getpid())}


def _connect(base: str) -> http.client.HTTPConnection:
    parts = urlsplit(base)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)


def _envelope(answer: http.client.HTTPResponse, status: int, code: str) -> dict[str, Any]:
    raw = answer.read()
    assert answer.status == status, (answer.status, raw)
    assert answer.getheader("content-type", "").startswith("application/json"), raw
    body: dict[str, Any] = json.loads(raw)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"].strip(), body
    return body


@pytest.mark.parametrize("method", ["TRACE", "OPTIONS", "BREW"])
def test_a_method_the_front_door_does_not_serve_is_405_with_allow(
    local_stack: LocalStack, method: str
) -> None:
    conn = _connect(local_stack.base)
    conn.request(method, "/api/v1/health")
    answer = conn.getresponse()
    body = _envelope(answer, 405, "method_not_allowed")
    assert method in body["error"]["message"]
    allowed = {m.strip() for m in answer.getheader("allow", "").split(",")}
    assert {"GET", "POST", "PUT", "PATCH", "DELETE"} <= allowed, allowed
    assert method not in allowed
    conn.close()

    conn = _connect(local_stack.base)
    conn.request("GET", "/api/v1/health")
    assert conn.getresponse().status == 200, "the front door still serves"
    conn.close()


def test_a_body_over_api_gateways_limit_is_413_payload_too_large(
    local_stack: LocalStack,
) -> None:
    conn = _connect(local_stack.base)
    # Only the headers: the front door must answer from Content-Length, without the body.
    conn.putrequest("POST", "/api/v1/spaces")
    conn.putheader("authorization", f"Bearer {local_stack.admin_token}")
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", str(MAX_BODY_BYTES + 1))
    conn.endheaders()
    answer = conn.getresponse()
    _envelope(answer, 413, "payload_too_large")
    assert answer.getheader("connection", "").lower() == "close", "the unread body ends it"
    conn.close()


@pytest.fixture
def crashing_door() -> Iterator[FrontDoor]:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=1, invoke=crash).start()
    yield door
    door.stop()


def test_an_invocation_that_fails_is_500_internal_error(crashing_door: FrontDoor) -> None:
    conn = _connect(f"http://127.0.0.1:{crashing_door.port}")
    conn.request("GET", "/api/v1/leases?space=X", headers={"authorization": "Bearer x"})
    body = _envelope(conn.getresponse(), 500, "internal_error")
    assert "blew up" not in body["error"]["message"], "no internals in the answer"
    conn.close()


def test_stopping_a_front_door_that_never_served_returns_at_once() -> None:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=1)
    door.stop()  # hung forever when shutdown() waited for a serve_forever that never ran
    door.stop()
    again = FrontDoor("127.0.0.1", door.port, concurrency=1)  # the port was freed
    again.stop()


# Clients a stack is sized for, all opening a connection at the same moment.
CLIENTS = 64
# Well under the kernel's first SYN retransmission (1 s): longer, and the handshake was dropped.
HANDSHAKE = 0.9


def _door(**kwargs: Any) -> Iterator[FrontDoor]:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=2, invoke=echo, **kwargs)
    try:
        yield door.start()
    finally:
        door.stop()


@pytest.fixture
def echo_door() -> Iterator[FrontDoor]:
    yield from _door()


@pytest.mark.parametrize(
    "request_head",
    [
        b"GET /api/v1/health HTTP/9.9\r\n\r\n",  # a version it does not speak
        b"GET /api/v1/health HTTP/1.1\r\nx-long: " + b"a" * 70_000 + b"\r\n\r\n",
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    ],
    ids=["version", "header", "request-line"],
)
def test_a_request_it_cannot_read_is_400_invalid_request(
    echo_door: FrontDoor, request_head: bytes
) -> None:
    sock = _raw(echo_door)
    sock.sendall(request_head)
    answer = _answer(sock)
    _envelope(answer, 400, "invalid_request")
    assert answer.getheader("connection", "").lower() == "close"
    sock.close()


@pytest.fixture
def small_door() -> Iterator[FrontDoor]:
    yield from _door(max_connections=2)


def _raw(door: FrontDoor) -> socket.socket:
    return socket.create_connection(("127.0.0.1", door.port), timeout=30)


def _answer(sock: socket.socket) -> http.client.HTTPResponse:
    answer = http.client.HTTPResponse(sock)
    answer.begin()
    return answer


def test_64_clients_connecting_while_the_door_accepts_none_are_all_served() -> None:
    # Listening but not yet accepting: the kernel alone completes the handshakes, as it must
    # while the accepting thread has fallen behind on a busy machine.
    door = FrontDoor("127.0.0.1", free_port(), concurrency=2, invoke=echo)
    socks: list[socket.socket] = []
    try:
        for _ in range(CLIENTS):
            sock = socket.socket()
            sock.settimeout(HANDSHAKE)
            sock.connect(("127.0.0.1", door.port))  # TimeoutError: the handshake was dropped
            sock.settimeout(30)
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nhost: local\r\n\r\n")
            socks.append(sock)
        door.start()
        statuses = [_answer(sock).status for sock in socks]
        assert statuses == [200] * CLIENTS
    finally:
        for sock in socks:
            sock.close()
        door.stop()


def test_a_body_over_the_limit_sent_whole_still_reads_its_413(echo_door: FrontDoor) -> None:
    # The answer comes before the body is read; closing on the unread rest would reset the
    # connection and the client would read the reset, not the answer.
    sock = _raw(echo_door)
    size = MAX_BODY_BYTES + 1
    head = f"POST /api/v1/spaces HTTP/1.1\r\nhost: local\r\ncontent-length: {size}\r\n\r\n"
    sock.sendall(head.encode() + b"x" * size)
    answer = _answer(sock)
    _envelope(answer, 413, "payload_too_large")
    assert answer.getheader("connection", "").lower() == "close"
    sock.close()


def test_a_chunked_body_reaches_the_handler_whole_and_the_connection_goes_on(
    echo_door: FrontDoor,
) -> None:
    conn = _connect(f"http://127.0.0.1:{echo_door.port}")
    body = [b'{"name": ', b'"chunked"}']
    conn.request("POST", "/api/v1/spaces", body=iter(body), encode_chunked=True)
    answer = conn.getresponse()
    assert (answer.status, answer.read()) == (200, b"".join(body))
    conn.request("POST", "/api/v1/spaces", body=b"again")  # the same connection, still in step
    answer = conn.getresponse()
    assert (answer.status, answer.read()) == (200, b"again")
    conn.close()


# Linux delays the acknowledgement a client owes for a segment by 40 ms at least (its minimum),
# hoping to send it with data. An answer's body held back until its head is acknowledged
# (Nagle's algorithm) waits that long, on every answer of a kept-alive connection after its
# first few.
DELAYED_ACK_MS = 40


# An answer of a few bytes, and one larger than the handler's write buffer.
@pytest.mark.parametrize("size", [16, 20_000])
def test_answers_on_a_kept_alive_connection_do_not_wait_for_the_clients_acknowledgement(
    echo_door: FrontDoor, size: int
) -> None:
    conn = _connect(f"http://127.0.0.1:{echo_door.port}")
    took = []
    for n in range(30):
        body = f"answer {n} ".encode().ljust(size, b".")
        started = time.perf_counter()
        conn.request("POST", "/api/v1/spaces", body=body)
        answer = conn.getresponse()
        assert (answer.status, answer.read()) == (200, body)
        took.append((time.perf_counter() - started) * 1000)
    conn.close()
    # The first answers come while the kernel still acknowledges at once. After them, a held
    # body makes every answer take the delay and more (44 ms each, measured); one sent at once
    # takes a millisecond or two, and far below the delay on a busy machine.
    later = sorted(took[10:])
    assert later[len(later) // 2] < DELAYED_ACK_MS, [round(ms, 1) for ms in took]


def test_a_client_that_expects_100_continue_is_told_to_send_its_body_at_once(
    echo_door: FrontDoor,
) -> None:
    body = b"x" * 5000
    head = (
        f"POST /api/v1/spaces HTTP/1.1\r\nhost: unit\r\ncontent-length: {len(body)}\r\n"
        "expect: 100-continue\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", echo_door.port), timeout=30) as sock:
        sock.sendall(head.encode())
        sock.settimeout(DELAYED_ACK_MS / 1000 * 10)  # a client gives up waiting after 1 s
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 "), "no interim answer in time"
        sock.settimeout(30)
        sock.sendall(body)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        assert (answer.status, answer.read()) == (200, body)


def test_a_content_length_that_is_not_a_number_is_400_invalid_request(
    echo_door: FrontDoor,
) -> None:
    sock = _raw(echo_door)
    sock.sendall(b"POST /api/v1/spaces HTTP/1.1\r\nhost: local\r\ncontent-length: ten\r\n\r\n")
    answer = _answer(sock)
    _envelope(answer, 400, "invalid_request")
    assert answer.getheader("connection", "").lower() == "close"
    sock.close()


def test_a_connection_past_the_limit_is_503_unavailable_and_the_next_is_served(
    small_door: FrontDoor,
) -> None:
    base = f"http://127.0.0.1:{small_door.port}"
    held = [_connect(base) for _ in range(2)]
    for conn in held:
        conn.request("GET", "/api/v1/health")
        assert conn.getresponse().status == 200  # served, and kept open
    extra = _connect(base)
    extra.request("POST", "/api/v1/spaces", body=b"{}")
    answer = extra.getresponse()
    _envelope(answer, 503, "unavailable")
    assert answer.getheader("retry-after") == "1"
    assert answer.getheader("connection", "").lower() == "close"
    extra.close()
    held.pop().close()
    give_up = time.monotonic() + 10
    while small_door.server.open_connections > 1 and time.monotonic() < give_up:
        time.sleep(0.05)
    again = _connect(base)
    again.request("GET", "/api/v1/health")
    assert again.getresponse().status == 200
    again.close()
    held.pop().close()


def test_connections_that_never_finish_a_request_do_not_hold_the_door(
    small_door: FrontDoor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frontdoor.Handler, "timeout", 0.5)
    idle = [_raw(small_door) for _ in range(3)]  # more than the door serves at once
    for sock in idle:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\n")  # and never the rest
    give_up = time.monotonic() + 10
    while small_door.server.open_connections < len(idle) and time.monotonic() < give_up:
        time.sleep(0.05)  # every one taken in
    while small_door.server.open_connections and time.monotonic() < give_up:
        time.sleep(0.05)  # and let go
    try:
        status, _ = _get(small_door, "/api/v1/health")
        assert status == 200
    finally:
        for sock in idle:
            sock.close()


def _get(door: FrontDoor, target: str) -> tuple[int, bytes]:
    conn = _connect(f"http://127.0.0.1:{door.port}")
    try:
        conn.request("GET", target)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


@pytest.fixture
def pid_door() -> Iterator[FrontDoor]:
    door = FrontDoor("127.0.0.1", free_port(), concurrency=4, invoke=whose)
    try:
        yield door.start()
    finally:
        door.stop()


def test_after_a_burst_one_request_at_a_time_keeps_to_the_warmest_process(
    pid_door: FrontDoor,
) -> None:
    with ThreadPoolExecutor(max_workers=4) as burst:
        answers = list(burst.map(lambda _: _get(pid_door, "/api/v1/x?sleep=1"), range(4)))
    assert {status for status, _ in answers} == {200}
    assert len({pid for _, pid in answers}) == 4, "four at once took four processes"
    # Spread over all four, each request would meet a process cold to it.
    one_by_one = {_get(pid_door, "/api/v1/x")[1] for _ in range(12)}
    assert len(one_by_one) == 1, one_by_one


def test_an_invocation_that_finds_every_process_busy_is_503_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(frontdoor, "INVOCATION_TIMEOUT_SECONDS", 1.0)
    door = FrontDoor("127.0.0.1", free_port(), concurrency=1, invoke=whose).start()
    try:
        with ThreadPoolExecutor(max_workers=1) as other:
            slow = other.submit(_get, door, "/api/v1/x?sleep=3")
            time.sleep(0.3)  # the one process is now in the slow invocation
            conn = _connect(f"http://127.0.0.1:{door.port}")
            conn.request("GET", "/api/v1/x")
            answer = conn.getresponse()
            _envelope(answer, 503, "unavailable")
            assert answer.getheader("retry-after") == "1"
            conn.close()
            status, body = slow.result(timeout=30)
        assert status == 500, "the slow one outlived its budget: Lambda's timeout"
        assert json.loads(body)["error"]["code"] == "internal_error"
    finally:
        door.stop()


def test_a_body_of_non_ascii_text_counts_its_utf8_bytes_against_lambdas_limit(
    echo_door: FrontDoor,
) -> None:
    # An event reaches Lambda as UTF-8 JSON: 3.6 MB of emoji is 3.6 MB, not the six-fold
    # its \u escapes would make, so it is served; past the limit in its UTF-8 bytes, it is 413.
    emoji = "\N{GRINNING FACE}"
    served = json.dumps({"text": emoji * (900 * 1024)}, ensure_ascii=False).encode()  # 3.6 MB
    conn = _connect(f"http://127.0.0.1:{echo_door.port}")
    conn.request("POST", "/api/v1/mcp", body=served, headers={"content-type": "application/json"})
    answer = conn.getresponse()
    assert answer.status == 200 and answer.read() == served
    over = json.dumps({"text": emoji * (1600 * 1024)}, ensure_ascii=False).encode()  # 6.4 MB
    conn.request("POST", "/api/v1/mcp", body=over, headers={"content-type": "application/json"})
    _envelope(conn.getresponse(), 413, "payload_too_large")
    conn.close()
