"""The worker SDK's retries: a claim is retried only with its own claim_id, every
retry loop is bounded, and a 503's Retry-After is honoured, never taken for a lost lease."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tenure_worker.client import (
    RETRY_AFTER_CAP,
    Answer,
    ApiError,
    ClaimUnanswered,
    Client,
    Unavailable,
    Unreachable,
)
from tenure_worker.runner import Held, Worker, WorkerOptions

from tests.unit.worker_support import held_record

LEASE = {"id": "L1", "timing": {"renew_seconds": 10, "lease_seconds": 300}}
WON = Answer(200, {}, json.dumps({"lease": LEASE, "token": "tnr_l_x", "fence": 1}).encode())
NOTHING = Answer(204, {}, b"")


def busy(retry_after: str | None = None, status: int = 503) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = {"error": {"code": "unavailable", "message": "the table is busy"}}
    return Answer(status, headers, json.dumps(body).encode())


class FakeTransport:
    """Plays a script of answers (or raises the exceptions in it) and keeps every request."""

    def __init__(self, *script: Answer | BaseException) -> None:
        self.script: Iterator[Answer | BaseException] = iter(script)
        self.requests: list[dict[str, Any]] = []

    def __call__(
        self, method: str, url: str, headers: dict[str, str], data: bytes | None, timeout: float
    ) -> Answer:
        self.requests.append(
            {
                "method": method,
                "url": url,
                "body": json.loads(data) if data else None,
                "bearer": headers.get("authorization", "").removeprefix("Bearer "),
            }
        )
        step = next(self.script)
        if isinstance(step, BaseException):
            raise step
        return step

    @property
    def claim_ids(self) -> list[str]:
        return [r["body"]["claim_id"] for r in self.requests]


def client(transport: FakeTransport, sleeps: list[float], retries: int = 4) -> Client:
    return Client(
        "http://tenure.test", "tnr_w_x", retries=retries, transport=transport, sleep=sleeps.append
    )


def test_a_claim_whose_answer_was_lost_is_retried_with_the_same_claim_id() -> None:
    fake = FakeTransport(TimeoutError("timed out"), ConnectionResetError("reset"), WON)
    sleeps: list[float] = []
    won = client(fake, sleeps).claim("p", "w1", "v1", 0)
    assert won is not None and won.lease_id == "L1"
    assert len(fake.requests) == 3
    assert len(set(fake.claim_ids)) == 1 and len(fake.claim_ids[0]) >= 32
    assert {r["body"]["host"] for r in fake.requests} == {socket.gethostname()}
    assert len(sleeps) == 2  # backoff between the tries


def test_each_new_claim_intent_carries_a_new_claim_id() -> None:
    fake = FakeTransport(NOTHING, WON, TimeoutError(), WON, WON)
    c = client(fake, [])
    assert c.claim("p", "w1") is None  # 204: nothing to claim
    assert c.claim("p", "w1") is not None  # a new intent after a 204
    assert c.claim("p", "w1") is not None  # the same intent, retried once
    assert c.claim("p", "w1") is not None  # a new intent after a success
    ids = fake.claim_ids
    assert ids[2] == ids[3]
    assert len({ids[0], ids[1], ids[2], ids[4]}) == 4


def test_a_204_is_an_answer_and_is_not_retried() -> None:
    fake = FakeTransport(NOTHING)
    assert client(fake, []).claim("p", "w1", wait_seconds=5) is None
    assert len(fake.requests) == 1


def test_claim_retries_are_bounded_and_the_intent_survives_them() -> None:
    fake = FakeTransport(*[TimeoutError()] * 3, WON)
    c = client(fake, [], retries=2)
    with pytest.raises(ClaimUnanswered) as unanswered:
        c.claim("p", "w1")
    assert len(fake.requests) == 3  # 1 + retries, then it gives up
    assert unanswered.value.claim_id == fake.claim_ids[0]
    # The caller goes on with the same intent, so a claim the service applied comes back.
    assert c.claim("p", "w1", claim_id=unanswered.value.claim_id) is not None
    assert len(set(fake.claim_ids)) == 1


def test_retry_after_is_honoured_and_capped() -> None:
    fake = FakeTransport(busy("2"), busy("9999"), WON)
    sleeps: list[float] = []
    assert client(fake, sleeps).claim("p", "w1") is not None
    assert sleeps == [2.0, RETRY_AFTER_CAP]
    assert len(set(fake.claim_ids)) == 1


def test_a_503_past_the_retries_is_unavailable_not_an_answer_about_the_lease() -> None:
    fake = FakeTransport(busy("3"), busy("3"))
    sleeps: list[float] = []
    with pytest.raises(Unavailable) as unavailable:
        client(fake, sleeps).complete("L1", "tnr_l_x", {}, retries=1)
    assert not isinstance(unavailable.value, ApiError)
    assert unavailable.value.retry_after == 3.0
    assert sleeps == [3.0]


def test_a_429_is_retried_like_a_503() -> None:
    fake = FakeTransport(busy("1", status=429), Answer(200, {}, b'{"state": "running"}'))
    sleeps: list[float] = []
    assert client(fake, sleeps).heartbeat("L1", "tnr_l_x") == {"state": "running"}
    assert sleeps == [1.0]


def test_the_budget_bounds_the_waits_of_a_call() -> None:
    fake = FakeTransport(busy("5"), WON)
    sleeps: list[float] = []
    with pytest.raises(ClaimUnanswered) as unanswered:
        client(fake, sleeps).claim("p", "w1", budget=1.0)
    assert sleeps == [] and len(fake.requests) == 1
    assert unanswered.value.retry_after == 5.0


def test_a_4xx_is_an_answer_and_is_never_retried() -> None:
    body = {"error": {"code": "stale_lease", "message": "the lease moved on"}}
    fake = FakeTransport(Answer(409, {}, json.dumps(body).encode()))
    with pytest.raises(ApiError) as refused:
        client(fake, []).complete("L1", "tnr_l_x", {})
    assert (refused.value.status, refused.value.code) == (409, "stale_lease")
    assert len(fake.requests) == 1


def test_connection_failures_past_the_retries_are_unreachable() -> None:
    fake = FakeTransport(ConnectionRefusedError(), ConnectionRefusedError())
    with pytest.raises(Unreachable):
        client(fake, [], retries=1).payload("L1", "tnr_l_x")
    assert len(fake.requests) == 2


# ------------------------------------------------------------------------ the runner


def worker(tmp_path: Path, fake: FakeTransport) -> Worker:
    opts = WorkerOptions(
        api="http://tenure.test",
        token="tnr_w_x",
        pool="p",
        command=["true"],
        worker_id="w1",
        state_dir=tmp_path / "state",
    )
    return Worker(opts, client(fake, [], retries=0))


def test_the_runner_goes_on_with_an_unanswered_claim_and_starts_afresh_after_a_204(
    tmp_path: Path,
) -> None:
    fake = FakeTransport(TimeoutError(), busy("2"), NOTHING, NOTHING)
    w = worker(tmp_path, fake)
    for _ in range(4):
        w.claim_not_before = 0.0  # no waiting between the loop's tries in this test
        w._claim()
    ids = fake.claim_ids
    assert ids[0] == ids[1] == ids[2], "every try of an unanswered claim is the same claim"
    assert ids[3] != ids[0], "after a 204 the next claim is a new intent"
    assert w.claim_intent is None


def test_a_claim_asks_for_its_lease_running_only_when_told_and_the_runner_tells_it(
    tmp_path: Path,
) -> None:
    """The runner launches the job the moment a claim is answered, so it asks for the lease
    running (`start`); a plain SDK claim does not."""
    fake = FakeTransport(WON, WON)
    client(fake, []).claim("p", "w1")
    assert "start" not in fake.requests[0]["body"]
    w = worker(tmp_path, FakeTransport(WON))
    w._launch = lambda claim, at: None  # type: ignore[method-assign]
    w._claim()
    assert w.client.transport.requests[0]["body"]["start"] is True  # type: ignore[attr-defined]


def test_against_a_service_that_does_not_know_start_the_runner_claims_without_it(
    tmp_path: Path,
) -> None:
    refused = {"error": {"code": "validation_failed", "message": "start: is not a known field"}}
    fake = FakeTransport(Answer(422, {}, json.dumps(refused).encode()), WON)
    w = worker(tmp_path, fake)
    w._launch = lambda claim, at: None  # type: ignore[method-assign]
    w._claim()
    w._claim()
    assert [r["body"].get("start") for r in fake.requests] == [True, None]
    assert "start" not in w._next_claim(), "nor does a report's next claim carry it"


def test_a_report_refused_for_its_next_claims_start_is_sent_again_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker upgraded before its service may report before it ever claims (a job that
    ended while it was away): the old service refuses the whole report for `next.start`,
    having applied nothing, so the report is kept and sent again without it."""
    refused = {
        "error": {"code": "validation_failed", "message": "next.start: is not a known field"}
    }
    done = {"lease": {"id": "L1", "state": "completed"}}
    fake = FakeTransport(
        Answer(422, {}, json.dumps(refused).encode()), Answer(200, {}, json.dumps(done).encode())
    )
    w = worker(tmp_path, fake)
    monkeypatch.setattr(w, "_launch", lambda claim, at: None)
    w.opts.concurrency = 2
    w._finish(_held(tmp_path), 0)
    assert "L1" in w.unreported, "the refused report is kept, not dropped"
    w._send_reports()
    first, second = (r["body"] for r in fake.requests)
    assert first["next"]["start"] is True and "start" not in second["next"]
    assert second["next"]["claim_id"] == first["next"]["claim_id"]
    assert "L1" not in w.unreported and w.claim_start is False


