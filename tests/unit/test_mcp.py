"""The MCP endpoint over the fake store: the bridge, the tool table per token, the
refusals, through `handle()` exactly as API Gateway and the front door call it."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api.mcp import bridge, server
from tenure.api.mcp import tools as t
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.rules_support import leases_of_no_task
from tests.unit.support import ADMIN, MEMBER, READER, SPACE, WORKER, Rig, as_lease

ACCEPT = "application/json, text/event-stream"
HANDSHAKE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "unit", "version": "0"},
}


@pytest.fixture
def rpc(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(
        method: str, params: Any = None, actor: Principal | None = READER, raw: Any = None
    ) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        body = json.dumps(raw if raw is not None else message).encode()
        headers = {
            "host": "unit",
            "content-type": "application/json",
            "accept": ACCEPT,
            "mcp-protocol-version": "2025-06-18",
        }
        event = to_event("POST", "/api/v1/mcp", headers, body)
        principal = json.dumps(dataclasses.asdict(actor)) if actor else ""
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        text = out.get("body") or ""
        if out.get("isBase64Encoded"):
            text = base64.b64decode(text).decode()
        return {"status": out["statusCode"], "body": json.loads(text) if text else None}

    return call


def tool(rpc: Any, name: str, arguments: dict[str, Any], actor: Principal) -> dict[str, Any]:
    out = rpc("tools/call", {"name": name, "arguments": arguments}, actor)
    assert out["status"] == 200, out
    return out["body"]


def names(rpc: Any, actor: Principal) -> list[str]:
    out = rpc("tools/list", {}, actor)
    assert out["status"] == 200, out
    return [x["name"] for x in out["body"]["result"]["tools"]]


def test_initialize_answers_json_with_the_servers_name(rpc: Any) -> None:
    out = rpc("initialize", HANDSHAKE)
    assert out["status"] == 200
    assert out["body"]["result"]["serverInfo"]["name"] == "tenure"
    assert out["body"]["result"]["instructions"] == server.INSTRUCTIONS


# Each kind of token's line of the instructions, by how it starts, and the audiences it covers.
INSTRUCTED = {
    "Operator token": ("operator:read", "operator:member"),
    "Lease token": ("lease",),
    "Worker token": ("worker",),
}
# Words of the instructions shaped like a tool's name that are not one: fields, token prefixes.
NOT_TOOLS = {"run_id", "worker_id", "tnr_o", "tnr_l", "tnr_w"}


def _tool_names(text: str) -> set[str]:
    return set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text)) - NOT_TOOLS


def test_the_instructions_name_every_tool_under_each_token_offered_it() -> None:
    lines = server.INSTRUCTIONS.splitlines()
    assert len(lines) == 1 + len(INSTRUCTED)
    for start, audiences in INSTRUCTED.items():
        (line,) = [x for x in lines if x.startswith(start)]
        offered = {x.name for x in t.TOOLS if set(x.audience) & set(audiences)}
        assert _tool_names(line) == offered, start
    operator = next(x for x in lines if x.startswith("Operator token"))
    members = {x.name for x in t.TOOLS if "operator:member" in x.audience}
    assert _tool_names(operator.split("member or admin", 1)[1]) == members
    assert not _tool_names(lines[0])


def test_the_token_decides_the_tools_it_sees(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    operator = [
        "leases_list",
        "leases_get",
        "leases_cancel",
        "task_cancel",
        "leases_fetch_logs",
        "leases_list_attachments",
        "events_send",
        "task_recover",
        "task_inspect",
        "task_approve",
    ]
    assert names(rpc, ADMIN) == operator
    assert names(rpc, MEMBER) == operator
    members_only = ("leases_cancel", "task_cancel", "events_send", "task_recover", "task_approve")
    assert names(rpc, READER) == [n for n in operator if n not in members_only]
    assert names(rpc, as_lease(lease.id)) == [
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
    ]
    assert names(rpc, WORKER) == [
        "task_run_claim_next",
        "task_run_claim",
        "task_run_heartbeat",
        "task_run_complete",
        "task_run_fail",
        "task_run_release",
        "task_run_block",
        "task_run_payload",
    ]


def test_a_worker_blocks_and_unblocks_its_own_task_over_mcp(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    blocked = tool(rpc, "task_block", {"kind": "needs_input", "reason": "which region?"}, me)
    block = blocked["result"]["structuredContent"]["block"]
    assert (block["kind"], block["reason"]) == ("needs_input", "which region?")
    # Blocking with the running lease's token released it (no attempt used).
    assert rig.lease(lease.id).end_reason is not None
    assert rig.lease(lease.id).end_reason.value == "released"
    task = rig.svc.graph.get_task(MEMBER, lease.task_id or "")
    assert [r["source"] for r in task.blocked_reasons] == ["block"]
    # The released lease's powers ended with it: clearing the block is a person's job now.
    refused = tool(rpc, "task_unblock", {"block_id": block["id"], "note": "eu-west"}, me)
    assert refused["result"]["isError"]
    assert refused["result"]["structuredContent"]["error"]["code"] == "unauthenticated"
    rig.svc.blocks.clear_block(MEMBER, lease.task_id or "", block["id"], "eu-west")
    assert not rig.svc.graph.get_task(MEMBER, lease.task_id or "").blocked_reasons


def test_one_agent_waits_for_an_event_another_sends_over_mcp(rpc: Any, rig: Rig) -> None:
    waiter = rig.running()
    me = as_lease(waiter.id)
    wait = {"kind": "event", "event": "review.done", "key": "pr-7"}
    block = tool(rpc, "task_block", wait, me)["result"]["structuredContent"]["block"]
    assert (block["kind"], block["state"], block["key"]) == ("event", "open", "pr-7")
    sender = rig.running("w2")
    data = {"approved": True}
    sent = tool(
        rpc,
        "events_send",
        {"name": "review.done", "key": "pr-7", "data": data},
        as_lease(sender.id),
    )
    assert sent["result"]["structuredContent"] == {"cleared": 1}
    task = rig.svc.graph.get_task(MEMBER, waiter.task_id or "")
    assert task.blocked_reasons == ()
    # A reader may not send one; an operator names the space.
    refused = tool(rpc, "events_send", {"space": SPACE, "name": "n", "key": "k"}, READER)
    assert refused["result"]["isError"]
    unnamed = tool(rpc, "events_send", {"name": "n", "key": "k"}, MEMBER)
    assert unnamed["result"]["isError"] and "space" in json.dumps(unnamed["result"])


def test_no_token_is_refused_before_the_protocol(rpc: Any) -> None:
    assert rpc("tools/list", {}, None)["status"] == 401


def test_every_tool_has_an_object_input_schema_without_unknown_fields() -> None:
    for item in t.TOOLS:
        schema = item.input_schema()
        assert schema["type"] == "object" and schema.get("additionalProperties") is False
    limit = t.BY_NAME["leases_list"].input_schema()["properties"]["limit"]
    assert (limit["default"], limit["maximum"]) == (50, 200)


def test_leases_list_carries_subject_references_without_timing(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    body = tool(rpc, "leases_list", {"space_key": SPACE}, READER)
    listed = body["result"]["structuredContent"]["leases"]
    assert [x["id"] for x in listed] == [lease.id]
    row = listed[0]
    assert row["subject"] == {"kind": "task", "id": lease.task_id, "key": lease.task_key}
    assert "timing" not in row and "worker_version" not in row
    got = tool(rpc, "leases_get", {"lease_id": lease.id}, READER)["result"]
    assert "timing" in got["structuredContent"]["lease"]
    assert "worker_version" not in got["structuredContent"]["lease"]


def test_a_lease_with_nothing_to_delete_reads_reclaimed_once_its_retention_passed(
    rpc: Any, rig: Rig
) -> None:
    rig.make_pool("short", retention_seconds=60)
    lease = rig.running(pool="short")
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})

    def shown() -> list[bool]:
        got = tool(rpc, "leases_get", {"lease_id": lease.id}, READER)["result"]
        body = tool(rpc, "leases_list", {"space_key": SPACE}, READER)["result"]
        listed = [x for x in body["structuredContent"]["leases"] if x["id"] == lease.id]
        return [got["structuredContent"]["lease"]["reclaimed"], listed[0]["reclaimed"]]

    assert shown() == [False, False]
    rig.advance(60)
    assert shown() == [True, True]
    assert rig.lease(lease.id).reclaimed_at is None, "derived: nothing was written"


def test_an_unknown_lease_is_a_tool_error(rpc: Any) -> None:
    result = tool(rpc, "leases_get", {"lease_id": "lease_nope"}, READER)["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "unknown lease id"


def test_a_read_operator_cannot_cancel(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    result = tool(rpc, "leases_cancel", {"lease_id": lease.id}, READER)["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "forbidden"
    done = tool(rpc, "leases_cancel", {"lease_id": lease.id}, MEMBER)["result"]
    assert done["structuredContent"]["lease"]["state"] == "cancelling"


def test_task_cancel_is_a_members_and_refuses_a_readers_and_an_ended_task(
    rpc: Any, rig: Rig
) -> None:
    lease = rig.running()
    args = {"task_id": lease.task_id, "reason": "called off", "subtree": True}
    refused = tool(rpc, "task_cancel", args, READER)["result"]
    assert refused["structuredContent"]["error"]["code"] == "forbidden"
    done = tool(rpc, "task_cancel", args, MEMBER)["result"]["structuredContent"]
    assert done == {"cancelled": 1, "remaining": 0}
    assert rig.lease(lease.id).state.value == "cancelling"
    again = tool(rpc, "task_cancel", args, MEMBER)["result"]
    assert again["structuredContent"]["error"]["code"] == "invalid_transition"
    bad = tool(rpc, "task_cancel", {**args, "reason": ""}, MEMBER)
    assert "error" in bad or bad["result"]["isError"] is True


@pytest.mark.parametrize(
    "arguments",
    [
        {"lease_id": "x", "token": "abc"},
        {"lease_id": "x", "lease_token": "abc"},
        {"lease_id": "x", "Authorization": "Bearer abc"},
        {"lease_id": "tnr_l_lease_1.abcdefghijklmnopqrstuvwxyz"},
    ],
)
def test_a_token_in_the_input_is_refused_as_invalid_params(
    rpc: Any, arguments: dict[str, Any]
) -> None:
    body = tool(rpc, "leases_get", arguments, READER)
    assert body["error"]["code"] == -32602 and "token" in body["error"]["message"]


def test_the_payload_tool_hands_on_the_results_of_the_tasks_before(rpc: Any, rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    blocker, _ = rig.task(title="build")
    first = rig.claim().lease
    rig.svc.reports.complete(
        as_lease(first.id), first.id, {"outcome": "success", "result": {"artifact": "a.tgz"}}
    )
    rig.svc.filing.create_task(
        MEMBER,
        SPACE,
        "deploy",
        None,
        None,
        {},
        "builders",
        None,
        links=TaskLinks(depends_on=(blocker.id,)),
    )
    lease = rig.claim().lease
    payload = tool(rpc, "lease_fetch_payload", {}, as_lease(lease.id))["result"]
    inputs = payload["structuredContent"]["inputs"]
    assert [(i["task_id"], i["status"], i["result"]) for i in inputs] == [
        (blocker.id, "completed", {"artifact": "a.tgz"})
    ]


def test_usage_counts_are_not_mistaken_for_tokens() -> None:
    t.refuse_tokens({"usage": {"input_tokens": 1, "output_tokens": 2}})


def test_a_lease_token_works_its_lease_and_sees_only_its_space(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    payload = tool(rpc, "lease_fetch_payload", {}, me)["result"]["structuredContent"]
    assert payload["subject"]["kind"] == "task" and payload["lease"]["id"] == lease.id
    beat = tool(rpc, "lease_heartbeat", {}, me)["result"]["structuredContent"]
    assert beat["state"] == "running" and beat["revoke"] is None
    listed = tool(rpc, "leases_list", {"space_key": SPACE}, me)["result"]["structuredContent"]
    assert lease.id in [x["id"] for x in listed["leases"]]
    other = tool(rpc, "leases_list", {"space_key": "ELSEWHERE"}, me)["result"]
    assert other["structuredContent"]["error"]["code"] == "lease_token_mismatch"
    cancel = tool(rpc, "leases_cancel", {"lease_id": lease.id}, me)["result"]
    assert cancel["isError"] is True
    done = tool(rpc, "lease_complete", {"details": {"ok": True}}, me)["result"]
    assert done["structuredContent"]["lease"]["state"] == "completed"
    text = json.dumps(done)
    assert "tnr_" not in text and (lease.token_hash or "x" * 64) not in text


def test_logs_of_a_pool_keeping_none_are_invalid_params(rpc: Any, rig: Rig) -> None:
    rig.make_pool("quiet", keeps_logs=False)
    lease = rig.running(pool="quiet")
    body = tool(rpc, "leases_fetch_logs", {"lease_id": lease.id}, READER)
    assert body["error"]["code"] == -32602 and "keeps no logs" in body["error"]["message"]


def test_a_bad_argument_is_a_tool_error_naming_the_field(rpc: Any) -> None:
    result = tool(rpc, "leases_list", {"space_key": SPACE, "limit": 201}, READER)["result"]
    assert result["isError"] is True and "limit" in result["content"][0]["text"]


def test_leases_list_keeps_the_subject_kinds_asked_for_behind_newer_task_leases(
    rpc: Any, rig: Rig
) -> None:
    # A workflow's or the space's lease stays findable however many task leases came after
    # it: the filter reads those leases apart, under the same read budget.
    minted = leases_of_no_task(rig)
    for _ in range(4):
        rig.task()
        rig.advance(1)
    rig.store.list_budget = 2

    def listed(arguments: dict[str, Any], actor: Principal) -> list[str]:
        body = tool(rpc, "leases_list", {"space_key": SPACE, **arguments}, actor)["result"]
        assert not body.get("isError"), body
        return [x["id"] for x in body["structuredContent"]["leases"]]

    assert listed({"subject_kind": ["workflow", "space"]}, READER) == minted
    assert listed({"subject_kind": ["space"]}, READER) == minted[:1]
    assert len(listed({}, READER)) == 2 and not set(listed({}, READER)) & set(minted)
    worker_lease = rig.running()
    assert listed({"subject_kind": ["workflow"]}, as_lease(worker_lease.id)) == minted[1:]


@pytest.mark.parametrize("kinds", [[], ["tasks"], ["task", "workflow", "space", "task"], "task"])
def test_leases_list_refuses_a_subject_kind_it_does_not_know_naming_the_field(
    rpc: Any, kinds: Any
) -> None:
    body = tool(rpc, "leases_list", {"space_key": SPACE, "subject_kind": kinds}, READER)
    result = body["result"]
    assert result["isError"] is True and "subject_kind" in result["content"][0]["text"]


SECRET = "tnr_o_" + "k" * 40  # shaped like an operator token


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (SECRET, {}),
        ("x" * 100_000, {}),
        ("tools/call", {"name": SECRET, "arguments": {}}),
        ("tools/call", {"name": "leases_list", "arguments": {SECRET: 1, "space_key": SPACE}}),
        ("tools/call", {"name": "leases_list", "arguments": {"space_key": SPACE, "x" * 9000: 1}}),
    ],
    ids=[
        "a token as the method",
        "a long method",
        "a token as the tool",
        "a token as a key",
        "a long key",
    ],
)
def test_an_error_never_echoes_a_token_nor_more_than_a_short_part_of_what_was_sent(
    rpc: Any, method: str, params: dict[str, Any]
) -> None:
    out = rpc(method, params, READER)
    text = json.dumps(out["body"])
    assert SECRET not in text and "kkkkkkkkkk" not in text
    assert len(text) < 2_000, text[:300]
    error = out["body"].get("error") or out["body"]["result"]
    assert error.get("code", -1) in (-32601, -32602) or error.get("isError") is True


def test_an_unknown_tool_is_invalid_params(rpc: Any) -> None:
    assert tool(rpc, "leases_nope", {}, READER)["error"]["code"] == -32602


def test_a_notification_is_accepted_without_a_body(rpc: Any) -> None:
    out = rpc("", raw={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert out["status"] == 202 and out["body"] is None


def test_a_body_that_is_not_json_rpc_is_400_invalid_request_in_the_envelope(rpc: Any) -> None:
    out = rpc("", raw=[1, 2])
    assert out["status"] == 400 and out["body"]["error"]["code"] == "invalid_request"


def test_the_bridge_hands_the_body_once_and_gathers_the_answer() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["scope"] = scope
        seen["body"] = (await receive())["body"]
        await send({"type": "http.response.start", "status": 201, "headers": [(b"X-A", b"1")]})
        await send({"type": "http.response.body", "body": b"he", "more_body": True})
        await send({"type": "http.response.body", "body": b"llo"})

    event = to_event("POST", "/api/v1/mcp?x=1", {"Host": "h", "Accept": "a"}, b"\x00\xff")
    out = bridge.run(app, event)
    assert out == {"statusCode": 201, "headers": {"x-a": "1"}, "body": "hello"}
    assert seen["body"] == b"\x00\xff"
    assert seen["scope"]["path"] == "/api/v1/mcp" and seen["scope"]["query_string"] == b"x=1"
    assert (b"accept", b"a") in seen["scope"]["headers"]


def test_the_bridge_answers_even_when_its_thread_already_runs_an_event_loop() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    event = to_event("POST", "/api/v1/mcp", {"Host": "h"}, b"{}")

    async def host() -> dict[str, Any]:  # e.g. a browser driver's loop on the main thread
        return bridge.run(app, event)

    assert asyncio.run(host())["body"] == "ok"


def test_the_api_loads_without_the_sdk_and_mcp_loads_it_on_demand() -> None:
    code = (
        "import sys; import tenure.api.app; "
        "assert 'mcp' not in sys.modules and 'starlette' not in sys.modules, 'eager SDK'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _post(rig: Rig, monkeypatch: pytest.MonkeyPatch, headers: dict[str, str], body: bytes) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    event = to_event("POST", "/api/v1/mcp", {"host": "unit", **headers}, body)
    principal = json.dumps(dataclasses.asdict(READER))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    return api.handle(event, None)


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
JSON = "application/json"


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({"content-type": JSON}, PING, 406, "not_acceptable"),
        ({"content-type": JSON, "accept": "text/html"}, PING, 406, "not_acceptable"),
        ({"accept": ACCEPT}, PING, 415, "unsupported_media_type"),
        ({"content-type": "text/plain", "accept": ACCEPT}, PING, 415, "unsupported_media_type"),
        (
            {"content-type": "application/jsonx", "accept": ACCEPT},
            PING,
            415,
            "unsupported_media_type",
        ),
        ({"content-type": JSON, "accept": ACCEPT}, b"not json", 400, "invalid_request"),
        ({"content-type": JSON, "accept": ACCEPT}, b'{"a": 1}', 400, "invalid_request"),
        ({"content-type": JSON, "accept": ACCEPT}, b"[1, 2]", 400, "invalid_request"),
        ({"content-type": JSON, "accept": ACCEPT}, b"x" * (5 * 2**20), 413, "payload_too_large"),
        # The protocol's 2026-07-28 revision, which the SDK serves in its own module.
        (
            {"content-type": JSON, "accept": "text/html", "mcp-protocol-version": "2026-07-28"},
            PING,
            406,
            "not_acceptable",
        ),
        (
            {"content-type": JSON, "accept": ACCEPT, "mcp-protocol-version": "2026-07-28"},
            b"{nope",
            400,
            "invalid_request",
        ),
    ],
)
def test_a_request_the_transport_cannot_read_is_refused_in_the_envelope_it_documents(
    rig: Rig,
    monkeypatch: pytest.MonkeyPatch,
    headers: dict[str, str],
    body: bytes,
    status: int,
    code: str,
) -> None:
    out = _post(rig, monkeypatch, headers, body)
    assert out["statusCode"] == status, out
    assert out["headers"]["Content-Type"] == JSON, out
    refused = json.loads(out["body"])
    assert set(refused) == {"error"} and refused["error"]["code"] == code, refused
    assert refused["error"]["message"].strip(), refused
    documented = api.contract()["paths"]["/api/v1/mcp"]["post"]["responses"]
    assert str(status) in documented


def test_a_json_rpc_error_answering_a_request_stays_the_protocols_own(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under the 2026-07-28 revision the SDK answers a request it refuses at a 4xx status with
    # a JSON-RPC error bearing the request's id; the official client reads that error.
    headers = {"content-type": JSON, "accept": ACCEPT, "mcp-protocol-version": "2026-07-28"}
    out = _post(rig, monkeypatch, headers, b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}')
    assert out["statusCode"] == 400, out
    answer = json.loads(out["body"])
    assert answer["id"] == 7 and isinstance(answer["error"]["code"], int), answer
    documented = api.contract()["paths"]["/api/v1/mcp"]["post"]["responses"]["400"]
    assert documented["content"][JSON]["schema"] == {"$ref": "#/components/schemas/McpRefusal"}


def test_a_notification_is_202_with_no_body(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    headers = {"content-type": JSON, "accept": ACCEPT}
    out = _post(rig, monkeypatch, headers, b'{"jsonrpc":"2.0","method":"notifications/x"}')
    assert out["statusCode"] == 202, out
    assert not out["body"], out
    assert "Content-Type" not in out.get("headers", {}) and "content-type" not in out.get(
        "headers", {}
    ), out


def test_an_operator_limited_to_spaces_is_refused_elsewhere_as_over_http(
    rpc: Any, rig: Rig
) -> None:
    lease = rig.running()
    scoped = Principal(kind="operator", token_id="tok-scoped", role="admin", spaces=("OTHER",))
    listed = tool(rpc, "leases_list", {"space_key": SPACE}, scoped)["result"]
    assert listed["structuredContent"]["error"]["code"] == "forbidden"
    got = tool(rpc, "leases_get", {"lease_id": lease.id}, scoped)["result"]
    assert got["structuredContent"]["error"]["code"] == "forbidden"


def test_a_cancel_over_mcp_reaches_the_workers_next_heartbeat_over_mcp(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    tool(rpc, "leases_cancel", {"lease_id": lease.id}, MEMBER)
    beat = tool(rpc, "lease_heartbeat", {}, as_lease(lease.id))["result"]["structuredContent"]
    assert beat["revoke"] == "cancel"
    late = tool(rpc, "lease_fetch_payload", {}, as_lease("lease_gone"))["result"]
    assert late["isError"] is True


def test_a_report_over_mcp_claims_nothing_and_refuses_a_claim_by_name(rpc: Any, rig: Rig) -> None:
    # Over HTTP `next` claims the worker's next lease and answers its token; MCP hands out no
    # lease token, so the tools neither offer `next` nor store it unread with the report.
    for name in ("lease_complete", "lease_fail"):
        assert "next" not in t.BY_NAME[name].input_schema()["properties"]
    lease = rig.running()
    me = as_lease(lease.id)
    claim = {"next": {"worker_id": "w-1", "claim_id": "c-1"}}
    for name, report in (("lease_complete", claim), ("lease_fail", {**claim, "error": "x"})):
        refused = tool(rpc, name, report, me)["result"]
        assert refused["isError"] is True, refused
        assert refused["structuredContent"]["error"]["code"] == "validation_failed"
        assert refused["content"][0]["text"].startswith("next: "), refused
    assert rig.lease(lease.id).state.value == "running"
    done = tool(rpc, "lease_complete", {"next": None}, me)["result"]["structuredContent"]
    assert done["lease"]["state"] == "completed"
    assert "next" not in (rig.lease(lease.id).report or {})


def test_a_report_over_mcp_renews_no_other_lease_and_refuses_heartbeat_by_name(
    rpc: Any, rig: Rig
) -> None:
    # Over HTTP a report sent with the worker token may carry the worker's heartbeat for its
    # other leases; an MCP report is a lease's own, so the tools neither offer nor take it.
    for name in ("lease_complete", "lease_fail"):
        assert "heartbeat" not in t.BY_NAME[name].input_schema()["properties"]
    lease, other = rig.running(), rig.running()
    me = as_lease(lease.id)
    deadline = rig.lease(other.id).deadline
    beat = {"heartbeat": [{"id": other.id, "fence": other.fence}]}
    for name, report in (("lease_complete", beat), ("lease_fail", {**beat, "error": "x"})):
        refused = tool(rpc, name, report, me)["result"]
        assert refused["isError"] is True, refused
        assert refused["structuredContent"]["error"]["code"] == "validation_failed"
        assert refused["content"][0]["text"].startswith("heartbeat: "), refused
    assert rig.lease(lease.id).state.value == "running"
    assert rig.lease(other.id).deadline == deadline


def test_a_header_outside_latin_1_is_answered_not_a_500(rig: Rig, monkeypatch: Any) -> None:
    """API Gateway hands headers over as text; one carrying a character HTTP's own header
    encoding cannot hold (a snowman in a client's note) must not crash the transport."""
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    headers = {
        "host": "unit",
        "content-type": "application/json",
        "accept": ACCEPT,
        "mcp-protocol-version": "2025-06-18",
        "x-client-note": "snow ☃ 雪",
    }
    event = to_event("POST", "/api/v1/mcp", headers, json.dumps(message).encode())
    principal = json.dumps(dataclasses.asdict(READER))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    out = api.handle(event, None)
    assert out["statusCode"] == 200, out.get("body")


def test_media_types_are_read_whatever_their_case(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    for content_type, accept in (
        ("APPLICATION/JSON", ACCEPT),
        ("Application/Json; charset=UTF-8", ACCEPT.upper()),
    ):
        headers = {"content-type": content_type, "accept": accept}
        got = _post(rig, monkeypatch, headers, PING)
        assert got["statusCode"] == 200, got


def test_an_unknown_tool_s_name_is_not_echoed_at_length(rpc: Any) -> None:
    # 600,000 line separators, under the body's bound: repr writes each as six characters
    # and JSON then escapes the backslash, so an echo would pass Lambda's 6 MB answer.
    name = "\u2028" * 600_000
    answer = tool(rpc, name, {}, READER)
    assert answer["error"]["code"] == -32602
    assert len(json.dumps(answer)) < 1000
