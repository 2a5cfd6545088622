"""Hand-made hostile requests against the local stack: huge and deeply nested bodies, invalid
UTF-8, absurd limits, forged cursors and ids full of path characters. Whatever arrives, the
answer is never a 5xx and every refusal is the API's error envelope with a documented code. The
routes that take a cursor, a limit or a path id are read from the served OpenAPI document, so
a route added later is covered without editing this file."""

from __future__ import annotations

import base64
import http.client
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from tenure.api.routes import ROUTES
from tenure.domain.documents import MAX_DEPTH
from tenure_cli.local.frontdoor import MAX_EVENT_BYTES

from tests.e2e.codes import DOCUMENTED
from tests.e2e.support import Held, World, assert_error

# Ids a caller might send in any path parameter, already as they travel on the request line.
HOSTILE_IDS = {
    "dot-dot": "..",
    "dot-dot-slash": "..%2F..%2Fhealth",
    "raw-traversal": "../../health",
    "encoded-slash": "a%2Fb",
    "double-encoded": "%252F",
    "nul": "%00",
    "bad-utf8": "%FF%FE",
    "unicode": quote("é-ü-漢字-\U0001f600"),
    "2kb-ascii": "x" * 2048,
    "2kb-unicode": quote("漢" * 700),
    "query-chars": "a%3Fb%23c",
    "token-shaped": "tnr_l_" + "A" * 40,
}
# The bodies that let a hostile path id get past validation, for the routes whose body is not
# all optional (so the id itself is what the service must cope with).
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/pools/{pool}/claim"): {"worker_id": "w-bad", "wait_seconds": 0},
    ("POST", "/api/v1/workers/{worker_id}/heartbeat"): {"leases": []},
    ("POST", "/api/v1/tasks/{task_id}/enqueue"): {"pool": "p-nowhere"},
    ("POST", "/api/v1/tasks/{task_id}/blocks"): {"kind": "error", "reason": "r"},
    ("PATCH", "/api/v1/tasks/{task_id}"): {"auto_enqueue_on_ready": False},
}


def envelope_code(status: int, raw: bytes) -> str | None:
    """Checks one answer: below 500, and any refusal in the envelope with a documented code."""
    assert status < 500, (status, raw[:300])
    if status < 400:
        return None
    body = json.loads(raw)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] in DOCUMENTED, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip(), body
    code: str = body["error"]["code"]
    return code


def raw_request(
    base: str, method: str, target: str, token: str | None, body: bytes | None = None
) -> tuple[int, bytes]:
    """One request with the target sent exactly as given (httpx would normalise `..`)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    try:
        conn.request(method, target, body=body, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def document(world_module: World) -> dict[str, Any]:
    r = world_module.admin.get("/openapi.json")
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json()
    return doc


@pytest.fixture(scope="module")
def world_module(api: Any) -> Iterator[World]:
    """One space for the module: these tests only read what they set up, or refuse."""
    from tests.e2e.support import suffix

    with api.admin() as admin:
        key = f"BAD{suffix()}"
        r = admin.post("/spaces", json={"key": key, "name": "hostile inputs"})
        assert r.status_code == 201, r.text
        r = admin.post("/workflows", json={"space": key, "slug": "wf", "name": "a workflow"})
        assert r.status_code == 201, r.text
        yield World(api, admin, key)


@pytest.fixture(scope="module")
def held(world_module: World) -> Iterator[Held]:
    """A claimed lease of the module's space, for the routes a lease token speaks to."""
    pool = world_module.pool()["name"]
    with world_module.api.client(world_module.worker_token([pool])) as worker:
        lease = world_module.held(pool, worker)
        yield lease
        lease.lease.close()


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if (method.upper(), path) != ("POST", "/api/v1/mcp")  # JSON-RPC, not this envelope
    ]


def _query_names(op: dict[str, Any]) -> set[str]:
    return {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}


# ---------------------------------------------------------------------------- bodies


