"""The error codes a client may meet: the API's table (and the refused completion's), the ones
the MCP endpoint gives a request its transport cannot read, and the local front door's own
where API Gateway or Lambda would answer instead."""

from __future__ import annotations

DOCUMENTED = frozenset(
    {
        "invalid_request",
        "unauthenticated",
        "lease_token_mismatch",
        "forbidden",
        "lease_not_found",
        "task_not_found",
        "not_found",
        "stale_lease",
        "invalid_transition",
        "already_exists",
        "missing_scope",
        "validation_failed",
        "unverified_created_tasks",
        "unsupported_runtime",
        "unavailable",
        "internal_error",
        # POST /api/v1/mcp: an Accept without JSON, a Content-Type other than JSON.
        "not_acceptable",
        "unsupported_media_type",
        # The front door: a method it does not serve, a request over API Gateway's or
        # Lambda's payload limit.
        "method_not_allowed",
        "payload_too_large",
    }
)
