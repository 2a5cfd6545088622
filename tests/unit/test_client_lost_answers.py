"""A request whose answer is lost is sent again only when a repeat cannot do it twice: GETs and
the routes built to be repeated are retried; a task or a token is never filed twice, and
the CLI says that the outcome is unknown and how to check. Against a real HTTP server on
127.0.0.1 that delays or drops its first answer."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tenure_cli import common
from tenure_cli.main import main
from tenure_worker import client as sdk
from tenure_worker.client import Client, OutcomeUnknown, Unavailable, Unreachable

TIMEOUT = 0.25  # the client's per-attempt timeout here; a delayed answer comes after it
DELAY = 0.5

# One step of the script per request: "delay" (answer after the client gave up), "drop"
# (read the request, close without an answer), or an HTTP status answered at once.
Step = str | int


@dataclass
class Server:
    """An HTTP server that plays a script of answers and records every request it read."""

    script: list[Step]
    seen: list[tuple[str, str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self, method: str) -> list[str]:
        with self.lock:
            return [path for m, path, _ in self.seen if m == method]


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            with server.lock:
                server.seen.append((self.command, self.path, body))
                step: Step = server.script.pop(0) if server.script else 200
            if step == "drop":
                self.close_connection = True
                return
            if step == "delay":
                time.sleep(DELAY)
                step = 200
            assert isinstance(step, int)
            answer: dict[str, Any] = {"ok": True, "leases": [], "tasks": []}
            if step >= 400:
                code = "unavailable" if step > 500 or step == 429 else "invalid_transition"
                code = "internal_error" if step == 500 else code  # as the service answers it
                answer = {"error": {"code": code, "message": f"scripted {step}"}}
            data = json.dumps(answer).encode()
            self.send_response(step)
            if step in (429, 503):
                self.send_header("Retry-After", "0")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a delayed answer lands on a connection the client has closed: expected here


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[QuietServer] = []

    def start(*script: Step) -> Server:
        server = Server(list(script))
        httpd = QuietServer(("127.0.0.1", 0), _handler(server))
        server.port = int(httpd.server_address[1])
        threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
        started.append(httpd)
        return server

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk, "BACKOFF_BASE", 0.001)


def _client(server: Server, retries: int = 2) -> Client:
    return Client(server.api, "tnr_o_x", timeout=TIMEOUT, retries=retries)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- the SDK


def test_a_post_whose_answer_is_late_is_sent_once_and_its_outcome_is_unknown(serve: Any) -> None:
    server = serve("delay")
    with pytest.raises(OutcomeUnknown) as unknown:
        _client(server).call("POST", "/tasks", {"space": "OPS", "title": "t"})
    assert "POST /tasks" in str(unknown.value) and "Timeout" in str(unknown.value)
    assert server.paths("POST") == ["/api/v1/tasks"]


def test_a_post_whose_connection_is_dropped_is_sent_once(serve: Any) -> None:
    server = serve("drop")
    with pytest.raises(OutcomeUnknown):
        _client(server).call("POST", "/tokens", {"name": "ci", "kind": "worker"})
    assert server.paths("POST") == ["/api/v1/tokens"]


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_post_answered_by_a_5xx_that_may_follow_a_write_is_sent_once(
    serve: Any, status: int
) -> None:
    server = serve(status)
    with pytest.raises(OutcomeUnknown, match=f"HTTP {status}"):
        _client(server).call("POST", "/tasks", {"space": "OPS", "title": "t"})
    assert len(server.paths("POST")) == 1


@pytest.mark.parametrize("status", [429, 503])
def test_a_post_the_service_turned_away_is_sent_again(serve: Any, status: int) -> None:
    server = serve(status, 201)
    assert _client(server).call("POST", "/tasks", {"space": "OPS", "title": "t"})[0] == 201
    assert len(server.paths("POST")) == 2


def test_a_post_that_never_reached_the_service_is_retried_and_ends_unreachable() -> None:
    c = Client(f"http://127.0.0.1:{_closed_port()}", "tnr_o_x", timeout=TIMEOUT, retries=2)
    with pytest.raises(Unreachable) as unreachable:
        c.call("POST", "/tasks", {"space": "OPS", "title": "t"})
    assert not isinstance(unreachable.value, OutcomeUnknown)
    assert "NotDelivered" in str(unreachable.value) and "refused" in str(unreachable.value)


@pytest.mark.parametrize("first", ["delay", "drop", 502])
def test_a_get_whose_answer_is_lost_is_retried(serve: Any, first: Step) -> None:
    server = serve(first, 200)
    assert _client(server).call("GET", "/leases/L1")[0] == 200
    assert server.paths("GET") == ["/api/v1/leases/L1"] * 2


@pytest.mark.parametrize("first", ["delay", "drop"])
def test_heartbeats_and_final_reports_are_retried_they_are_safe_to_repeat(
    serve: Any, first: Step
) -> None:
    server = serve(first, 200, first, 200)
    c = _client(server)
    c.heartbeat("L1", "tnr_l_x")
    c.complete("L1", "tnr_l_x", {"outcome": "success"})
    assert server.paths("POST") == [
        "/api/v1/leases/L1/heartbeat",
        "/api/v1/leases/L1/heartbeat",
        "/api/v1/leases/L1/complete",
        "/api/v1/leases/L1/complete",
    ]


def test_a_post_marked_idempotent_is_retried_like_a_get(serve: Any) -> None:
    server = serve("drop", 200)
    body = {"space": "OPS", "topic": "t", "data": {}, "event_id": "e-1"}
    assert _client(server).call("POST", "/events", body, idempotent=True)[0] == 200
    assert len(server.paths("POST")) == 2


def test_a_503_past_the_retries_of_a_post_is_unavailable(serve: Any) -> None:
    server = serve(503, 503, 503)
    with pytest.raises(Unavailable):
        _client(server).call("POST", "/tasks", {"space": "OPS", "title": "t"})
    assert len(server.paths("POST")) == 3


# --------------------------------------------------------------------------- the CLI


def _tenure(monkeypatch: pytest.MonkeyPatch, server: Server, *argv: str) -> int:
    """`tenure …` in this process, its client on the short timeout."""

    made = common.ServiceClient

    def short(api: str, token: str) -> Client:
        return made(api, token, timeout=TIMEOUT)

    monkeypatch.setattr(common, "ServiceClient", short)
    return main([*argv, "--api", server.api, "--token", "tnr_o_x"])


@pytest.mark.parametrize("lost", ["delay", "drop"])
def test_tasks_create_with_a_lost_answer_files_once_and_says_how_to_check(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], lost: Step
) -> None:
    server = serve(lost)
    code = _tenure(monkeypatch, server, "tasks", "create", "--space", "OPS", "--title", "t")
    assert code == common.OUTCOME_UNKNOWN == 4
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: outcome unknown: POST /tasks")
    assert "tenure tasks list --space OPS" in line
    assert server.paths("POST") == ["/api/v1/tasks"]


def test_tokens_create_with_a_lost_answer_is_not_sent_again(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve("drop")
    argv = ["tokens", "create", "--name", "ci", "--kind", "worker", "--pools", "builds"]
    assert _tenure(monkeypatch, server, *argv) == common.OUTCOME_UNKNOWN
    (line,) = capsys.readouterr().err.splitlines()
    assert "error: outcome unknown: POST /tokens" in line and "--name" in line
    assert server.paths("POST") == ["/api/v1/tokens"]


def test_a_read_with_a_lost_answer_is_retried_by_the_cli(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve("drop", 200)
    assert _tenure(monkeypatch, server, "tasks", "list", "--space", "OPS") == common.OK
    assert len(server.paths("GET")) == 2
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["tasks", "create", "--space", "OPS", "--title", "t"], common.UNREACHABLE),
        (["leases", "list", "--space", "OPS"], common.UNREACHABLE),
    ],
)
def test_nothing_listening_is_unreachable_for_every_kind_of_request(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int
) -> None:
    api = f"http://127.0.0.1:{_closed_port()}"
    assert main([*argv, "--api", api, "--token", "tnr_o_x"]) == code == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: unreachable: ")


def test_a_refusal_is_an_answer_exit_1_with_its_code_and_never_retried(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(200, 409)  # `leases cancel` reads the lease first, then cancels
    assert _tenure(monkeypatch, server, "leases", "cancel", "L1") == common.FAILED == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "error: invalid_transition: scripted 409"
    assert server.paths("POST") == ["/api/v1/leases/L1/cancel"]


# A 500 is the service's answer (its internal_error), not the silence exit 3 stands for.
SERVER_ERROR = [500] * (1 + sdk.RETRIES)


@pytest.mark.parametrize(
    "argv", [["leases", "get", "L1"], ["tasks", "list", "--space", "OPS"], ["scheduler", "pause"]]
)
def test_a_request_safe_to_repeat_answered_500_past_the_retries_is_the_services_error(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    server = serve(*SERVER_ERROR)
    assert _tenure(monkeypatch, server, *argv) == common.FAILED == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: internal_error: scripted 500"), line
    assert "HTTP 500" in line and "unreachable" not in line
    assert len(server.seen) == len(SERVER_ERROR)  # retried first: a 500 may pass


def test_a_read_answered_500_once_is_retried_and_succeeds(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(500, 200)
    assert _tenure(monkeypatch, server, "tasks", "list", "--space", "OPS") == common.OK
    assert len(server.paths("GET")) == 2 and capsys.readouterr().err == ""


@pytest.mark.parametrize("last", ["drop", 502, 503, 504])
def test_a_read_whose_last_try_got_no_answer_from_the_service_stays_unreachable(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], last: Step
) -> None:
    server = serve(*SERVER_ERROR[1:], last)
    assert _tenure(monkeypatch, server, "leases", "get", "L1") == common.UNREACHABLE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: unreachable: GET /leases/L1")


def test_a_write_not_safe_to_repeat_answered_500_is_still_outcome_unknown(
    serve: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve(500)
    code = _tenure(monkeypatch, server, "tasks", "create", "--space", "OPS", "--title", "t")
    assert code == common.OUTCOME_UNKNOWN
    assert capsys.readouterr().err.startswith("error: outcome unknown: POST /tasks")
    assert server.paths("POST") == ["/api/v1/tasks"]
