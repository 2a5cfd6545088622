"""The MCP endpoint through the real Lambda entry points on moto: the authorizer admits the
token, and functions/api answers an API Gateway v2 event for POST /api/v1/mcp with the SDK's
JSON-RPC."""

from __future__ import annotations

import json
from typing import Any

from tenure_cli.local.frontdoor import to_event
from tenure_cli.local.lambda_host import _Context

from tests.aws.test_function_handlers import ADMIN_TOKEN, authorizer_event, load, service

__all__ = ["service"]  # the moto-backed service fixture, shared with the handler tests


def mcp_event(message: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "Host": "abc123.execute-api.us-east-1.amazonaws.com",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {ADMIN_TOKEN}",
    }
    event = to_event("POST", "/api/v1/mcp", headers, json.dumps(message).encode())
    event["requestContext"]["authorizer"] = {"lambda": context}
    return event


def test_the_api_function_answers_mcp_for_the_token_the_authorizer_admitted(
    service: None,
) -> None:
    admitted = load("authorizer").handler(authorizer_event(f"Bearer {ADMIN_TOKEN}"), _Context())
    assert admitted["isAuthorized"] is True
    api = load("api").handler
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    answer = api(mcp_event(listing, admitted["context"]), _Context())
    assert answer["statusCode"] == 200, answer
    body = json.loads(answer["body"])
    assert body["id"] == 7
    assert "leases_cancel" in {tool["name"] for tool in body["result"]["tools"]}
    call = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tools/call",
        "params": {"name": "leases_get", "arguments": {"lease_id": "lease_nope"}},
    }
    answer = api(mcp_event(call, admitted["context"]), _Context())
    result = json.loads(answer["body"])["result"]
    assert result["isError"] is True and result["content"][0]["text"] == "unknown lease id"
