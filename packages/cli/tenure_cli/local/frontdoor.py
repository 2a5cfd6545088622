"""An HTTP front door that turns requests into API Gateway HTTP API (v2) events.

It is sized for 64 clients at once, each perhaps holding a claim's long-poll (up to 20 s) open:
the three limits below (connections, concurrent invocations, listen backlog) say how, and
docs/local-stack.md says what a client meets at each.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tenure_cli.local import lambda_host
from tenure_cli.local.workers import Busy, Invocations, Workers

# Concurrent invocations, like Lambda's concurrency: each runs in its own process because the
# Powertools resolver keeps the current event on the class and is not safe across threads.
# 64, so that 64 clients all in a claim's long-poll keep no other request waiting for a
# process (a heartbeat queued behind them could lose its lease). A process is forked on first
# use (a cold start, made cheap by a fork server: workers.py) and stays; past 64 at once, an
# invocation waits for a free one within its budget, then is 503 `unavailable`.
MAX_CONCURRENCY = 64
# Open connections served at once, each on its own thread: 64 clients with a pool of up to four
# keep-alive connections each. A connection past this is answered 503 `unavailable` (with
# Retry-After) once its request is read, and closed: a client that leaks connections meets an
# answer it can read, not a stack that slows down for everyone.
MAX_CONNECTIONS = 256
# Connections the kernel has completed and holds until the accepting thread takes them. The
# standard library's default is 5: when the accepting thread fell behind (it shares the
# interpreter with every connection's thread, moto's server and the stack's loops, and a busy
# machine gives it little time), the kernel dropped handshakes past those 5, and a client saw
# its connect stall for a second or more, or its connection reset before the front door had
# ever seen it, so there was nothing to log. Every client may be opening a connection at the same
# moment (threads sharing a pool smaller than their number open one for most requests), so the
# queue holds all of them with room to spare; the kernel caps it at net.core.somaxconn.
LISTEN_BACKLOG = 256
# How long a connection may take to send each part of a request (see Handler.timeout).
READ_TIMEOUT_SECONDS = 30.0
# An invocation that has not answered in this long is Lambda's 500 (the function's timeout).
INVOCATION_TIMEOUT_SECONDS = 60
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
# Lambda's synchronous invocation payload limit: API Gateway passes a body up to 10 MB, but an
# event larger than this never reaches the function (its base64 or JSON form counts).
MAX_EVENT_BYTES = 6 * 1024 * 1024
# Closing a socket with unread bytes makes the kernel send a reset, which can reach the client
# before the answer it was sent: a connection the front door ends after answering early (a body
# over the limit, a request it cannot read) is first drained, for this long at most.
DRAIN_SECONDS = 5.0
# The routes infra/template.yaml declares: the public ones, the claim route (on the claim
# function), and one proxy for the rest.
API_PREFIX = "/api/v1/"
PROXY_ROUTE = "/api/v1/{proxy+}"
CLAIM_ROUTE = "/api/v1/pools/{pool}/claim"
CLAIM_PATH = re.compile(r"/api/v1/pools/([^/]+)/claim")
# The methods the front door hands to the handlers; any other is answered 405 here.
SERVED_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")
JSON = {"content-type": "application/json"}


def error_body(code: str, message: str) -> bytes:
    """The API's error envelope, for the answers the front door gives itself."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def to_event(method: str, target: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The HTTP API payload format 2.0 event API Gateway would send for this request."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    now = datetime.now(UTC)
    lowered = {k.lower(): v for k, v in headers.items()}
    text: str | None = None
    encoded = False
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode(), True
    public = (method, parts.path) in lambda_host.PUBLIC_ROUTES
    claim = is_claim(method, parts.path)
    route_key = f"{method} {parts.path}" if public else f"ANY {PROXY_ROUTE}"
    if claim is not None:
        route_key = f"POST {CLAIM_ROUTE}"
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "headers": lowered,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": parts.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route_key,
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "body": text,
        "isBase64Encoded": encoded,
    }
    if claim is not None:
        event["pathParameters"] = {"pool": claim}
    elif not public and parts.path.startswith(API_PREFIX):
        event["pathParameters"] = {"proxy": parts.path[len(API_PREFIX) :]}
    if query:
        merged: dict[str, str] = {}
        for key, value in query:
            merged[key] = f"{merged[key]},{value}" if key in merged else value
        event["queryStringParameters"] = merged
    if "cookie" in lowered:
        event["cookies"] = [c.strip() for c in lowered["cookie"].split(";")]
    return event


