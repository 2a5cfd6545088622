"""The worker endpoint: the worker routes alone, on a Lambda function URL with no authorizer
in front. The bearer is checked here by the authorizer's own check (api/tokens.py), each
verdict kept as long as API Gateway keeps the authorizer's; then the request goes the HTTP
API's way (api/dispatch.py), through the same route functions. Only the two route modules the
worker routes live in are imported: not the operators' routes, the board or MCP."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tenure.api import dispatch
from tenure.api.endpoints import artifacts, workers
from tenure.api.errors import error_event
from tenure.api.routes import WORKER_ROUTES, match
from tenure.api.surface import logger, metrics
from tenure.api.tokens import Verdicts
from tenure.domain import errors as e

# The route modules register themselves on import; named here so the registration is explicit.
ENDPOINTS = (workers, artifacts)
VERDICTS = Verdicts()
__all__ = ["handle", "logger", "metrics"]


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one function URL event (the HTTP API's payload 2.0 shape). Any route but a
    worker route is 404 `not_found` before the token is looked at: operators, MCP and the
    board are on the HTTP API."""
    http = event.get("requestContext", {}).get("http", {})
    route = match(str(http.get("method")), str(event.get("rawPath")))
    if route is None or (route.method, route.rule) not in WORKER_ROUTES:
        return error_event(e.NotFound("no such route on the worker endpoint"))
    try:
        actor = VERDICTS.principal(event.get("headers"))
        ctx = {"principal": json.dumps(dataclasses.asdict(actor))}
    except e.Unauthenticated as refused:
        ctx = {"principal": "", "reason": refused.message}
    except e.Unavailable as busy:
        # As the authorizer passes it on: the dispatch reads the token once more itself.
        ctx = {"principal": "", "reason": busy.message, "unavailable": "true"}
    # Always replaced: the function URL sends no authorizer context of its own.
    event.setdefault("requestContext", {})["authorizer"] = {"lambda": ctx}
    return dispatch.handle(event, context)
