"""The MCP endpoint against `tenure local` with the official `mcp` client (streamable HTTP +
ClientSession): what each token sees, every tool, and the refusals."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.support import Held, World, assert_error, suffix

T = TypeVar("T")
OPERATOR_TOOLS = {
    "leases_list",
    "leases_get",
    "leases_cancel",
    "leases_fetch_logs",
    "leases_list_attachments",
    "task_recover",
    "task_inspect",
    "task_approve",
    "task_cancel",
    "events_send",
}
MEMBER_ONLY = {"leases_cancel", "task_recover", "task_approve", "task_cancel", "events_send"}
LEASE_TOOLS = {
    "leases_list",
    "leases_get",
    "leases_fetch_logs",
    "leases_list_attachments",
    "lease_fetch_payload",
    "lease_heartbeat",
    "lease_complete",
    "lease_fail",
    "lease_release",
    "task_block",
    "task_unblock",
    "events_send",
}
WORKER_TOOLS = {
    "task_run_claim_next",
    "task_run_claim",
    "task_run_heartbeat",
    "task_run_complete",
    "task_run_fail",
    "task_run_release",
    "task_run_block",
    "task_run_payload",
}


@asynccontextmanager
async def session(world: World, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{world.api.base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def over_mcp(world: World, token: str, work: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def run() -> T:
        async with session(world, token) as client:
            return await work(client)

    try:
        return anyio.run(run)
    except BaseExceptionGroup as group:
        # The client's task groups wrap a JSON-RPC error; the test wants the error itself.
        errors = group.subgroup(MCPError)
        if errors is None:
            raise
        first = errors.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


def tools_of(world: World, token: str) -> set[str]:
    async def names(client: ClientSession) -> set[str]:
        return {tool.name for tool in (await client.list_tools()).tools}

    return over_mcp(world, token, names)


def call(world: World, token: str, name: str, arguments: dict[str, Any]) -> Any:
    async def one(client: ClientSession) -> Any:
        return await client.call_tool(name, arguments)

    return over_mcp(world, token, one)


def ok(world: World, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = call(world, token, name, arguments)
    assert not result.is_error, result
    assert "tnr_" not in str(result.content)
    out: dict[str, Any] = result.structured_content
    return out


def _held(world: World, **pool_fields: Any) -> tuple[Held, str]:
    pool = world.pool(**pool_fields)["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    return held, pool


def _token(held: Held) -> str:
    token: str = held.won["token"]
    return token


def test_initialize_answers_with_tenure_and_each_token_sees_its_tools(world: World) -> None:
    async def info(client: ClientSession) -> str:
        assert client.server_info is not None
        return client.server_info.name

    assert over_mcp(world, world.api.admin_token, info) == "tenure"
    assert tools_of(world, world.api.admin_token) == OPERATOR_TOOLS
    reader = world.operator_token("read", spaces=[world.space])
    assert tools_of(world, reader) == OPERATOR_TOOLS - MEMBER_ONLY
    held, _ = _held(world)
    seen = tools_of(world, _token(held))
    assert seen == LEASE_TOOLS and "leases_cancel" not in seen
    assert tools_of(world, world.worker_token(None)) == WORKER_TOOLS


def test_a_worker_token_runs_the_whole_loop_over_mcp_without_a_lease_token(
    world: World,
) -> None:
    pool = world.pool()["name"]
    worker = world.worker_token([pool])
    task = world.task(pool)["task"]
    me = {"worker_id": f"agent-{suffix()}"}
    claimed = ok(world, worker, "task_run_claim_next", {**me, "claim_id": "c-1"})
    run = claimed["run"]
    assert claimed["task"]["id"] == task["id"] and run["fence"] == 1
    assert len(claimed["claim_token_hash"]) == 8
    # The answer was lost: the same claim_id answers the same run at the same fence.
    again = ok(world, worker, "task_run_claim_next", {**me, "claim_id": "c-1"})
    assert (again["run"]["run_id"], again["run"]["fence"]) == (run["run_id"], 1)
    ids = {**me, "run_id": run["run_id"]}
    assert ok(world, worker, "task_run_heartbeat", ids)["run"]["state"] == "running"
    assert ok(world, worker, "task_run_payload", ids)["subject"]["kind"] == "task"
    report = {**ids, "result": {"answer": 42}, "report_id": "r-1"}
    first = ok(world, worker, "task_run_complete", report)
    assert first["run"]["state"] == "completed"
    assert ok(world, worker, "task_run_complete", report) == first
    shown = world.admin.get(f"/leases/{run['run_id']}").json()
    assert (shown["outcome"], shown["result"]) == ("success", {"answer": 42})
    assert ok(world, worker, "task_run_claim_next", me) == {"run": None}

    # Another worker token, or another worker_id, does not hold the run.
    other = world.worker_token([pool])
    stolen = call(world, other, "task_run_heartbeat", ids)
    assert stolen.is_error and stolen.structured_content["error"]["code"] == "stale_lease"
    late = call(world, worker, "task_run_fail", {**ids, "error": "late"})
    assert late.is_error and late.structured_content["error"]["code"] == "invalid_transition"
    unknown = call(world, worker, "task_run_release", {**me, "run_id": "lease_nope"})
    assert unknown.is_error
    assert unknown.structured_content["error"]["code"] == "lease_not_found"


def test_operators_inspect_and_approve_over_mcp(world: World) -> None:
    pool = world.pool()["name"]
    task = world.task(pool, requires_approval=True)
    assert task["lease"] is None
    reader = world.operator_token("read", spaces=[world.space])
    shot = ok(world, reader, "task_inspect", {"id": task["task"]["id"]})
    assert shot["task"]["blocked_reasons"][0]["source"] == "approval"
    member = world.operator_token("member", spaces=[world.space])
    approved = ok(world, member, "task_approve", {"task_id": task["task"]["id"], "note": "ok"})
    assert approved["lease"]["state"] == "pending"
    recover = call(world, member, "task_recover", {"task_id": task["task"]["id"], "note": "x"})
    assert recover.structured_content["error"]["code"] == "invalid_transition"


def test_a_lease_token_reads_its_own_logs_and_attachments_over_mcp(world: World) -> None:
    held, _ = _held(world)
    r = held.lease.post(
        f"/leases/{held.id}/logs", json={"events": [{"stream": "stdout", "message": "own"}]}
    )
    assert r.status_code == 202, r.text
    token = _token(held)
    logs = ok(world, token, "leases_fetch_logs", {"lease_id": held.id})
    assert [e["message"] for e in logs["events"]] == ["own"]
    assert ok(world, token, "leases_list_attachments", {"lease_id": held.id}) == {"attachments": []}


PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
JSON_OR_SSE = "application/json, text/event-stream"


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({"Accept": "application/json"}, PING, 415, "unsupported_media_type"),
        (
            {"Content-Type": "text/plain", "Accept": JSON_OR_SSE},
            PING,
            415,
            "unsupported_media_type",
        ),
        ({"Content-Type": "application/json", "Accept": "text/html"}, PING, 406, "not_acceptable"),
        # JSON answers only: a client that takes nothing but a stream cannot read them.
        (
            {"Content-Type": "application/json", "Accept": "text/event-stream"},
            PING,
            406,
            "not_acceptable",
        ),
        (
            {"Content-Type": "application/json", "Accept": "application/json"},
            b"{",
            400,
            "invalid_request",
        ),
    ],
    ids=["no-content-type", "text-content-type", "accepts-no-json", "accepts-sse-only", "not-json"],
)
def test_a_request_the_transport_cannot_read_is_refused_in_the_envelope(
    world: World, headers: dict[str, str], body: bytes, status: int, code: str
) -> None:
    r = world.admin.post("/mcp", content=body, headers=headers)
    assert_error(r, status, code)


def test_no_server_stream_and_no_session_answer_405_over_the_local_front_door(
    world: World,
) -> None:
    for method in ("GET", "DELETE"):
        r = world.admin.request(method, "/mcp", headers={"Accept": "text/event-stream"})
        assert r.status_code == 405 and r.headers["allow"] == "POST", r.text
        assert r.json()["error"]["code"] == "method_not_allowed"


def test_operator_tools_list_read_logs_attachments_and_cancel(world: World) -> None:
    held, pool = _held(world)
    assert held.lease.post(f"/leases/{held.id}/start").status_code == 200
    r = held.lease.post(
        f"/leases/{held.id}/logs", json={"events": [{"stream": "stdout", "message": "hi mcp"}]}
    )
    assert r.status_code == 202, r.text
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "out.txt",
            "content_type": "text/plain",
            "byte_size": 5,
            "content_base64": base64.b64encode(b"hello").decode(),
        },
    )
    assert r.status_code == 201, r.text
    reader = world.operator_token("read", spaces=[world.space])

    listed = ok(world, reader, "leases_list", {"space_key": world.space, "limit": 5})["leases"]
    row = next(x for x in listed if x["id"] == held.id)
    assert row["subject"] == {"kind": "task", "id": held.task["id"], "key": held.task["key"]}
    assert "timing" not in row and "worker_version" not in row and row["pool"] == pool

    got = ok(world, reader, "leases_get", {"lease_id": held.id})["lease"]
    assert got["state"] == "running" and "timing" in got and "worker_version" not in got
    assert "claim_token_hash" not in got

    logs = ok(world, reader, "leases_fetch_logs", {"lease_id": held.id, "tail": 10})
    assert [e["message"] for e in logs["events"]] == ["hi mcp"]
    assert logs["truncated"] is False

    found = ok(world, reader, "leases_list_attachments", {"lease_id": held.id})["attachments"]
    assert [a["filename"] for a in found] == ["out.txt"]
    path = found[0]["download_path"]
    assert path == f"/api/v1/leases/{held.id}/attachments/{found[0]['id']}"
    fetched = world.api.client(reader).get(path.removeprefix("/api/v1"))
    assert fetched.status_code == 200 and fetched.content == b"hello"

    refused = call(world, reader, "leases_cancel", {"lease_id": held.id})
    assert refused.is_error and refused.structured_content["error"]["code"] == "forbidden"
    member = world.operator_token("member", spaces=[world.space])
    cancelled = ok(world, member, "leases_cancel", {"lease_id": held.id})["lease"]
    assert cancelled["state"] == "cancelling"


def test_a_lease_token_works_its_lease_over_mcp(world: World) -> None:
    held, _ = _held(world)
    token = _token(held)
    payload = ok(world, token, "lease_fetch_payload", {})
    assert payload["lease"]["id"] == held.id and payload["subject"]["kind"] == "task"
    beat = ok(world, token, "lease_heartbeat", {})
    assert beat["state"] == "running" and beat["revoke"] is None
    mine = ok(world, token, "leases_list", {"space_key": world.space})["leases"]
    assert held.id in {x["id"] for x in mine}
    assert ok(world, token, "leases_get", {"lease_id": held.id})["lease"]["id"] == held.id
    done = ok(world, token, "lease_complete", {"details": {"answer": 42}})
    assert done["lease"]["state"] == "completed"

    # Each on a pool of its own: a failed job's retry and a released job wait in line again.
    failing, _ = _held(world)
    failed = ok(world, _token(failing), "lease_fail", {"error": "it broke"})
    assert failed["lease"]["state"] == "failed"
    releasing, _ = _held(world)
    released = ok(world, _token(releasing), "lease_release", {"reason": "not mine"})
    # Released: this lease ends (cancelled, end_reason released) and its job is queued again.
    assert (released["lease"]["state"], released["lease"]["end_reason"]) == (
        "cancelled",
        "released",
    )

    # A worker that cannot go on blocks its task: its lease is released in the same step.
    blocking, _ = _held(world)
    block = ok(world, _token(blocking), "task_block", {"kind": "error", "reason": "disk full"})
    assert block["block"]["kind"] == "error"
    gone = world.admin.get(f"/leases/{blocking.id}").json()
    assert (gone["state"], gone["end_reason"]) == ("cancelled", "released")
    # Released by its own block, the lease has ended: its token clears nothing any more.
    late = call(world, _token(blocking), "task_unblock", {"block_id": block["block"]["id"]})
    assert late.is_error and late.structured_content["error"]["code"] == "unauthenticated"


def test_a_lease_token_cannot_reach_another_spaces_lease(world: World) -> None:
    held, _ = _held(world)
    other = f"O{suffix()}"
    assert world.admin.post("/spaces", json={"key": other, "name": "other"}).status_code == 201
    elsewhere = World(world.api, world.admin, other)
    theirs, _ = _held(elsewhere)
    token = _token(held)
    read = call(world, token, "leases_get", {"lease_id": theirs.id})
    assert read.is_error
    assert read.structured_content["error"]["code"] == "lease_token_mismatch"
    listed = call(world, token, "leases_list", {"space_key": other})
    assert listed.is_error
    assert listed.structured_content["error"]["code"] == "lease_token_mismatch"
    # Never offered to a lease token; called anyway, core/authz refuses it as over HTTP.
    cancel = call(world, token, "leases_cancel", {"lease_id": held.id})
    assert cancel.is_error
    assert cancel.structured_content["error"]["code"] == "lease_token_mismatch"


def test_the_refusals_read_as_documented(world: World) -> None:
    admin = world.api.admin_token
    unknown = call(world, admin, "leases_get", {"lease_id": "lease_nope"})
    assert unknown.is_error and unknown.content[0].text == "unknown lease id"

    quiet, _ = _held(world, keeps_logs=False)
    with pytest.raises(MCPError) as none_kept:
        call(world, admin, "leases_fetch_logs", {"lease_id": quiet.id})
    assert none_kept.value.code == -32602

    for arguments in (
        {"lease_id": quiet.id, "token": "x"},
        {"lease_id": quiet.id, "authorization": "Bearer x"},
        {"lease_id": _token(quiet)},
    ):
        with pytest.raises(MCPError) as refused:
            call(world, admin, "leases_get", arguments)
        assert refused.value.code == -32602 and "token" in refused.value.message
