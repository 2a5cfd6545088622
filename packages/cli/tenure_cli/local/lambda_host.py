"""Runs the deployed handlers the way Lambda does: one invocation at a time per process."""

from __future__ import annotations

from typing import Any

from tenure.api.errors import refusal_event
from tenure.api.routes import PUBLIC_ROUTES

# What the fork server imports once for every worker process it forks, for every listener
# (the API, the worker function URL, the claim function URL): it is one server, started by
# the first of them.
PRELOAD = (
    "tenure_cli.local.lambda_host",
    "tenure.api.app",
    "tenure.api.authorizer",
    "tenure.api.worker",
)


class _Context:
    function_name = "tenure-api-local"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:tenure-api-local"
    memory_limit_in_mb = 512
    aws_request_id = "local"
    log_group_name = "/aws/lambda/tenure-api-local"
    log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def invoke(event: dict[str, Any]) -> dict[str, Any]:
    """The authorizer, then the API function, with the authorizer's context in between."""
    from tenure.api.app import handle

    refused = _authorized(event)
    if refused is not None:
        return refused
    ctx = _Context()
    ctx.aws_request_id = event["requestContext"]["requestId"]
    return handle(event, ctx)


def invoke_claim_route(event: dict[str, Any]) -> dict[str, Any]:
    """The HTTP API's claim route: the authorizer, then the claim function with its context
    (as infra/template.yaml routes it), so the API listener's claims wait on the claim
    function's processes, not the API function's."""
    from tenure.api.worker import handle_claim

    refused = _authorized(event)
    if refused is not None:
        return refused
    ctx = _Context()
    ctx.function_name = "tenure-claim-local"
    ctx.aws_request_id = event["requestContext"]["requestId"]
    return handle_claim(event, ctx)


def _authorized(event: dict[str, Any]) -> dict[str, Any] | None:
    """The authorizer's context put on the event, or the refusal API Gateway answers."""
    from tenure.api.authorizer import authorize

    http = event["requestContext"]["http"]
    if (http["method"], event["rawPath"]) in PUBLIC_ROUTES:
        return None
    verdict = authorize(event)
    if not verdict.get("isAuthorized"):
        # API Gateway's own answer has a body of its own; the authorizer admits every
        # request (the API refuses in the envelope), so here too it is the envelope.
        return refusal_event(403, "forbidden", "the authorizer refused the request")
    event["requestContext"]["authorizer"] = {"lambda": verdict.get("context", {})}
    return None


def invoke_worker(event: dict[str, Any]) -> dict[str, Any]:
    """The worker function, as its function URL calls it: no authorizer in front (it checks
    the bearer itself), and the event a function URL sends, which has no route of its own."""
    from tenure.api.worker import handle

    ctx = _as_function_url(event, "tenure-worker-local")
    return handle(event, ctx)


def invoke_claim(event: dict[str, Any]) -> dict[str, Any]:
    """The claim function, as its own function URL calls it (it checks the bearer itself)."""
    from tenure.api.worker import handle_claim

    ctx = _as_function_url(event, "tenure-claim-local")
    return handle_claim(event, ctx)


def _as_function_url(event: dict[str, Any], function_name: str) -> _Context:
    """The event a function URL sends, which has no route of its own nor an authorizer's
    context, and the function's context."""
    event["routeKey"] = event["requestContext"]["routeKey"] = "$default"
    event.pop("pathParameters", None)
    event["requestContext"].pop("authorizer", None)
    ctx = _Context()
    ctx.function_name = function_name
    ctx.aws_request_id = event["requestContext"]["requestId"]
    return ctx


def warm() -> bool:
    """Import the handlers ahead of the first request (a cold start paid at boot)."""
    import tenure.api.app
    import tenure.api.authorizer  # noqa: F401

    return True


def warm_worker() -> bool:
    """Import the worker function's handler ahead of its first request."""
    import tenure.api.worker  # noqa: F401

    return True
