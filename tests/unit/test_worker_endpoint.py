"""The worker function on its function URL: it checks the bearer itself, answering what the HTTP
API (authorizer, then the API function) answers, serves the worker routes, and nothing else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure.api.routes import WORKER_ROUTES
from tenure.domain import errors as e
from tenure.domain.model import Principal
from tenure.domain.states import LeaseState
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, Rig

Call = Any


def _event(method: str, path: str, token: str | None, body: Any) -> dict[str, Any]:
    headers = {"host": "unit"} | ({"authorization": f"Bearer {token}"} if token else {})
    raw = json.dumps(body).encode() if body is not None else b""
    return to_event(method, f"/api/v1{path}", headers, raw)


def _answer(out: dict[str, Any]) -> tuple[int, Any]:
    text = out.get("body") or ""
    return out["statusCode"], json.loads(text) if text else None


@pytest.fixture
def url(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Call:
    """One request to the worker function as its function URL sends it."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())

    def call(method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
        return _answer(lambda_host.invoke_worker(_event(method, path, token, body)))

    return call


@pytest.fixture
def http_api(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Call:
    """The same request through the HTTP API: its authorizer, then the API function."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)

    def call(method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
        return _answer(lambda_host.invoke(_event(method, path, token, body)))

    return call


def _token(rig: Rig, kind: str, role: str | None = None) -> str:
    _, raw = rig.svc.tokens.create_token(ADMIN, f"{kind}-{role}", kind, role, None, None)
    return raw


def _code(answer: tuple[int, Any]) -> tuple[int, str]:
    status, body = answer
    return status, body["error"]["code"]


REFUSED = [
    ("no token", None),
    ("garbage", "not-a-token"),
    ("an unknown lease token", "tnr_l_lease_000001.abcdefabcdefabcdef"),
]


@pytest.mark.parametrize(("what", "token"), REFUSED, ids=[w for w, _ in REFUSED])
def test_a_missing_or_unknown_bearer_is_refused_as_the_http_api_refuses_it(
    url: Call, http_api: Call, what: str, token: str | None
) -> None:
    for method, path, body in [
        ("POST", "/pools/builders/claim", {"worker_id": "w1"}),
        ("POST", "/leases/lease_000001/heartbeat", {}),
        ("POST", "/workers/w1/heartbeat", {"leases": []}),
    ]:
        got = url(method, path, token, body)
        assert _code(got) == (401, "unauthenticated"), what
        assert got == http_api(method, path, token, body)


def test_an_operator_token_on_a_worker_route_gets_the_http_api_s_refusal(
    rig: Rig, url: Call, http_api: Call
) -> None:
    admin = _token(rig, "operator", "admin")
    won = rig.claimed()
    for method, path, body in [
        ("POST", "/pools/builders/claim", {"worker_id": "w1"}),
        ("POST", f"/leases/{won.lease.id}/complete", {}),
        ("GET", f"/leases/{won.lease.id}/payload", None),
    ]:
        got = url(method, path, admin, body)
        assert got[0] == 403
        assert _code(got) == _code(http_api(method, path, admin, body))
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED  # nothing was reported


def test_a_worker_claims_then_its_lease_token_heartbeats_and_completes(rig: Rig, url: Call) -> None:
    worker_token = _token(rig, "worker")
    task, _ = rig.task(title="Build it")
    status, claimed = url("POST", "/pools/builders/claim", worker_token, {"worker_id": "w1"})
    assert status == 200
    lease_id, lease_token = claimed["lease"]["id"], claimed["token"]
    assert claimed["payload"]["subject"]["title"] == "Build it"
    status, beat = url("POST", f"/leases/{lease_id}/heartbeat", lease_token, {})
    assert (status, beat["state"], beat["revoke"]) == (200, "running", None)
    status, done = url("POST", f"/leases/{lease_id}/complete", lease_token, {"result": {"n": 1}})
    assert (status, done["lease"]["state"]) == (200, "completed")
    stored = rig.lease(lease_id)
    assert stored.state is LeaseState.COMPLETED and stored.task_id == task.id


def test_a_lease_token_of_another_lease_is_a_lease_token_mismatch(rig: Rig, url: Call) -> None:
    mine, other = rig.claimed("w1"), rig.claimed("w2")
    got = url("POST", f"/leases/{other.lease.id}/complete", mine.token, {})
    assert _code(got) == (403, "lease_token_mismatch")
    assert rig.lease(other.lease.id).state is LeaseState.DISPATCHED


OTHER_ROUTES = [
    ("GET", "/leases?space=OPS"),
    ("GET", "/leases/lease_000001"),
    ("POST", "/leases/lease_000001/cancel"),
    ("GET", "/leases/lease_000001/logs"),
    ("POST", "/spaces"),
    ("POST", "/tasks"),
    ("GET", "/workers?pool=builders"),
    ("POST", "/mcp"),
    ("GET", "/health"),
    ("GET", "/openapi.json"),
    ("GET", "/nowhere"),
]


@pytest.mark.parametrize(("method", "path"), OTHER_ROUTES, ids=lambda x: str(x))
def test_any_other_route_on_the_worker_endpoint_is_404_whoever_asks(
    rig: Rig, url: Call, method: str, path: str
) -> None:
    admin = _token(rig, "operator", "admin")
    for token in (admin, None):
        assert _code(url(method, path, token, {})) == (404, "not_found")


def test_the_board_is_not_on_the_worker_endpoint(url: Call) -> None:
    event = to_event("GET", "/board", {"host": "unit"}, b"")
    assert _code(_answer(lambda_host.invoke_worker(event))) == (404, "not_found")


def test_the_worker_routes_are_the_worker_and_lease_routes_of_the_table() -> None:
    from tenure.api.routes import ROUTES

    assert {rule.rsplit("/", 1)[-1] for _, rule in WORKER_ROUTES} == {
        "claim", "start", "heartbeat", "complete", "fail", "release", "payload", "logs",
        "attachments",
    }  # fmt: skip
    for key in WORKER_ROUTES:
        assert ROUTES[key] in ("worker", "lease", "lease|worker"), key
    # The two heartbeats: the lease's own and the worker's, for every lease it holds.
    assert ("POST", "/api/v1/workers/<worker_id>/heartbeat") in WORKER_ROUTES


# --------------------------------------------------------------------- verdicts kept 60 s


class Checks:
    """A token check that counts its reads; `answer` is what the table says now."""

    def __init__(self) -> None:
        self.reads = 0
        self.answer: Principal | e.TenureError = Principal(kind="worker", token_id="t1")

    def __call__(self, raw: str | None) -> Principal:
        self.reads += 1
        if isinstance(self.answer, e.TenureError):
            raise self.answer
        return self.answer


BEARER = {"authorization": "Bearer tnr_w_abc"}


def _verdicts() -> tuple[tokens.Verdicts, Checks, list[float]]:
    now = [100.0]
    checks = Checks()
    return tokens.Verdicts(check=checks, clock=lambda: now[0]), checks, now


def test_a_token_is_read_once_a_minute_and_a_revoked_one_refused_after_it() -> None:
    verdicts, checks, now = _verdicts()
    assert verdicts.principal(BEARER).token_id == "t1"
    checks.answer = e.Unauthenticated("unknown token")  # revoked meanwhile
    now[0] += 59
    assert verdicts.principal(BEARER).token_id == "t1"  # as the authorizer's cache would
    assert checks.reads == 1
    now[0] += 1
    with pytest.raises(e.Unauthenticated, match="unknown token"):
        verdicts.principal(BEARER)
    assert checks.reads == 2


def test_a_verdict_is_kept_no_longer_than_its_token_lives() -> None:
    now, wall = [100.0], [1_000_000]
    checks = Checks()
    checks.answer = Principal(kind="worker", token_id="t1", expires_at=wall[0] + 20_000)
    verdicts = tokens.Verdicts(check=checks, clock=lambda: now[0], wall=lambda: wall[0])
    assert verdicts.principal(BEARER).token_id == "t1"
    now[0], wall[0] = now[0] + 19, wall[0] + 19_000
    assert verdicts.principal(BEARER).token_id == "t1" and checks.reads == 1
    checks.answer = e.Unauthenticated("the token has expired")  # as the table now answers
    now[0], wall[0] = now[0] + 1, wall[0] + 1_000
    with pytest.raises(e.Unauthenticated, match="expired"):
        verdicts.principal(BEARER)  # at its expiry, not 60 s after it was read
    assert checks.reads == 2


def test_a_kept_verdict_past_its_tokens_expiry_is_refused_without_a_read() -> None:
    # The function's own clock and the wall clock need not agree: the expiry is judged on the
    # wall clock, as the token's expires_at is.
    wall = [1_000_000]
    checks = Checks()
    checks.answer = Principal(kind="worker", token_id="t1", expires_at=wall[0] + 20_000)
    verdicts = tokens.Verdicts(check=checks, clock=lambda: 100.0, wall=lambda: wall[0])
    assert verdicts.principal(BEARER).token_id == "t1"
    wall[0] += 20_000
    for _ in range(2):
        with pytest.raises(e.Unauthenticated, match="the token has expired"):
            verdicts.principal(BEARER)
    assert checks.reads == 1


def test_a_refusal_is_kept_too_but_a_table_that_could_not_be_read_is_not() -> None:
    verdicts, checks, now = _verdicts()
    checks.answer = e.Unavailable("throttled")
    for _ in range(2):
        with pytest.raises(e.Unavailable):
            verdicts.principal(BEARER)
    assert checks.reads == 2
    checks.answer = e.Unauthenticated("unknown token")
    for _ in range(3):
        with pytest.raises(e.Unauthenticated):
            verdicts.principal(BEARER)
    assert checks.reads == 3
    now[0] += 61
    checks.answer = Principal(kind="worker", token_id="t2")
    assert verdicts.principal(BEARER).token_id == "t2"


def test_each_token_has_its_own_verdict_and_the_oldest_go_past_the_bound() -> None:
    checks = Checks()
    verdicts = tokens.Verdicts(check=checks, clock=lambda: 0.0, size=2)
    for name in ("a", "b", "c", "a"):
        verdicts.principal({"authorization": f"Bearer tnr_w_{name}"})
    assert checks.reads == 4  # "a" was dropped when "c" came
    verdicts.principal({"authorization": "Bearer tnr_w_c"})
    assert checks.reads == 4


WORKER_CALLS = [
    ("POST", "start", None),
    ("POST", "heartbeat", {}),
    ("POST", "complete", {}),
    ("POST", "fail", {"error": "it broke"}),
    ("POST", "release", {"reason": "shutting down"}),
    ("GET", "payload", None),
    ("POST", "logs", {"events": [{"message": "hello", "stream": "stdout"}]}),
    ("POST", "attachments", {"filename": "a.txt", "content_type": "text/plain", "byte_size": 3}),
]


@pytest.mark.parametrize(("method", "kind", "body"), WORKER_CALLS, ids=[c[1] for c in WORKER_CALLS])
def test_every_lease_route_of_a_worker_is_served_on_the_worker_endpoint(
    rig: Rig, url: Call, http_api: Call, method: str, kind: str, body: Any
) -> None:
    first, second = rig.claimed("w1"), rig.claimed("w2")
    got = url(method, f"/leases/{first.lease.id}/{kind}", first.token, body)
    same = http_api(method, f"/leases/{second.lease.id}/{kind}", second.token, body)
    # The route ran (whatever this deployment answers it: no bucket or log group is 501).
    assert got[0] == same[0] and got[0] != 404, (got, same)
    assert got[0] in (200, 201, 202, 501), got


def test_the_worker_s_own_heartbeat_renews_its_leases_on_the_worker_endpoint(
    rig: Rig, url: Call
) -> None:
    token = _token(rig, "worker")
    rig.task()
    status, won = url("POST", "/pools/builders/claim", token, {"worker_id": "w1"})
    assert status == 200
    body = {"leases": [{"id": won["lease"]["id"], "fence": won["fence"]}]}
    status, answer = url("POST", "/workers/w1/heartbeat", token, body)
    assert status == 200
    assert [(row["id"], row["state"]) for row in answer["leases"]] == [
        (won["lease"]["id"], "running")
    ]
    assert rig.lease(won["lease"]["id"]).state is LeaseState.RUNNING