def test_the_runner_waits_out_retry_after_before_claiming_again(tmp_path: Path) -> None:
    fake = FakeTransport(busy("4"))
    w = worker(tmp_path, fake)
    w._claim()
    assert not w._may_claim()  # held back in the loop, which goes on heartbeating
    assert w.claim_intent == fake.claim_ids[0]


def test_a_report_answered_503_is_kept_and_sent_again_only_after_retry_after(
    tmp_path: Path,
) -> None:
    fake = FakeTransport(busy("3"))
    w = worker(tmp_path, fake)
    w.unreported["L1"] = (
        held_record(tmp_path, renew_seconds=1.0),
        "complete",
        {"outcome": "success"},
        time.monotonic(),
    )
    w._send_reports()
    assert "L1" in w.unreported, "a 503 says nothing about the lease: the report is kept"
    w._send_reports()
    assert len(fake.requests) == 1, "not sent again before Retry-After"


def _held(tmp_path: Path, lease_id: str = "L1") -> Held:
    return held_record(tmp_path, lease_id, renew_seconds=1.0)


def test_a_finished_job_reports_with_the_next_claim_and_a_retry_keeps_its_claim_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nxt = {
        "lease": {"id": "L2", "timing": {"renew_seconds": 10, "lease_seconds": 300}},
        "token": "tnr_l_y",
        "fence": 1,
        "payload": {"lease": {"id": "L2"}, "subject": {"kind": "task"}, "kind": "command"},
    }
    done = {"lease": {"id": "L1", "state": "completed"}, "next": nxt}
    fake = FakeTransport(Unreachable("lost"), Answer(200, {}, json.dumps(done).encode()))
    w = worker(tmp_path, fake)
    launched: list[Any] = []
    monkeypatch.setattr(w, "_launch", lambda claim, at: launched.append(claim))
    w.opts.concurrency = 2
    w._finish(_held(tmp_path), 0)  # exit status 0: complete, and room for one more lease
    w._send_reports()  # the first answer is lost; the report (and its claim) is sent again
    first, second = (r["body"] for r in fake.requests)
    assert [r["url"].rsplit("/", 1)[1] for r in fake.requests] == ["complete", "complete"]
    assert first["next"]["worker_id"] == "w1" and first["next"]["claim_id"]
    assert first["next"]["start"] is True, "the next lease too is launched on the answer"
    assert second == first, "the same report, the same claim_id: the same next lease"
    assert [r["bearer"] for r in fake.requests] == ["tnr_w_x", "tnr_w_x"], (
        "a report that claims goes with the worker's token, never the job's lease token"
    )
    assert [c.lease_id for c in launched] == ["L2"]
    assert launched[0].payload == nxt["payload"]  # no GET payload needed
    assert "L1" not in w.unreported


