"""One corpus of requests to every worker route, sent to both endpoints a worker may use: the
HTTP API (the authorizer, then the API function and its resolver) and the worker function on
its function URL (its own small dispatch). Each endpoint runs the whole corpus, in order, on a
rig of its own built the same way (ids and secrets predictable), and every answer must be the
same: status, body bytes and the headers a client reads. The corpus covers what the routes
must refuse as much as what they do: each invalid field, wrong types, unknown fields, no body,
a `null` body, a body that is not JSON or not an object, oversized fields, a non-JSON content
type, unknown query parameters, and the wrong tokens (none, an operator's, a read-role one,
another space's worker token, a lease token where a worker token goes and the other way
round, another lease's token, a spent lease token)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure.app.setup.tokens import Token
from tenure.domain.model import Pool
from tenure.domain.states import PoolKind
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.both_endpoints import served_rig
from tests.unit.support import ADMIN, POOL, Rig, SeqIds, as_lease, with_artifacts

Invoke = Callable[[dict[str, Any]], dict[str, Any]]
# What a client reads besides the body (the rest, such as the resolver's empty cookie list,
# is the Lambda result's shape, not the HTTP answer's).
HEADERS = ("content-type", "www-authenticate", "retry-after", "location", "tenure-claim-api")
LONG = "x" * 5000


def _secret(self: SeqIds) -> str:
    """Secrets in order: the two rigs mint the same tokens, so their answers match byte for
    byte (a claim shows its lease token)."""
    self.__dict__["minted"] = self.__dict__.get("minted", 0) + 1
    return f"s{self.__dict__['minted']:031d}"


def _token(rig: Rig, kind: str, role: str | None = None, pools: Any = None) -> str:
    made: tuple[Token, str] = rig.svc.tokens.create_token(
        ADMIN, rig.ids.new_id("tok"), kind, role, None, pools, None
    )
    return made[1]


def _corpus(rig: Rig) -> list[tuple[str, str, str | None, bytes, dict[str, str]]]:
    """(method, path, token, raw body, extra headers), in the order they are sent."""
    rig.svc.spaces.create_space(ADMIN, "OTH", "Others", None)
    rig.svc.pools.create_pool(
        ADMIN, Pool(name="elsewhere", space="OTH", kind=PoolKind.COMMAND, created_at=0)
    )
    admin, reader = _token(rig, "operator", "admin"), _token(rig, "operator", "read")
    worker, other = (
        _token(rig, "worker", pools=(POOL,)),
        _token(rig, "worker", pools=("elsewhere",)),
    )
    unscoped = _token(rig, "worker")
    for i in range(5):
        rig.task(title=f"job {i}")
    spent = rig.claim("w0")
    rig.svc.reports.complete(as_lease(spent.lease.id), spent.lease.id, {})
    held, second, third = rig.claim("w1"), rig.claim("w1"), rig.claim("w1")
    lease, lease_tok, fence = held.lease.id, held.token, held.lease.fence
    spent_tok, second_tok = spent.token, second.token
    claim = f"/pools/{POOL}/claim"
    on = f"/leases/{lease}"
    j = _json
    cases: list[tuple[str, str, str | None, bytes, dict[str, str]]] = []

    def add(method: str, path: str, token: str | None, *bodies: bytes, **head: str) -> None:
        cases.extend((method, path, token, body, head) for body in bodies)

    # The claim: wrong tokens, then every kind of bad body, then a valid one (and an empty one).
    for tok in (None, "not-a-token", admin, reader, other, lease_tok, spent_tok):
        add("POST", claim, tok, j({"worker_id": "w2"}))
    add(
        "POST",
        claim,
        worker,
        b"",
        b"null",
        b"[]",
        b'[{"worker_id": "w2"}]',
        b'"w2"',
        b"{not json",
        b"{}",
        j({"worker_id": ""}),
        j({"worker_id": 5}),
        j({"worker_id": "w2", "wait_seconds": -1}),
        j({"worker_id": "w2", "wait_seconds": "soon"}),
        j({"worker_id": "w2", "lease_seconds": 0}),
        j({"worker_id": "w2", "lease_seconds": 1.5}),
        j({"worker_id": "w2", "start": "yes"}),
        j({"worker_id": "w2", "host": LONG}),
        j({"worker_id": LONG}),
        j({"worker_id": "w2", "bogus": 1, "other": 2}),
        j({"worker_id": ["w2"], "wait_seconds": None, "claim_id": 7}),
    )
    add("POST", claim + "?bogus=1", worker, j({"worker_id": "w2"}))
    add("POST", "/pools/nowhere/claim", unscoped, j({"worker_id": "w2"}))
    add("POST", claim, worker, j({"worker_id": "w2"}), **{"content-type": "text/plain"})
    add("POST", claim, worker, j({"worker_id": "w2", "claim_id": "c1", "start": True}))
    add("POST", claim, worker, j({"worker_id": "w2"}), j({"worker_id": "w2", "wait_seconds": 0}))
    # The worker's heartbeat.
    beat = "/workers/w1/heartbeat"
    for tok in (None, admin, reader, lease_tok, other):
        add("POST", beat, tok, j({"leases": [{"id": lease, "fence": fence}]}))
    add(
        "POST",
        beat,
        worker,
        b"",
        b"null",
        b"{}",
        j({"leases": "all"}),
        j({"leases": [{"id": lease}]}),
        j({"leases": [{"id": lease, "fence": "one"}]}),
        j({"leases": [{"id": lease, "fence": fence, "x": 1}]}),
        j({"leases": [{"id": str(i), "fence": 1} for i in range(1001)]}),
        j({"leases": [], "runtime": {"state": "broken"}}),
        j({"leases": [], "credentials": {"state": "ok", "reason": LONG}}),
        j({"leases": [], "signal": LONG}),
        j({"leases": [], "pool": "elsewhere"}),
        j({"leases": [{"id": lease, "fence": fence}], "runtime": {"state": "ok"}}),
        j({"leases": [{"id": lease, "fence": fence + 9}, {"id": "nope", "fence": 1}]}),
    )
    # A lease's own routes: wrong tokens first, on each.
    for kind in ("start", "heartbeat", "release", "complete", "fail"):
        for tok in (None, admin, reader, worker, other, second_tok, spent_tok):
            add("POST", f"{on}/{kind}", tok, j({"error": "boom"} if kind == "fail" else {}))
    for tok in (None, admin, worker, second_tok):
        add("GET", f"{on}/payload", tok, b"")
        add("POST", f"{on}/logs", tok, j({"events": [{"stream": "stdout", "message": "hi"}]}))
        add("POST", f"{on}/attachments", tok, j({"filename": "a.txt", "content_type": "text/x"}))
    add("GET", f"{on}/payload?x=1", lease_tok, b"")
    add("GET", f"{on}/payload", lease_tok, b"")
    add("POST", f"{on}/start", lease_tok, j({"now": True}), b"null", b"[]", b"{}")
    add(
        "POST",
        f"{on}/heartbeat",
        lease_tok,
        j({"lease_seconds": "long"}),
        j({"lease_seconds": -5}),
        j({"lease_seconds": 30, "extra": True}),
        b"{bad",
        b"[1]",
        b"null",
        b"",
        j({"lease_seconds": 60}),
    )
    add(
        "POST",
        f"{on}/logs",
        lease_tok,
        b"",
        b"null",
        b"{}",
        j({"events": []}),
        j({"events": [{"stream": "stdin", "message": "x"}]}),
        j({"events": [{"stream": "stdout", "message": 5, "timestamp": "yesterday"}]}),
        j({"events": [{"stream": "stdout", "message": "x" * 300_000}]}),
        j({"events": [{"stream": "stdout", "message": "x"}] * 20_000}),
        j({"events": [{"stream": "stdout", "message": "x", "container": "../etc"}]}),
        j({"events": [{"stream": "stdout", "message": "ok", "timestamp": 1_767_225_600_000}]}),
    )
    add(
        "POST",
        f"{on}/attachments",
        lease_tok,
        b"",
        j({"filename": "a/b", "content_type": "text"}),
        j({"filename": "a.txt", "content_type": "text/plain", "content_base64": "%%%"}),
        j({"filename": "a.txt", "content_type": "text/plain", "byte_size": -1}),
        j({"filename": "", "content_type": "text/plain", "kind": "Bad Kind", "z": 0}),
        j({"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk="}),
        j({"filename": "b.txt", "content_type": "text/plain", "byte_size": 2}),
    )
    add(
        "POST",
        f"{on}/release",
        lease_tok,
        j({"reason": 5}),
        j({"reason": LONG}),
        j({"fence": "x"}),
    )
    add(
        "POST",
        f"{on}/complete",
        lease_tok,
        j({"outcome": "maybe"}),
        j({"created_task_ids": ["t"] * 101}),
        j({"next": {"worker_id": "w1"}}),
        j({"heartbeat": [{"id": "x", "fence": 1}]}),
        j({"details": [1, 2]}),
    )
    add("POST", f"{on}/fail", lease_tok, b"", b"{}", j({"error": ""}), j({"error": LONG}))
    add("POST", f"{on}/fail", worker, j({"error": "boom"}))
    add("POST", f"{on}/complete", worker, j({"outcome": "success"}))
    add(
        "POST",
        f"{on}/complete",
        worker,
        j(
            {
                "outcome": "success",
                "next": {"worker_id": "w1", "claim_id": "n1"},
                "heartbeat": [{"id": second.lease.id, "fence": second.lease.fence}],
            }
        ),
    )
    add("POST", f"{on}/complete", lease_tok, j({"outcome": "success", "fence": fence}))
    # Once ended: its token is spent.
    add("POST", f"{on}/heartbeat", lease_tok, b"")
    add("POST", f"{on}/logs", lease_tok, j({"events": [{"stream": "stderr", "message": "late"}]}))
    add("GET", f"{on}/payload", lease_tok, b"")
    add("POST", f"/leases/{second.lease.id}/fail", second_tok, j({"error": "boom"}))
    add("POST", f"/leases/{third.lease.id}/release", third.token, b"")
    return cases


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _answers(monkeypatch: pytest.MonkeyPatch, invoke: Invoke) -> list[tuple[Any, ...]]:
    """The whole corpus through `invoke`, on a rig of its own."""
    rig = with_artifacts(served_rig(monkeypatch))
    seen = []
    for method, path, token, raw, head in _corpus(rig):
        headers = {"host": "unit", **head}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        out = invoke(to_event(method, f"/api/v1{path}", headers, raw))
        shown = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        body = out.get("body") or ""
        if out.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        seen.append(
            (method, path, raw[:80], out["statusCode"], body, [shown.get(h) for h in HEADERS])
        )
        rig.advance(1)
    return seen


@pytest.fixture
def both(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    monkeypatch.setattr(SeqIds, "secret", _secret)
    api = _answers(monkeypatch, lambda_host.invoke)
    return api, _answers(monkeypatch, lambda_host.invoke_worker)


def test_both_endpoints_answer_the_whole_corpus_alike(both: tuple[list[Any], list[Any]]) -> None:
    api, url = both
    assert len(api) == len(url) > 140
    differ = [(a, u) for a, u in zip(api, url, strict=True) if a != u]
    assert differ == [], differ[:3]


def test_the_corpus_reaches_every_worker_route_s_success_and_its_refusals(
    both: tuple[list[Any], list[Any]],
) -> None:
    api, _ = both
    statuses = {status for *_, status, _body, _h in api}
    # Each kind of answer the worker routes give is in the corpus, so the comparison covers it.
    assert {200, 201, 202, 204, 400, 401, 403, 404, 409, 422} <= statuses
    codes = {json.loads(body)["error"]["code"] for *_, body, _h in api if '"error"' in body[:12]}
    assert {
        "invalid_request",
        "validation_failed",
        "unauthenticated",
        "forbidden",
        "lease_token_mismatch",
    } <= codes
    succeeded = {(m, p.split("?")[0].rsplit("/", 1)[-1]) for m, p, _r, s, *_ in api if s < 300}
    assert {
        ("POST", "claim"),
        ("POST", "start"),
        ("POST", "heartbeat"),
        ("POST", "fail"),
        ("GET", "payload"),
        ("POST", "logs"),
        ("POST", "attachments"),
        ("POST", "complete"),
        ("POST", "release"),
    } <= succeeded
