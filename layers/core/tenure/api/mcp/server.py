"""The MCP server for one request: the official SDK's low-level server over its streamable
HTTP transport (stateless, JSON responses), driven in-process by bridge.py.

Imported only when /api/v1/mcp is called, so the SDK (pydantic models, starlette, anyio) costs
nothing at the cold start of any other route.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from tenure.api.errors import MCP_REFUSALS, refusal_event
from tenure.api.mcp import bridge, tools
from tenure.app.tenure import Tenure
from tenure.domain import authz, errors
from tenure.domain.model import Principal

NAME = "tenure"
# What a client's model reads on initialize: one line per kind of token, each naming every
# tool that token is offered (a unit test holds them to the tool table).
INSTRUCTIONS = "\n".join(
    (
        "Tenure hands out work as fenced, time-limited leases. The bearer token decides the "
        "tools; what the service refuses is a tool error whose structuredContent.error.code "
        "says why.",
        "Operator token (tnr_o_): leases_list, leases_get, leases_fetch_logs, "
        "leases_list_attachments and task_inspect in its spaces; with role member or admin "
        "also leases_cancel, task_cancel, task_recover, task_approve and events_send.",
        "Lease token (tnr_l_, one claimed lease): lease_fetch_payload, lease_heartbeat, then "
        "lease_complete, lease_fail or lease_release; task_block (kind event waits for an "
        "event) and task_unblock on its task; events_send, leases_list, leases_get, "
        "leases_fetch_logs and leases_list_attachments in its space.",
        "Worker token (tnr_w_, its pools; no lease token needed): task_run_claim_next, or "
        "task_run_claim for one queued run, answers a run_id; then task_run_heartbeat, "
        "task_run_payload, and task_run_complete, task_run_fail, task_run_release or "
        "task_run_block, each with that run_id and the same worker_id.",
    )
)
UNKNOWN_LEASE = "unknown lease id"
# The SDK notes each manager's start and stop at INFO: with one manager per request that is
# two lines of noise per call. Its warnings and errors (a crashed exchange) still show.
logging.getLogger("mcp").setLevel(logging.WARNING)


def answer(event: dict[str, Any], svc: Tenure, actor: Principal) -> dict[str, Any]:
    """Serve one MCP POST from an API Gateway event for `actor`; a Lambda proxy result.
    What the transport refuses before it has a request to answer is this API's refusal, in
    its envelope; a JSON-RPC error answering a request stays the protocol's own."""
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    # The transport's own test, made first: it answers a plain-text 400 otherwise.
    if not headers.get("content-type", "").lower().startswith("application/json"):
        return _refused(415)
    event = bridge.media_types_in_lower_case(event)
    server = build(svc, actor)
    # A fresh manager per request: it runs once, and a stateless exchange keeps nothing.
    # No DNS-rebinding check: callers come through API Gateway with a bearer token.
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async with manager.run():
            await manager.handle_request(scope, receive, send)

    return quoted_briefly(enveloped(bridge.run(app, event)))


def quoted_briefly(result: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error answer with what it quotes of the request shortened and any token
    masked: the SDK's "Method not found" carries the whole method name as its `data`, and
    a refusal's message may name a field the caller sent."""
    body = result.get("body")
    if not isinstance(body, str) or result.get("isBase64Encoded"):
        return result
    # A result answer (whose leases carry an `error` field of their own) is left unread: its
    # "result" key comes before anything in it.
    at_error, at_result = body.find('"error"'), body.find('"result"')
    if at_error < 0 or 0 <= at_result < at_error:
        return result
    try:
        message = json.loads(body)
    except ValueError:
        return result
    error = message.get("error") if isinstance(message, dict) else None
    if not isinstance(error, dict):
        return result
    for field in ("message", "data"):
        if isinstance(error.get(field), str):
            error[field] = tools.shown(error[field], 64 if field == "data" else 500)
    return {**result, "body": json.dumps(message)}


def enveloped(result: dict[str, Any]) -> dict[str, Any]:
    """The transport's answer, unless it refused a request it could not read: that becomes
    the envelope, at the status the transport chose (a parse error is a body that is not JSON)."""
    status = int(result.get("statusCode", 200))
    if status < 400:
        return result
    try:
        message = json.loads(result.get("body") or "null")
    except ValueError:
        message = None
    if not isinstance(message, dict):
        return _refused(status)
    error = message.get("error")
    if message.get("id") is not None and isinstance(error, dict):
        return result  # answers the request with that id: the protocol's, read by the client
    if isinstance(error, dict) and error.get("code") == mcp_types.PARSE_ERROR:
        return refusal_event(400, "invalid_request", "the body is not valid JSON")
    return _refused(status)


def _refused(status: int) -> dict[str, Any]:
    code, message = MCP_REFUSALS.get(
        status,
        ("invalid_request", "the request was refused")
        if status < 500
        else ("internal_error", "the MCP exchange failed"),
    )
    return refusal_event(status, code, message)


def build(svc: Tenure, actor: Principal) -> Server[Any]:
    async def list_tools(
        _ctx: Any, _params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=[describe(tool) for tool in tools.offered(actor)])

    async def call_tool(
        _ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        return call(svc, actor, params.name, params.arguments)

    return Server(
        NAME,
        version="1",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def describe(tool: tools.Tool) -> mcp_types.Tool:
    return mcp_types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema(),
        annotations=mcp_types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=not tool.read_only,
            idempotent_hint=tool.read_only or tool.name == "leases_cancel",
            open_world_hint=False,
        ),
    )


def call(
    svc: Tenure, actor: Principal, name: str, arguments: dict[str, Any] | None
) -> mcp_types.CallToolResult:
    """Run one tool. Refusals of the request itself (an unknown tool, a token in the input,
    logs of a pool that keeps none) are JSON-RPC invalid-params errors; what the service
    refuses about the lease is a tool error the agent reads, in the HTTP API's codes."""
    tool = tools.BY_NAME.get(name)
    if tool is None:
        # Named at most in part and never with a token: an echo of any length (repr then
        # JSON lengthen it up to sixfold) could pass the 6 MB a Lambda answer may carry.
        raise MCPError(mcp_types.INVALID_PARAMS, f"unknown tool {tools.shown(name, 64)!r}")
    try:
        tools.refuse_tokens(arguments or {})
    except tools.TokenInInput as refused:
        raise MCPError(mcp_types.INVALID_PARAMS, refused.message) from None
    try:
        if not tool.offered_to(actor):
            tool.refuse(actor)
        if actor.kind == "lease":
            authz.require_lease_power(actor.lease_ended_at, svc.clock.now_ms(), tool.use)
        for named in tools.ids_named(arguments):
            authz.require_id_in_spaces(actor, named)  # another space's, by its form
        result = tool.run(svc, actor, tools.parse(tool, arguments))
    except errors.UnsupportedRuntime as none_kept:
        raise MCPError(mcp_types.INVALID_PARAMS, none_kept.message) from None
    except errors.LeaseNotFound:
        return failure("lease_not_found", UNKNOWN_LEASE)
    except errors.TenureError as refused:
        return failure(refused.code, refused.message)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=tools.redact(result))],
        structured_content=json.loads(tools.redact(result)),
    )


def failure(code: str, message: str) -> mcp_types.CallToolResult:
    message = tools.shown(message)  # a refusal may quote a field the caller named
    body = {"error": {"code": code, "message": message}}
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=message)],
        structured_content=body,
        is_error=True,
    )
