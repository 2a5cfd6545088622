"""The worker endpoint: the worker routes alone, on a Lambda function URL with no authorizer
in front. The bearer is checked here by the authorizer's own check (api/tokens.py), each
verdict kept as long as API Gateway keeps the authorizer's; then the request goes through the
worker function's own dispatch (api/worker_dispatch.py): the HTTP API's checks, the routes'
own models and the same route functions, without Powertools' HTTP resolver. Not the
operators' routes, the board or MCP either. The routes
run on the worker's use cases composed alone (wiring.worker_service), never the whole
service: the operators', the rules', the scheduler's and the sweeper's modules stay unloaded."""

from __future__ import annotations

from typing import Any

from tenure import wiring
from tenure.api import worker_dispatch
from tenure.api.errors import error_event
from tenure.api.gate import logger, metrics
from tenure.api.routes import BASE, WORKER_ROUTES, match
from tenure.api.tokens import Verdicts, principal_of
from tenure.app.catalog import one_request
from tenure.app.worker_tenure import WorkerTenure
from tenure.config import settings
from tenure.domain import errors
from tenure.domain.model import Principal


def core() -> WorkerTenure:
    """The use cases this function serves its routes with, built on the first request."""
    return wiring.worker_service()


def _principal_of(raw: str | None) -> Principal:
    return principal_of(raw, core)


VERDICTS = Verdicts(check=_principal_of, wall=lambda: core().clock.now_ms())
__all__ = ["handle", "handle_claim", "logger", "metrics"]

# The one route the claim function serves: the claims that may long-poll.
CLAIM_ROUTE = ("POST", f"{BASE}/pools/<pool>/claim")
# On the worker function's claim answers: where claims that wait should go instead (the claim
# function's URL), so a client's idle long polls never hold the worker function, which its
# heartbeats and reports need.
CLAIM_API_HEADER = "Tenure-Claim-Api"


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one function URL event (the HTTP API's payload 2.0 shape). Any route but a
    worker route is 404 `not_found` before the token is looked at: operators, MCP and the
    board are on the HTTP API."""
    http = event.get("requestContext", {}).get("http", {})
    route = match(str(http.get("method")), str(event.get("rawPath")))
    if route is None or (route.method, route.rule) not in WORKER_ROUTES:
        return error_event(errors.NotFound("no such route on the worker endpoint"))
    answer = _checked(event, context)
    claim_url = settings().claim_url
    if claim_url and (route.method, route.rule) == CLAIM_ROUTE:
        answer["headers"] = {**(answer.get("headers") or {}), CLAIM_API_HEADER: claim_url}
    return answer


def handle_claim(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The claim function: the claim route alone, on its own concurrency, so that long polls
    hold none of the worker function's (heartbeats, reports) nor the API function's
    (operators). From its own function URL it checks the bearer as the worker function does;
    from the HTTP API's claim route the authorizer in front has decided, and its context goes
    to the route as it goes to the API function's (a function URL's event always has the
    route `$default` and never an authorizer's context; the HTTP API's names its route)."""
    http = event.get("requestContext", {}).get("http", {})
    route = match(str(http.get("method")), str(event.get("rawPath")))
    if route is None or (route.method, route.rule) != CLAIM_ROUTE:
        return error_event(errors.NotFound("no such route on the claim endpoint"))
    if event.get("routeKey", "$default") != "$default":
        return worker_dispatch.handle(event, core)
    return _checked(event, context)


def _checked(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The bearer checked here (no authorizer in front), then the route, in one request's
    scope: a lease token's lease row, read consistently by the check, is the row the route
    starts from instead of a second read (OwnLeases.own_lease)."""
    with one_request():
        try:
            # The principal itself, not its JSON: the dispatch reads it without a parse.
            ctx: dict[str, Any] = {"principal": VERDICTS.principal(event.get("headers"))}
        except errors.Unauthenticated as refused:
            ctx = {"principal": "", "reason": refused.message}
        except errors.Unavailable as busy:
            # As the authorizer passes it on: the dispatch reads the token once more itself.
            ctx = {"principal": "", "reason": busy.message, "unavailable": "true"}
        # Always replaced: the function URL sends no authorizer context of its own.
        event.setdefault("requestContext", {})["authorizer"] = {"lambda": ctx}
        return worker_dispatch.handle(event, core)