def test_a_worker_with_no_room_reports_without_a_next_claim(tmp_path: Path) -> None:
    done = {"lease": {"id": "L1", "state": "completed"}}
    fake = FakeTransport(Answer(200, {}, json.dumps(done).encode()))
    w = worker(tmp_path, fake)
    w.stopping = True
    w._finish(_held(tmp_path), 0)
    assert "next" not in fake.requests[0]["body"]
    assert fake.requests[0]["bearer"] == "tnr_l_x", "a report that claims nothing: the lease's"


def test_a_service_that_takes_reports_only_with_lease_tokens_gets_the_report_again_so() -> None:
    refused = {"error": {"code": "forbidden", "message": "this route needs the lease's own token"}}
    done = {"lease": {"id": "L1", "state": "completed"}, "next": None}
    fake = FakeTransport(
        Answer(403, {}, json.dumps(refused).encode()), Answer(200, {}, json.dumps(done).encode())
    )
    body = {"outcome": "success", "next": {"worker_id": "w1", "claim_id": "c1"}}
    assert client(fake, [])._report("complete", "L1", "tnr_l_x", body) == done
    assert [r["bearer"] for r in fake.requests] == ["tnr_w_x", "tnr_l_x"]
    assert fake.requests[0]["body"] == fake.requests[1]["body"] == body