def is_claim(method: str, path: str) -> str | None:
    """The pool of a request on the claim route, or None for any other request."""
    found = CLAIM_PATH.fullmatch(path) if method == "POST" else None
    return found[1] if found else None


@dataclass(frozen=True)
class Lane:
    """The requests of some routes, run by another function on its own processes (its own
    concurrency), as the template routes them: the API listener's claims go to the claim
    function's processes, so waiting claims never hold the API function's."""

    takes: Callable[[str, str], bool]  # (method, path) -> whether this lane runs it
    workers: Invocations
    invoke: Callable[[dict[str, Any]], dict[str, Any]]  # a module-level function


def claim_lane(workers: Invocations) -> Lane:
    """The HTTP API's claim route on the claim function's processes."""
    return Lane(lambda method, path: is_claim(method, path) is not None, workers, _claim_route)


def _claim_route(event: dict[str, Any]) -> dict[str, Any]:
    return lambda_host.invoke_claim_route(event)


class Refused(Exception):
    """An answer the front door gives itself, in the API's envelope, before any invocation."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


class Server(ThreadingHTTPServer):
    """The standard library's threading server with the limits above, and a drain before each
    close so that a client reads its answer rather than a reset."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.open_connections = 0
        self._count = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count:
            self.open_connections += 1
        super().process_request(request, client_address)

    def over_capacity(self) -> bool:
        with self._count:
            return self.open_connections > self.max_connections

    def shutdown_request(self, request: Any) -> None:
        try:
            drain(request)
        finally:
            super().shutdown_request(request)
            with self._count:
                self.open_connections -= 1


