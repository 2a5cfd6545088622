"""The one table from domain errors to HTTP statuses, and the error envelope."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from tenure.domain import errors as e

STATUS: dict[type[e.TenureError], int] = {
    e.InvalidRequest: 400,
    e.Unauthenticated: 401,
    e.LeaseTokenMismatch: 403,
    e.Forbidden: 403,
    e.LeaseNotFound: 404,
    e.TaskNotFound: 404,
    e.NotFound: 404,
    e.StaleLease: 409,
    e.InvalidTransition: 409,
    e.AlreadyExists: 409,
    e.MissingScope: 422,
    e.ValidationFailed: 422,
    e.UnverifiedCreatedTasks: 422,
    e.UnsupportedRuntime: 501,
    e.Unavailable: 503,
}


def status_of(err: e.TenureError) -> int:
    for cls in type(err).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


# A 401 names the scheme that would be accepted (RFC 7235 requires the header on every 401).
# A bearer token that was sent and refused (unknown, revoked, expired, its lease ended) is
# RFC 6750's `invalid_token`; a request that sent none is told the scheme alone.
CHALLENGE = 'Bearer realm="tenure"'
INVALID_TOKEN = f'{CHALLENGE}, error="invalid_token"'


def headers_of(err: e.TenureError, token_sent: bool = True) -> dict[str, str]:
    """Headers an error answers with besides its body: when to come back after a 503, and
    the challenge of a 401."""
    if isinstance(err, e.Unavailable):
        return {"Retry-After": str(max(1, int(err.retry_after)))}
    if isinstance(err, e.Unauthenticated):
        return {"WWW-Authenticate": INVALID_TOKEN if token_sent else CHALLENGE}
    return {}


def envelope(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps({"error": {"code": code, "message": message}}),
        headers=headers or {},
    )


def error_response(err: e.TenureError) -> Response[Any]:
    return envelope(status_of(err), err.code, err.message, headers_of(err))


def error_event(err: e.TenureError, token_sent: bool = True) -> dict[str, Any]:
    """The same answer as `error_response`, for a refusal made before the resolver runs
    (`token_sent`: whether the request carried a bearer token, for a 401's challenge)."""
    return {
        "statusCode": status_of(err),
        "headers": {
            "Content-Type": content_types.APPLICATION_JSON,
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
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **(headers or {})},
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


def describe_validation(errors: list[dict[str, Any]]) -> e.TenureError:
    """Turn the resolver's validation errors into invalid_request, missing_scope or
    validation_failed."""
    for err in errors:
        if err.get("type") == "missing" and tuple(err.get("loc", ())) == ("query", "space"):
            return e.MissingScope("space is required: list one space at a time")
        loc = tuple(err.get("loc", ()))
        if err.get("type") in ("json_invalid", "unsupported_content_type"):
            return e.InvalidRequest("the body is not valid JSON")
        if loc == ("body",) and err.get("type") in _NOT_AN_OBJECT:
            return e.InvalidRequest("the body must be a JSON object")
    parts = []
    for err in errors:
        parts_of_loc = [str(p) for p in err.get("loc", ()) if p not in _NOT_FIELDS]
        where = ".".join(parts_of_loc) or "body"
        msg = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = "is not a known field"
        # A whole-object rule's message already names its fields.
        parts.append(msg if where == "body" else f"{where}: {msg}")
    return e.ValidationFailed("; ".join(parts))