def test_a_10_mb_body_is_413_payload_too_large_and_a_5_mb_one_is_judged(
    world_module: World,
) -> None:
    # API Gateway takes up to 10 MB, but Lambda takes an event of at most 6 MB: a 10 MB body
    # never reaches the function. The front door answers it as a clear 413 in the envelope.
    ten = b'{"key": "BIG", "name": "' + b"a" * (10 * 1024 * 1024 - 26) + b'"}'
    assert len(ten) == 10 * 1024 * 1024
    r = world_module.admin.post("/spaces", content=ten)
    message = assert_error(r, 413, "payload_too_large")
    assert str(MAX_EVENT_BYTES) in message
    five = b'{"key": "BIG", "name": "' + b"a" * (5 * 1024 * 1024) + b'"}'
    assert_error(world_module.admin.post("/spaces", content=five), 422, "validation_failed")


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 10_000 + b"]" * 10_000,
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        b'{"title": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    ],
    ids=["arrays", "objects", "inside-a-field"],
)
def test_json_nested_ten_thousand_levels_is_invalid_request(
    world_module: World, held: Held, body: bytes
) -> None:
    # Found by this test: the parser's RecursionError escaped the handler (a 500 per request).
    for client, path in (
        (world_module.admin, "/tasks"),
        (world_module.admin, "/spaces"),
        (world_module.admin, "/events"),
        (held.lease, f"/leases/{held.id}/complete"),
        (held.lease, f"/leases/{held.id}/heartbeat"),
    ):
        r = client.post(path, content=body)
        assert_error(r, 400, "invalid_request", mentions="nests too deeply")


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for n in range(levels):
        value = {"k": value} if n % 2 else [value]
    return value


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 40, 900])
def test_documents_nested_past_the_limit_are_validation_failed(
    world_module: World, held: Held, levels: int
) -> None:
    # Found by this test: DynamoDB keeps at most 32 levels in an item, so a task's properties
    # or a report's details 33 levels deep reached the table and answered 500.
    deep = _nested(levels - 1)  # inside the one object the field itself is
    admin, space = world_module.admin, world_module.space
    refusals = [
        (admin, "/tasks", {"space": space, "title": "t", "properties": {"k": deep}}, "properties"),
        (admin, "/events", {"space": space, "topic": "deep", "data": {"k": deep}}, "data"),
        (held.lease, f"/leases/{held.id}/complete", {"details": {"k": deep}}, "details"),
        (held.lease, f"/leases/{held.id}/complete", {"result": [deep]}, "result"),
        (
            held.lease,
            f"/leases/{held.id}/fail",
            {"error": "e", "metadata": {"k": deep}},
            "metadata",
        ),
    ]
    for client, path, body, field in refusals:
        r = client.post(path, json=body)
        assert_error(r, 422, "validation_failed", mentions=f"{field}: nests deeper than")
    pool = world_module.pool()["name"]
    rule = {
        "space": space,
        "name": f"deep-{levels}",
        "pool": pool,
        "subject": {"kind": "task", "title": "t", "properties": {"k": deep}},
        "trigger": {"topic": "deep"},
    }
    r = admin.post("/rules", json=rule)
    assert_error(r, 422, "validation_failed", mentions="subject.properties: nests deeper than")


def test_a_document_at_the_depth_limit_is_stored_and_read_back(world_module: World) -> None:
    deep = {"k": _nested(MAX_DEPTH - 1)}
    r = world_module.admin.post(
        "/tasks", json={"space": world_module.space, "title": "t", "properties": deep}
    )
    assert r.status_code == 201, r.text
    again = world_module.admin.get(f"/tasks/{r.json()['task']['id']}")
    assert again.status_code == 200 and again.json()["task"]["properties"] == deep


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe{}",
        b'{"space": "X", "title": "caf\xe9"}',  # Latin-1, not UTF-8
        b'{"space": "X", "title": "\xc0\xaf"}',  # an overlong encoding of "/"
        b'{"space": "X", "title": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8
        b"\x00\x00\x00{",
    ],
    ids=["bom-garbage", "latin-1", "overlong", "encoded-surrogate", "nul-bytes"],
)
def test_bodies_that_are_not_utf8_are_invalid_request(
    world_module: World, held: Held, body: bytes
) -> None:
    for client, path in (
        (world_module.admin, "/tasks"),
        (held.lease, f"/leases/{held.id}/complete"),
        (held.lease, f"/leases/{held.id}/fail"),
    ):
        assert_error(client.post(path, content=body), 400, "invalid_request")