def drain(sock: socket.socket) -> None:
    """Send FIN after the answer, then read what the client still sends until it closes too,
    for DRAIN_SECONDS at most: a close with unread bytes would reset the connection. A client
    that closed first makes this one read of nothing."""
    give_up = time.monotonic() + DRAIN_SECONDS
    try:
        sock.shutdown(socket.SHUT_WR)
        while (left := give_up - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                return
    except OSError:  # reset or timed out: nothing more to wait for
        return


def event_bytes(event: dict[str, Any]) -> int:
    """The event's size as Lambda counts it: its JSON in UTF-8, where a character beyond ASCII
    is its 2 to 4 bytes, not the 6 or 12 of a \\u escape."""
    return len(json.dumps(event, ensure_ascii=False).encode())


class FrontDoor:
    def __init__(
        self,
        host: str,
        port: int,
        concurrency: int = MAX_CONCURRENCY,
        invoke: Callable[[dict[str, Any]], dict[str, Any]] = lambda_host.invoke,
        warm: Callable[[], bool] = lambda_host.warm,
        max_connections: int = MAX_CONNECTIONS,
        workers: Invocations | None = None,
        lanes: tuple[Lane, ...] = (),
        log_requests: bool = True,
    ) -> None:
        # False (tenure local without --verbose): a request answered below 500 prints nothing;
        # a 5xx (a crash, a timeout, no free process) is printed whatever this says.
        self.log_requests = log_requests
        self.invoke = invoke  # runs in a worker process: a module-level function
        self.warm = warm  # likewise: what the first worker process imports before serving
        # Binds and listens now (an OSError when the port is taken): from here the kernel
        # completes handshakes into the backlog; worker processes start on first use.
        self.server = Server((host, port), self._handler_class(), max_connections)
        # Its own processes, or the ones given (a listener that shares its function's: the
        # claim function's URL and the API listener's claim lane); stopped with this door.
        self.workers: Invocations = workers or Workers(concurrency)
        self.lanes = lanes  # stopped by the door that owns their processes
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> FrontDoor:
        self.workers.submit(self.warm, wait=0).result(timeout=120)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Free the port and end the workers; safe whether or not start() ran or finished."""
        if self._stopped:
            return
        self._stopped = True
        # shutdown() waits for serve_forever to notice: it would wait forever if it never ran.
        if self._thread is not None:
            self.server.shutdown()
        self.server.server_close()
        self.workers.stop()

    def _invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """One invocation, waiting for a free process and running within one budget."""
        give_up = time.monotonic() + INVOCATION_TIMEOUT_SECONDS
        http = event["requestContext"]["http"]
        lane = next((x for x in self.lanes if x.takes(http["method"], http["path"])), None)
        workers, invoke = (lane.workers, lane.invoke) if lane else (self.workers, self.invoke)
        future = workers.submit(invoke, event, wait=INVOCATION_TIMEOUT_SECONDS)
        result: dict[str, Any] = future.result(timeout=max(0.0, give_up - time.monotonic()))
        return result

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (Handler,), {"door": self})


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, each as one Lambda invocation of the front door's handler;
    `door` is set on the subclass each front door makes (http.server builds handlers by
    class, with no arguments of ours)."""

    door: FrontDoor
    protocol_version = "HTTP/1.1"
    server_version = "tenure-local"
    # Reading a request, or waiting for the next on a kept-alive connection, gives up after
    # this long (http.server then closes the connection): a client that opens connections and
    # never finishes a request would otherwise hold MAX_CONNECTIONS for as long as it liked,
    # and every other caller would be answered 503. An invocation's own wait (a long poll) is
    # not a read, so it is not cut short.
    timeout = READ_TIMEOUT_SECONDS
    # An answer written as two sends, its head and then its body, had the body wait under
    # Nagle's algorithm for the client to acknowledge the head, which a client delays (40 ms
    # on Linux) hoping to send it with data: every answer on a kept-alive connection took
    # 40 ms longer. Each write now goes at once (TCP_NODELAY), and the file is buffered, so an
    # answer that fits its buffer still goes as one send (http.server flushes after each).
    disable_nagle_algorithm = True
    wbufsize = -1

    def _serve(self) -> None:
        try:
            body = self._body()
            if self.door.server.over_capacity():
                self.close_connection = True
                message = f"more than {self.door.server.max_connections} open connections"
                raise Refused(503, "unavailable", message, {"retry-after": "1"})
        except Refused as refused:
            self._log_answer(
                refused.status,
                "%s %s refused: %s",
                self.command,
                urlsplit(self.path).path,
                refused,
            )
            headers = {**JSON, **refused.headers}
            self._reply(refused.status, headers, error_body(refused.code, refused.message))
            return
        event = to_event(self.command, self.path, dict(self.headers.items()), body)
        if len(body) > MAX_EVENT_BYTES // 2 and event_bytes(event) > MAX_EVENT_BYTES:
            message = f"the request exceeds {MAX_EVENT_BYTES} bytes, Lambda's limit"
            self._reply(413, JSON, error_body("payload_too_large", message))
            return
        started = time.monotonic()
        try:
            result = self.door._invoke(event)
        except Busy as busy:  # as Lambda throttles past its concurrency
            self.log_error("refused: %s", busy)
            message = "every worker process is busy; try again shortly"
            headers = {**JSON, "retry-after": "1"}
            self._reply(503, headers, error_body("unavailable", message))
            return
        except Exception as err:  # a crashed or timed-out invocation: Lambda's 500
            self.log_error("invocation failed: %r", err)
            body = error_body("internal_error", "the invocation failed")
            self._reply(500, JSON, body)
            return
        payload = result.get("body") or ""
        raw = (
            base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        )
        headers = dict(result.get("headers") or {})
        status = int(result.get("statusCode", 200))
        self._reply(status, headers, raw)
        self._log_answer(
            status,
            "%s %s -> %s in %.0f ms",
            self.command,
            urlsplit(self.path).path,
            result.get("statusCode"),
            (time.monotonic() - started) * 1000,
        )

    def _body(self) -> bytes:
        """The whole request body, by Content-Length or chunked; a Refused (and the
        connection ends, drained) when it is too large or cannot be read."""
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            return self._chunked()
        declared = (self.headers.get("content-length") or "0").strip()
        if not declared.isdigit():
            self.close_connection = True  # where this request ends is unknown
            raise Refused(400, "invalid_request", "Content-Length is not a number")
        length = int(declared)
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body stays unread: nothing can follow
            raise Refused(413, "payload_too_large", _too_large())
        return self.rfile.read(length) if length else b""

    def _chunked(self) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                chunk = int(line, 16)
            except ValueError:
                self.close_connection = True
                raise Refused(400, "invalid_request", "a malformed chunked body") from None
            if chunk == 0:
                break
            size += chunk
            if size > MAX_BODY_BYTES:
                self.close_connection = True
                raise Refused(413, "payload_too_large", _too_large())
            chunks.append(self.rfile.read(chunk))
            self.rfile.readline(1024)  # the CRLF that ends the chunk
        while self.rfile.readline(65537).strip():
            pass  # trailer fields, up to the empty line that ends the message
        return b"".join(chunks)

    def _reply(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        if status != 204:
            self.send_header("content-length", str(len(raw)))
        if self.close_connection:
            self.send_header("connection", "close")
        self.end_headers()
        if status != 204 and self.command != "HEAD":
            self.wfile.write(raw)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def handle_expect_100(self) -> bool:
        """A client that sent `Expect: 100-continue` waits for this interim answer before it
        sends its body: flushed at once, not left in the buffered file until the answer."""
        self.send_response_only(HTTPStatus.CONTINUE)
        self.end_headers()
        self.wfile.flush()
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (an unknown method, a malformed request line)
        in the API's envelope instead of its HTML page."""
        self.close_connection = True
        # A request line it could not read leaves HTTP/0.9, whose answers have no
        # status line or headers: answer in the version it speaks instead.
        self.request_version = self.protocol_version
        answered = 405 if code == HTTPStatus.NOT_IMPLEMENTED else 400  # as below
        self._log_answer(answered, "%r refused: %s %s", self.requestline, code, message or "")
        if code == HTTPStatus.NOT_IMPLEMENTED:  # what it answers a method without do_X
            text = f"{self.command} is not allowed; use one of {', '.join(SERVED_METHODS)}"
            headers = {**JSON, "allow": ", ".join(SERVED_METHODS)}
            self._reply(405, headers, error_body("method_not_allowed", text))
            return
        # Anything else it cannot read (a request line or headers too long or
        # malformed, an HTTP version it does not speak) is the API's 400.
        reason = message or HTTPStatus(code).phrase
        self._reply(
            400,
            JSON,
            error_body("invalid_request", f"the request cannot be read: {reason}"),
        )

    def _log_answer(self, status: int, format: str, *args: Any) -> None:
        """A request's line: always for a 5xx, otherwise only when requests are logged."""
        if self.door.log_requests or status >= 500:
            self.log_message(format, *args)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # _serve logs each request once, with its latency

    def log_message(self, format: str, *args: Any) -> None:
        print(f"[front door] {format % args}", flush=True)


def _too_large() -> str:
    return f"the body exceeds {MAX_BODY_BYTES} bytes, API Gateway's limit"
