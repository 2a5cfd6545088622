"""An HTTP front door that turns requests into API Gateway HTTP API (v2) events."""

from __future__ import annotations

import base64
import json
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tenure_cli.local import lambda_host

# Concurrent invocations, like Lambda's concurrency: each runs in its own process because the
# Powertools resolver keeps the current event on the class and is not safe across threads.
MAX_CONCURRENCY = 32
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway's payload limit
# Lambda's synchronous invocation payload limit: API Gateway passes a body up to 10 MB, but an
# event larger than this never reaches the function (its base64 or JSON form counts).
MAX_EVENT_BYTES = 6 * 1024 * 1024
# The routes infra/template.yaml declares: the public ones, and one proxy for the rest.
API_PREFIX = "/api/v1/"
PROXY_ROUTE = "/api/v1/{proxy+}"
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
    route_key = f"{method} {parts.path}" if public else f"ANY {PROXY_ROUTE}"
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
    if not public and parts.path.startswith(API_PREFIX):
        event["pathParameters"] = {"proxy": parts.path[len(API_PREFIX) :]}
    if query:
        merged: dict[str, str] = {}
        for key, value in query:
            merged[key] = f"{merged[key]},{value}" if key in merged else value
        event["queryStringParameters"] = merged
    if "cookie" in lowered:
        event["cookies"] = [c.strip() for c in lowered["cookie"].split(";")]
    return event


# Connections the kernel has completed and holds until the accepting thread takes them. The
# standard library's default is 5: when the accepting thread fell behind (it shares the
# interpreter with every connection's thread, moto's server and the stack's loops, and a busy
# machine gives it little time), the kernel dropped handshakes past those 5, and a client saw
# its connect stall, or its connection reset before the front door had ever seen it, so there
# was nothing to log. 64 clients may all be opening a connection at once: the queue holds them
# with room to spare (the kernel caps it at net.core.somaxconn).
LISTEN_BACKLOG = 256


class Server(ThreadingHTTPServer):
    """The standard library's threading server, listening with a backlog for 64 clients."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG


class FrontDoor:
    def __init__(
        self,
        host: str,
        port: int,
        concurrency: int = MAX_CONCURRENCY,
        invoke: Callable[[dict[str, Any]], dict[str, Any]] = lambda_host.invoke,
        warm: Callable[[], bool] = lambda_host.warm,
    ) -> None:
        self.invoke = invoke  # runs in a worker process: a module-level function
        self.warm = warm  # likewise: what the first worker process imports before serving
        # Binds now (an OSError when the port is taken); worker processes start on first use.
        self.server = Server((host, port), self._handler_class())
        ctx = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(max_workers=concurrency, mp_context=ctx)
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> FrontDoor:
        self.pool.submit(self.warm).result(timeout=120)
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
        # shutdown() forgets the worker processes: take them first, to be sure they end.
        workers = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for proc in workers:
            proc.terminate()
        give_up = time.monotonic() + 5
        for proc in workers:
            proc.join(timeout=max(0.0, give_up - time.monotonic()))
        for proc in workers:
            if proc.is_alive():  # deaf to SIGTERM (stuck in a call): never left behind
                proc.kill()
                proc.join(timeout=2)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        door = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "tenure-local"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_BODY_BYTES:
                    # The body stays unread: the connection cannot carry another request.
                    self.close_connection = True
                    message = f"the body exceeds {MAX_BODY_BYTES} bytes, API Gateway's limit"
                    self._reply(413, JSON, error_body("payload_too_large", message))
                    return
                body = self.rfile.read(length) if length else b""
                event = to_event(self.command, self.path, dict(self.headers.items()), body)
                if length > MAX_EVENT_BYTES // 2 and len(json.dumps(event)) > MAX_EVENT_BYTES:
                    message = f"the request exceeds {MAX_EVENT_BYTES} bytes, Lambda's limit"
                    self._reply(413, JSON, error_body("payload_too_large", message))
                    return
                started = time.monotonic()
                try:
                    result = door.pool.submit(door.invoke, event).result(timeout=60)
                except Exception as err:  # a crashed or timed-out invocation: Lambda's 500
                    self.log_error("invocation failed: %r", err)
                    body = error_body("internal_error", "the invocation failed")
                    self._reply(500, JSON, body)
                    return
                payload = result.get("body") or ""
                raw = (
                    base64.b64decode(payload)
                    if result.get("isBase64Encoded")
                    else payload.encode("utf-8")
                )
                headers = dict(result.get("headers") or {})
                self._reply(int(result.get("statusCode", 200)), headers, raw)
                self.log_message(
                    "%s %s -> %s in %.0f ms",
                    self.command,
                    urlsplit(self.path).path,
                    result.get("statusCode"),
                    (time.monotonic() - started) * 1000,
                )

            def _reply(self, status: int, headers: dict[str, str], raw: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection"):
                        self.send_header(key, value)
                if status != 204:
                    self.send_header("content-length", str(len(raw)))
                if self.close_connection:
                    self.send_header("connection", "close")
                self.end_headers()
                if status != 204 and self.command != "HEAD":
                    self.wfile.write(raw)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def send_error(
                self, code: int, message: str | None = None, explain: str | None = None
            ) -> None:
                """http.server's own refusals (an unknown method, a malformed request line)
                in the API's error envelope instead of its HTML page."""
                self.close_connection = True
                if code == HTTPStatus.NOT_IMPLEMENTED:  # what it answers a method without do_X
                    text = f"{self.command} is not allowed; use one of {', '.join(SERVED_METHODS)}"
                    headers = {**JSON, "allow": ", ".join(SERVED_METHODS)}
                    self._reply(405, headers, error_body("method_not_allowed", text))
                    return
                status = HTTPStatus(code)
                name = status.phrase.lower().replace(" ", "_").replace("-", "_")
                if status == HTTPStatus.BAD_REQUEST:
                    name = "invalid_request"  # the API's code for a request it cannot read
                self._reply(status, JSON, error_body(name, message or status.phrase))

            def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
                pass  # _serve logs each request once, with its latency

            def log_message(self, format: str, *args: Any) -> None:
                print(f"[front door] {format % args}", flush=True)

        return Handler