def test_escaped_lone_surrogates_are_refused_wherever_they_would_be_stored(
    world_module: World, held: Held
) -> None:
    # Found by this test: `{"properties": {"\udfff": 1}}` parsed into a key that cannot be
    # encoded, so the write to the table failed (500); in a value it was stored as is.
    space = world_module.space
    for raw in (
        '{"space": "' + space + '", "title": "t", "properties": {"\\udfff": 1}}',
        '{"space": "' + space + '", "title": "t", "properties": {"k": ["\\ud83d"]}}',
    ):
        r = world_module.admin.post("/tasks", content=raw.encode())
        assert_error(r, 422, "validation_failed", mentions="properties: holds a string")
    r = held.lease.post(f"/leases/{held.id}/complete", content=b'{"details": {"note": "\\ud800"}}')
    assert_error(r, 422, "validation_failed", mentions="details: holds a string")
    r = world_module.admin.post("/tasks", content=b'{"space": "X", "title": "\\ud800"}')
    assert_error(r, 422, "validation_failed", mentions="title")


# ------------------------------------------------------------------- limits and cursors

# Wrong for any page size (the largest a route takes differs: leases 100, MCP 200).
ABSURD_LIMITS = ["1e30", "-1", "abc", "0", "1" + "0" * 40, "1.5", "NaN", "0x10", "%00", ""]


def _minimal_query(path: str, names: set[str], world: World, pool: str) -> dict[str, str]:
    """The required-ish scope a list route needs so the limit itself is what gets judged."""
    query: dict[str, str] = {}
    if "space" in names:
        query["space"] = world.space
    if "pool" in names and "/workers" in path:
        query["pool"] = pool
    return query


def _real_ids(world: World, held: Held) -> dict[str, str]:
    pool = str(held.won["lease"]["pool"])
    return {"task_id": held.task["id"], "lease_id": held.id, "pool": pool, "slug": "wf"} | {
        "key": world.space,
        "space": world.space,
    }


def _fill(path: str, ids: dict[str, str]) -> str:
    return re.sub(r"{(\w+)}", lambda m: ids.get(m[1], "nothing"), path)


def test_absurd_limits_are_validation_failed_on_every_route_that_takes_one(
    world_module: World, held: Held, document: dict[str, Any]
) -> None:
    ids = _real_ids(world_module, held)
    routes = [
        (method, path)
        for method, path, op in _operations(document)
        if "limit" in _query_names(op) and method == "GET"
    ]
    assert len(routes) >= 2, routes  # list leases and a task's activity at least
    admin_token = world_module.api.admin_token
    for method, path in routes:
        base = _minimal_query(
            path, _query_names(document["paths"][path]["get"]), world_module, ids["pool"]
        )
        for limit in ABSURD_LIMITS:
            target = (
                _fill(path, ids) + "?" + urlencode(base) + ("&" if base else "") + f"limit={limit}"
            )
            status, raw = raw_request(world_module.api.base, method, target, admin_token)
            code = envelope_code(status, raw)
            assert (status, code) == (422, "validation_failed"), (path, limit, raw)
            assert json.loads(raw)["error"]["message"].startswith("limit: "), raw


def _cursor_routes(doc: dict[str, Any]) -> list[str]:
    return [
        path
        for method, path, op in _operations(doc)
        if method == "GET" and "cursor" in _query_names(op)
    ]


