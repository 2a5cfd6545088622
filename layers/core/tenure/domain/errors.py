"""Domain errors, each with the stable code the HTTP contract names."""

from __future__ import annotations

from typing import Any


class TenureError(Exception):
    """Base of every domain error; `code` is stable, `message` is for people."""

    code = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class InvalidRequest(TenureError):
    code = "invalid_request"


class ValidationFailed(TenureError):
    code = "validation_failed"


class MissingScope(TenureError):
    code = "missing_scope"


class Unauthenticated(TenureError):
    code = "unauthenticated"


class Forbidden(TenureError):
    code = "forbidden"


class LeaseTokenMismatch(TenureError):
    code = "lease_token_mismatch"


class NotFound(TenureError):
    code = "not_found"


class LeaseNotFound(NotFound):
    code = "lease_not_found"


class TaskNotFound(NotFound):
    code = "task_not_found"


class StaleLease(TenureError):
    code = "stale_lease"


class UnverifiedCreatedTasks(TenureError):
    """A completion named tasks that do not exist, sit in another space, or were not filed
    with this lease's token: refused (422), the lease intact for a corrected report."""

    code = "unverified_created_tasks"


class InvalidTransition(TenureError):
    code = "invalid_transition"


class AlreadyExists(TenureError):
    code = "already_exists"


class UnsupportedRuntime(TenureError):
    code = "unsupported_runtime"


class Unavailable(TenureError):
    """The table kept throttling past the bounded retries: come back after `retry_after` s."""

    code = "unavailable"

    def __init__(self, message: str, retry_after: int = 1, **details: Any) -> None:
        super().__init__(message, **details)
        self.retry_after = retry_after


class Conflict(TenureError):
    """A conditional write lost: the row was not in the state the write expected.

    Internal to the service (never reaches a client as such): the service re-reads and decides
    whether the loser gets `stale_lease`, `invalid_transition`, or tries another candidate.
    """

    code = "conflict"


class CeilingReached(Conflict):
    """A claim's write lost only because a pool's or space's ceiling is full (not a race)."""

    code = "ceiling_reached"