def test_any_other_refusal_of_a_report_that_claims_is_an_answer() -> None:
    stale = {"error": {"code": "stale_lease", "message": "moved on"}}
    fake = FakeTransport(Answer(409, {}, json.dumps(stale).encode()))
    body = {"next": {"worker_id": "w1", "claim_id": "c1"}}
    with pytest.raises(ApiError) as refused:
        client(fake, [])._report("complete", "L1", "tnr_l_x", body)
    assert refused.value.code == "stale_lease" and len(fake.requests) == 1


def test_a_redirect_to_another_origin_never_carries_the_token() -> None:
    """The service never redirects an authenticated call elsewhere except to a presigned
    URL, which carries its own credential: a redirect to another origin (a hostile proxy, a
    misconfigured load balancer) gets the request without the bearer token."""
    import http.server
    import threading

    seen: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ok": true}')

        def log_message(self, *_: Any) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)
    target = f"http://127.0.0.1:{other.server_address[1]}/landed"

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            if self.path.endswith("/same"):
                self.send_response(302)
                self.send_header("location", "/api/v1/here")
            elif self.path.endswith("/here"):
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}')
                return
            else:
                self.send_response(302)
                self.send_header("location", target)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    home = http.server.HTTPServer(("127.0.0.1", 0), Redirecting)
    for server in (other, home):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = Client(f"http://127.0.0.1:{home.server_address[1]}", "tnr_o_SECRET", retries=0)
        assert api.call("GET", "/away")[1] == {"ok": True}
        assert seen == ["Bearer tnr_o_SECRET", None], "the other origin never saw the token"
        seen.clear()
        assert api.call("GET", "/same")[1] == {"ok": True}
        assert seen == ["Bearer tnr_o_SECRET", "Bearer tnr_o_SECRET"], "same origin keeps it"
    finally:
        for server in (other, home):
            server.shutdown()


def test_plain_http_to_another_host_is_warned_of_and_loopback_or_https_is_not() -> None:
    with pytest.warns(UserWarning, match="unencrypted"):
        Client("http://tenure.example.com", "tnr_w_x")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Client("https://tenure.example.com", "tnr_w_x")
        Client("http://127.0.0.1:8787", "tnr_w_x")
        Client("http://localhost:8787", "tnr_w_x")


def test_an_unreachable_service_is_named_by_host_and_port_never_by_its_userinfo() -> None:
    refused = ConnectionRefusedError("[Errno 111] Connection refused")
    plain = Client(
        "http://127.0.0.1:8123",
        "t",
        retries=1,
        transport=FakeTransport(refused, refused),
        sleep=lambda _: None,
    )
    with pytest.raises(Unreachable) as err:
        plain.call("GET", "/tasks?space=X")
    assert str(err.value).startswith("GET /tasks?space=X at 127.0.0.1:8123: "), err.value
    secure = Client(
        "https://user:secret@tenure.test",
        "t",
        retries=0,
        transport=FakeTransport(refused),
        sleep=lambda _: None,
    )
    with pytest.raises(Unreachable) as err:
        secure.call("GET", "/leases")
    assert "at tenure.test:443: " in str(err.value) and "secret" not in str(err.value)