def test_forged_truncated_and_foreign_cursors_never_fail_the_service(
    world_module: World, held: Held, document: dict[str, Any]
) -> None:
    admin = world_module.admin
    for _ in range(3):  # enough rows that a first page of one has a next cursor
        world_module.task(pool=held.won["lease"]["pool"])
    real = admin.get("/leases", params={"space": world_module.space, "limit": 1}).json()
    assert real["next_cursor"], real
    cursor = real["next_cursor"]
    ids = _real_ids(world_module, held)
    forged = {
        "garbage": "not-a-cursor",
        "base64-text": base64.urlsafe_b64encode(b"hello").decode(),
        "base64-json-other-shape": base64.urlsafe_b64encode(b'{"p": "../../x"}').decode(),
        "base64-json-array": base64.urlsafe_b64encode(b"[" * 200 + b"]" * 200).decode(),
        "truncated": cursor[: len(cursor) // 2],
        "one-char-short": cursor[:-1],
        "padding": "====",
        "bad-utf8": "%FF%FE",
        "too-long": "A" * 600,
    }
    routes = _cursor_routes(document)
    assert len(routes) >= 3, routes  # leases, a task's activity, a lease's logs at least
    for path in routes:
        names = _query_names(document["paths"][path]["get"])
        base = urlencode(_minimal_query(path, names, world_module, ids["pool"]))
        target = _fill(path, ids) + "?" + base + ("&" if base else "")
        token = world_module.api.admin_token
        for name, value in forged.items():
            quoted = value if value.startswith("%") else quote(value, safe="")
            status, raw = raw_request(
                world_module.api.base, "GET", f"{target}cursor={quoted}", token
            )
            code = envelope_code(status, raw)
            assert (status, code) == (422, "validation_failed"), (path, name, raw)
            assert json.loads(raw)["error"]["message"].startswith("cursor: "), raw
        # Another route's (or another space's) cursor: a position of the same shape may be
        # read as a position (no rows of another scope are reachable through it) or refused.
        status, raw = raw_request(
            world_module.api.base, "GET", f"{target}cursor={quote(cursor)}", token
        )
        assert envelope_code(status, raw) in (None, "validation_failed"), (path, raw)
    other = admin.get("/leases", params={"space": "OPS_ELSEWHERE", "cursor": cursor})
    assert other.status_code in (200, 422), other.text
    if other.status_code == 200:
        assert other.json()["leases"] == [], "a cursor never reaches another space's rows"


# ------------------------------------------------------------------------ path ids


def _token_for(world: World, held: Held, method: str, path: str, worker: str) -> str:
    audience = ROUTES[(method, path.replace("{", "<").replace("}", ">"))]
    if audience.startswith("worker"):
        return worker
    if audience == "lease":
        return str(held.won["token"])
    return world.api.admin_token


def test_ids_with_path_characters_in_every_path_parameter(
    world_module: World, held: Held, document: dict[str, Any]
) -> None:
    worker = world_module.worker_token(None)
    seen = 0
    for method, path, _ in _operations(document):
        params = re.findall(r"{(\w+)}", path)
        if not params:
            continue
        token = _token_for(world_module, held, method, path, worker)
        body = json.dumps(BODIES.get((method, path), {})).encode() if method != "GET" else None
        for param in params:
            for name, hostile in HOSTILE_IDS.items():
                ids = {"lease_id": held.id, "task_id": held.task["id"]}
                ids[param] = hostile
                target = _fill(path, ids)
                status, raw = raw_request(world_module.api.base, method, target, token, body)
                try:
                    envelope_code(status, raw)
                except AssertionError as wrong:
                    raise AssertionError(f"{method} {path} with {param}={name}: {wrong}") from None
                seen += 1
    assert seen >= 40 * len(HOSTILE_IDS), seen
    # The lease is untouched by all of it.
    r = world_module.admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json()["state"] in ("dispatched", "running"), r.text


def test_a_bearer_token_of_invalid_bytes_or_absurd_length_is_unauthenticated(
    world_module: World,
) -> None:
    base = world_module.api.base
    for token in ("\udcff\udcfe", "tnr_l_" + "A" * 10_000, "tnr_o_" + "\x00" * 8, "é" * 64):
        conn = http.client.HTTPConnection(urlsplit(base).hostname, urlsplit(base).port, timeout=60)
        try:
            conn.putrequest("GET", "/api/v1/leases?space=X")
            value = ("Bearer " + token).encode("utf-8", "surrogateescape")
            conn.putheader("authorization", value)
            conn.endheaders()
            answer = conn.getresponse()
            status, raw = answer.status, answer.read()
        finally:
            conn.close()
        assert envelope_code(status, raw) == "unauthenticated", (token[:20], raw)
