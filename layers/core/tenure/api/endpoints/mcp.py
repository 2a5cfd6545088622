"""`POST /api/v1/mcp`: the Model Context Protocol, answered by the SDK's streamable HTTP transport
in api/mcp/. Its body and its answers are JSON-RPC, the protocol's own; a request refused
before it could be read is refused in this API's error envelope, as every other route's."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseHeader,
)

from tenure.api import models
from tenure.api.mcp import wire
from tenure.api.routes import MCP_PATH
from tenure.api.surface import BEARER, UNREAD_BODIES, WWW_AUTHENTICATE, actor, app, svc


def _envelope(description: str) -> OpenAPIResponse:
    return {
        "description": description,
        "content": {"application/json": {"model": models.ErrorEnvelope}},
    }


RETRY_AFTER: OpenAPIResponseHeader = {
    "description": "seconds to wait",
    "schema": {"type": "integer"},
}
ANSWERS: dict[int, OpenAPIResponse] = {
    200: {
        "description": "the JSON-RPC answer to the request: a result, or a JSON-RPC error",
        "content": {"application/json": {"model": wire.JsonRpcAnswer}},
    },
    202: {"description": "a notification (or a response) accepted; no body", "content": {}},
    400: {
        "description": "invalid_request: the body is not JSON, or not a JSON-RPC message. Under "
        "the protocol's 2026-07-28 revision (an MCP-Protocol-Version header naming it), a "
        "JSON-RPC error answering the request instead, as that revision requires",
        "content": {"application/json": {"model": wire.McpRefusal}},
    },
    401: {
        **_envelope("unauthenticated: no bearer token, or an unknown one"),
        "headers": {"WWW-Authenticate": WWW_AUTHENTICATE},
    },
    404: {
        "description": "under the protocol's 2026-07-28 revision only: a JSON-RPC error, "
        "method not found, answering the request",
        "content": {"application/json": {"model": wire.JsonRpcError}},
    },
    406: _envelope("not_acceptable: Accept does not admit application/json"),
    413: _envelope("payload_too_large: a body larger than the transport reads (4 MiB)"),
    415: _envelope("unsupported_media_type: a Content-Type other than application/json"),
    500: _envelope("internal_error: the service failed; the request may be retried"),
    503: {
        **_envelope(
            "unavailable: the token could not be read (the table throttled past the bounded "
            "retries); see Retry-After"
        ),
        "headers": {"Retry-After": RETRY_AFTER},
    },
}
UNREAD_BODIES[("POST", MCP_PATH)] = wire.JsonRpcRequest


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
    content_type = headers.pop("content-type", None) or headers.pop("Content-Type", None)
    body = answer.get("body") or ""
    return Response(
        status_code=answer["statusCode"],
        content_type=content_type if body else None,  # a 202 carries nothing, not `null`
        body=body,
        headers=headers,
    )