def _beat_answer(signal: str | None) -> Answer:
    body: dict[str, Any] = {"leases": [{"id": "L1", "fence": 1, "state": "running"}]}
    if signal is not None:
        body["signal"] = signal
    return Answer(200, {}, json.dumps(body).encode())


def test_the_runner_echoes_the_signal_the_last_heartbeat_answer_carried(tmp_path: Path) -> None:
    fake = FakeTransport(_beat_answer("S1"), _beat_answer("S2"), _beat_answer(None))
    w = worker(tmp_path, fake)
    for _ in range(3):
        assert w._beat([("L1", 1)])[0]["state"] == "running"
    fake.script = iter([_beat_answer("S3")])
    w._beat([("L1", 1)])
    sent = [r["body"]["signal"] for r in fake.requests]
    # The first asks with none yet; an answer without one (a service below the version that
    # trusts signals) makes the next ask afresh.
    assert sent == ["", "S1", "S2", ""]
    assert all(r["url"].endswith("/workers/w1/heartbeat") for r in fake.requests)


def test_against_a_service_that_does_not_know_signals_the_runner_beats_without_them(
    tmp_path: Path,
) -> None:
    refused = {"error": {"code": "validation_failed", "message": "signal: is not a known field"}}
    fake = FakeTransport(
        Answer(422, {}, json.dumps(refused).encode()), _beat_answer(None), _beat_answer(None)
    )
    w = worker(tmp_path, fake)
    w._beat([("L1", 1)])
    w._beat([("L1", 1)])
    assert [r["body"].get("signal") for r in fake.requests] == ["", None, None]


def test_any_other_refusal_of_a_heartbeat_is_an_answer_and_the_next_asks_afresh(
    tmp_path: Path,
) -> None:
    refused = {"error": {"code": "validation_failed", "message": "leases: too many"}}
    fake = FakeTransport(
        _beat_answer("S1"), Answer(422, {}, json.dumps(refused).encode()), _beat_answer("S2")
    )
    w = worker(tmp_path, fake)
    w._beat([("L1", 1)])
    with pytest.raises(ApiError):
        w._beat([("L1", 1)])
    w._beat([("L1", 1)])
    assert [r["body"].get("signal") for r in fake.requests] == ["", "S1", ""]


# --- an answer the worker cannot trust: refused before anything acts on it -------------------


def _claim_answer(lease_id: str = "L1", renew: Any = 10, lease: Any = 300) -> Answer:
    body = {
        "lease": {"id": lease_id, "timing": {"renew_seconds": renew, "lease_seconds": lease}},
        "token": "tnr_l_x",
        "fence": 1,
    }
    return Answer(200, {}, json.dumps(body).encode())


@pytest.mark.parametrize(
    "answer",
    [
        _claim_answer(lease_id="../outside/victim"),  # its files would land outside the state dir
        _claim_answer(lease_id="/etc/victim"),
        _claim_answer(lease_id=".hidden"),
        _claim_answer(renew=float("nan")),  # a fence at NaN never falls: the job outlives it
        _claim_answer(renew=-3),
        _claim_answer(renew=0),
        _claim_answer(renew=400, lease=300),
        _claim_answer(lease=float("inf")),
        Answer(200, {}, b"<html>maintenance</html>"),
        Answer(200, {}, b'{"lease": 5}'),
    ],
)
def test_a_claim_answer_the_worker_cannot_act_on_keeps_its_claim_open(answer: Answer) -> None:
    fake = FakeTransport(*([answer] * 5))
    sleeps: list[float] = []
    with pytest.raises(ClaimUnanswered) as unanswered:
        client(fake, sleeps).claim("p", "w1", "v1", 0)
    # The same intent: a retry asks for the lease this claim may have won, never a second.
    assert unanswered.value.claim_id == fake.claim_ids[0]
