"""`POST /api/v1/mcp`: the Model Context Protocol, answered by the SDK's streamable
HTTP transport in api/mcp/. The route is documented here; its body and most of its answers
are JSON-RPC, the protocol's own, not this API's error envelope."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from tenure.api import models as m
from tenure.api.routes import MCP_PATH
from tenure.api.surface import BEARER, actor, app, svc

_JSONRPC: dict[str, Any] = {"application/json": {"schema": {"type": "object"}}}
_ENVELOPE: dict[str, Any] = {"application/json": {"model": m.ErrorEnvelope}}
ANSWERS: dict[int, OpenAPIResponse] = {
    200: {"description": "the JSON-RPC response (a result or an error)", "content": _JSONRPC},
    202: {"description": "a notification or response accepted; no body"},
    400: {
        "description": "a body that is not a JSON-RPC message (a JSON-RPC error), or a "
        "Content-Type other than application/json (a plain-text reason)",
        "content": {**_JSONRPC, "text/plain": {"schema": {"type": "string"}}},
    },
    401: {
        "description": "unauthenticated: no bearer token, or an unknown one",
        "content": _ENVELOPE,
    },
    406: {
        "description": "Accept does not admit application/json (JSON-RPC error)",
        "content": _JSONRPC,
    },
}


@app.route(
    MCP_PATH,
    "POST",
    responses=ANSWERS,
    description="Who may call it: an operator token (read and up), a lease token, or a "
    "worker token (its runs are worked by id, bound to the token). "
    "Streamable HTTP, stateless, JSON responses; the token decides the tools offered.",
    security=BEARER,
)
def mcp() -> Response[Any]:
    from tenure.api.mcp import server  # the SDK loads on the first MCP request only

    answer = server.answer(app.current_event.raw_event, svc(), actor())
    headers = dict(answer.get("headers") or {})
    content_type = headers.pop("content-type", None)
    return Response(
        status_code=answer["statusCode"],
        content_type=content_type,
        body=answer.get("body") or None,
        headers=headers,
    )
