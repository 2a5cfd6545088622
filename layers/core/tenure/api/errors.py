"""The one table from domain errors to HTTP statuses, and the error envelope."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tenure.domain import errors

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response

# The media type of every answer in the envelope. Spelt here, not read from Powertools' event
# handler: the worker function answers without loading it (api/worker_dispatch.py).
JSON = "application/json"

STATUS: dict[type[errors.TenureError], int] = {
    errors.InvalidRequest: 400,
    errors.Unauthenticated: 401,
    errors.LeaseTokenMismatch: 403,
    errors.Forbidden: 403,
    errors.LeaseNotFound: 404,
    errors.TaskNotFound: 404,
    errors.NotFound: 404,
    errors.StaleLease: 409,
    errors.InvalidTransition: 409,
    errors.AlreadyExists: 409,
    errors.MissingScope: 422,
    errors.ValidationFailed: 422,
    errors.UnverifiedCreatedTasks: 422,
    errors.UnsupportedRuntime: 501,
    errors.Unavailable: 503,
}


def status_of(err: errors.TenureError) -> int:
    for cls in type(err).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


# A 401 names the scheme that would be accepted (RFC 7235 requires the header on every 401).
# A bearer token that was sent and refused (unknown, revoked, expired, its lease ended) is
# RFC 6750's `invalid_token`; a request that sent none is told the scheme alone.
CHALLENGE = 'Bearer realm="tenure"'
INVALID_TOKEN = f'{CHALLENGE}, error="invalid_token"'


def headers_of(err: errors.TenureError, token_sent: bool = True) -> dict[str, str]:
    """Headers an error answers with besides its body: when to come back after a 503, and
    the challenge of a 401."""
    if isinstance(err, errors.Unavailable):
        return {"Retry-After": str(max(1, int(err.retry_after)))}
    if isinstance(err, errors.Unauthenticated):
        return {"WWW-Authenticate": INVALID_TOKEN if token_sent else CHALLENGE}
    return {}


def envelope(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response[Any]:
    from aws_lambda_powertools.event_handler import Response  # the resolver's answers alone

    return Response(
        status_code=status,
        content_type=JSON,
        body=json.dumps({"error": {"code": code, "message": message}}),
        headers=headers or {},
    )


def error_response(err: errors.TenureError) -> Response[Any]:
    return envelope(status_of(err), err.code, err.message, headers_of(err))


def error_event(err: errors.TenureError, token_sent: bool = True) -> dict[str, Any]:
    """The same answer as `error_response`, for a refusal made before the resolver runs
    (`token_sent`: whether the request carried a bearer token, for a 401's challenge)."""
    return {
        "statusCode": status_of(err),
        "headers": {
            "Content-Type": JSON,
            **headers_of(err, token_sent),
        },
        "body": json.dumps({"error": {"code": err.code, "message": err.message}}),
        "isBase64Encoded": False,
    }


def refusal_event(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """A refusal that is not one of the domain's errors (an HTTP matter: a method, a media
    type), in the same envelope, as a Lambda result."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON, **(headers or {})},
        "body": json.dumps({"error": {"code": code, "message": message}}),
        "isBase64Encoded": False,
    }


def method_not_allowed(allow: str) -> dict[str, Any]:
    """405 for a method the path does not answer, with `Allow` naming the one it does."""
    message = f"this path answers {allow} only"
    return refusal_event(405, "method_not_allowed", message, {"Allow": allow})


# What the MCP transport's refusals of a request it could not read (no JSON-RPC id to answer)
# become: the HTTP status the SDK chose, with this code and message in the envelope. A status
# not listed keeps its status, as `invalid_request` (4xx) or `internal_error` (5xx).
MCP_REFUSALS: dict[int, tuple[str, str]] = {
    400: ("invalid_request", "the body is not a JSON-RPC message"),
    406: ("not_acceptable", "the answer is JSON: Accept must admit application/json"),
    413: ("payload_too_large", "the body is larger than the MCP transport reads"),
    415: ("unsupported_media_type", "a JSON-RPC message: Content-Type must be application/json"),
    500: ("internal_error", "the MCP exchange failed; the request may be retried"),
}


# Whole-body failures that mean "this is not a JSON object", not "this object breaks the schema".
_NOT_AN_OBJECT = {"missing", "model_attributes_type", "model_type", "dict_type"}


# Parts of an error's location that name no field: where it was, and the tags of a body that
# takes one of several shapes (POST /events: a rule event or an event blocks wait for; POST
# /tasks/{id}/blocks: a typed block or an event block).
_NOT_FIELDS = ("body", "query", "path", "rule_event", "signal", "typed_block", "event_block")


def describe_validation(problems: list[dict[str, Any]]) -> errors.TenureError:
    """Turn the resolver's validation errors into invalid_request, missing_scope or
    validation_failed."""
    for err in problems:
        if err.get("type") == "missing" and tuple(err.get("loc", ())) == ("query", "space"):
            return errors.MissingScope("space is required: list one space at a time")
        loc = tuple(err.get("loc", ()))
        if err.get("type") in ("json_invalid", "unsupported_content_type"):
            return errors.InvalidRequest("the body is not valid JSON")
        if loc == ("body",) and err.get("type") in _NOT_AN_OBJECT:
            return errors.InvalidRequest("the body must be a JSON object")
    parts = []
    for err in problems:
        parts_of_loc = [str(p) for p in err.get("loc", ()) if p not in _NOT_FIELDS]
        where = ".".join(parts_of_loc) or "body"
        msg = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = "is not a known field"
        # A whole-object rule's message already names its fields.
        parts.append(msg if where == "body" else f"{where}: {msg}")
    return errors.ValidationFailed("; ".join(parts))
