"""HTTP API entry (API Gateway HTTP API, payload 2.0): check who may call the route, then let
the resolver run it. The routes live in api/endpoints/, one module per resource."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

from tenure.api.bearer import bearer
from tenure.api.endpoints import (
    artifacts,
    blocks,
    board,
    graph,
    leases,
    mcp,
    pools,
    rules,
    scheduler,
    setup,
    tasks,
    workers,
)
from tenure.api.errors import error_event
from tenure.api.routes import MCP_PATH, REPORTS, match
from tenure.api.surface import (
    app,
    authorize,
    contract,
    known_query,
    logger,
    metrics,
    principal,
    record_metrics,
    svc,
)
from tenure.core import errors as e

# The route modules register themselves on import; named here so the registration is explicit.
ENDPOINTS = (
    setup,
    tasks,
    leases,
    workers,
    rules,
    artifacts,
    pools,
    graph,
    scheduler,
    mcp,
    board,
    blocks,
)
__all__ = ["app", "contract", "handle", "logger", "metrics"]


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway event. Every body is read as JSON, whatever its content type
    says (`curl -d` sends form encoding), so a non-JSON body meets `invalid_request`."""
    http = event.get("requestContext", {}).get("http", {})
    route = match(str(http.get("method")), str(event.get("rawPath")))
    if route is None or route.audience != "public":
        ctx = (event["requestContext"].get("authorizer") or {}).get("lambda") or {}
        try:
            # Who may call the route is decided before its body or query is looked at, so
            # a caller that may not use it learns nothing about its schema (DESIGN §5).
            actor = principal(ctx, bearer(event.get("headers")))
            if not ctx.get("principal"):
                # Read here because the authorizer could not: kept for the route's actor().
                ctx["principal"] = json.dumps(dataclasses.asdict(actor))
            if route is not None:
                authorize(actor, route.audience, route.params)
        except e.TenureError as refusal:
            return error_event(refusal)
    if route is not None and route.rule == MCP_PATH:
        return _resolved(event, context)  # JSON-RPC: the MCP transport reads its own body
    headers = event.setdefault("headers", {}) or {}
    event["headers"] = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    event["headers"]["content-type"] = "application/json"
    if route is not None and (route.method, route.rule) in REPORTS and not event.get("body"):
        event["body"], event["isBase64Encoded"] = "{}", False
    refused = _not_an_object(event)
    if refused is not None:
        return refused
    known = None if route is None else known_query(route.method, route.rule)
    if known is not None:
        unknown = set(event.get("queryStringParameters") or {}) - known
        if unknown:
            named = "; ".join(f"{name}: is not a known query parameter" for name in sorted(unknown))
            return error_event(e.ValidationFailed(named))
    if route is None or route.audience == "public":
        return app.resolve(event, context)  # builds no service (a cold /health stays cheap)
    return _resolved(event, context)


def _resolved(event: dict[str, Any], context: Any) -> dict[str, Any]:
    before = dict(svc().counters)
    answer = app.resolve(event, context)
    record_metrics(before)
    return answer


def _not_an_object(event: dict[str, Any]) -> dict[str, Any] | None:
    """400 for a body that is not one JSON object. Checked here because the resolver reads a
    JSON array of objects as its first element, which would act on half a request."""
    raw = event.get("body")
    if not raw:
        return None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw).decode()
        except (ValueError, UnicodeDecodeError):
            return _invalid_request("the body is not valid JSON")
    try:
        parsed = json.loads(raw)
    except ValueError:
        return _invalid_request("the body is not valid JSON")
    except RecursionError:  # the parser recurses per level: 10,000 `[` crashed the function
        return _invalid_request("the body nests too deeply to be read")
    if not isinstance(parsed, dict):
        return _invalid_request("the body must be a JSON object")
    return None


def _invalid_request(message: str) -> dict[str, Any]:
    return error_event(e.InvalidRequest(message))
