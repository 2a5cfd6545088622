"""How a DynamoDB call ends: one table from error codes to domain errors, and bounded retries.

Retries live here and only here. The client is built with botocore's retries off
(`wiring.dynamodb_client`: standard mode, total_max_attempts=1), so the two bounds do not
multiply: a call is sent at most `TRIES` times, sleeping full-jitter exponential backoff
between tries (at most 0.1 + 0.2 + 0.4 = 0.7 s in all), then a throttle surfaces as
`Unavailable` (503 with Retry-After). A lost condition is never retried here: the service
re-reads and decides. Connection failures take the same bound, but only where sending again
is safe: a request that never reached DynamoDB (could not connect), or a read. A write whose
answer was lost mid-flight (connection closed, read timeout) may have landed, so it is not
sent twice blind: it raises.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError

# Named apart from the builtin ConnectionError, which this module also meets.
from botocore.exceptions import ConnectionError as NeverSent

from tenure.domain.errors import TenureError, Unavailable


class Outcome(Enum):
    LOST = "lost"  # a condition did not hold, or another transaction held the item
    THROTTLED = "throttled"  # nothing was written; the same request may be sent again
    INVALID = "invalid"  # the request itself is wrong: a bug, never retried, never a Conflict


# ClientError codes, and TransactionCanceledException reason codes, to what they mean
# (STYLE 5: one table, never message text). A code not here stays the ClientError it is.
OUTCOMES: dict[str, Outcome] = {
    # whole-call error codes
    "ConditionalCheckFailedException": Outcome.LOST,
    "TransactionConflictException": Outcome.LOST,
    "ProvisionedThroughputExceededException": Outcome.THROTTLED,
    "ThrottlingException": Outcome.THROTTLED,
    "RequestLimitExceeded": Outcome.THROTTLED,
    "InternalServerError": Outcome.THROTTLED,  # transient on DynamoDB's side; nothing landed
    "ValidationException": Outcome.INVALID,
    # a cancelled transaction's per-item reasons
    "ConditionalCheckFailed": Outcome.LOST,
    "TransactionConflict": Outcome.LOST,
    "ProvisionedThroughputExceeded": Outcome.THROTTLED,
    "ThrottlingError": Outcome.THROTTLED,
    "ValidationError": Outcome.INVALID,
    "ItemCollectionSizeLimitExceeded": Outcome.INVALID,
}
# A cancellation with several reasons is what its gravest reason is: a malformed item is a
# bug whatever else happened; a lost condition would lose again, so it beats a throttle.
_GRAVITY = (Outcome.INVALID, Outcome.LOST, Outcome.THROTTLED)

TRIES = 4
BACKOFF_BASE_S = 0.1
RETRY_AFTER_S = 1


class StoreRejected(Exception):
    """DynamoDB refused the request as malformed (a bug in the caller): surfaces as a 500."""

    def __init__(self, code: str, reasons: list[str | None]) -> None:
        super().__init__(f"the table refused the request: {code} {reasons or ''}".strip())
        self.code = code
        self.reasons = reasons


def reasons_of(err: ClientError) -> list[str | None]:
    return [r.get("Code") for r in err.response.get("CancellationReasons") or []]


def outcome_of(err: ClientError) -> Outcome | None:
    code = err.response.get("Error", {}).get("Code", "")
    if code != "TransactionCanceledException":
        return OUTCOMES.get(code)
    found = {OUTCOMES.get(r or "") for r in reasons_of(err)}
    return next((o for o in _GRAVITY if o in found), None)


@dataclass
class Retry:
    """The one retry policy every call goes through (sleep and jitter injectable for tests)."""

    tries: int = TRIES
    base_s: float = BACKOFF_BASE_S
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random

    def call(
        self, what: str, fn: Callable[..., Any], request: dict[str, Any], read: bool = False
    ) -> dict[str, Any]:
        """Send `request`, re-sending it on a throttle (or a connection failure it is safe to
        send again after); any other failure raises at once."""
        for attempt in range(1, self.tries + 1):
            try:
                return dict(fn(**request))
            except ClientError as err:
                if outcome_of(err) is not Outcome.THROTTLED:
                    raise
                self.throttled(what, attempt, err)
            except NeverSent as err:
                self.throttled(what, attempt, err)
            except HTTPClientError as err:
                if not read:
                    raise
                self.throttled(what, attempt, err)
        raise AssertionError("unreachable: the last try raises")

    def throttled(self, what: str, attempt: int, cause: Exception | None = None) -> None:
        """Try `attempt` was throttled: back off, or give up as Unavailable at the bound."""
        if attempt >= self.tries:
            raise Unavailable(
                f"the table is throttling or unreachable for {what}; try again shortly",
                retry_after=RETRY_AFTER_S,
                tries=attempt,
            ) from cause
        self.sleep(self.jitter() * self.base_s * 2 ** (attempt - 1))


def translate(err: ClientError, lost: TenureError | None) -> Exception:
    """The domain error a failed call is: `lost` for a lost condition (that call's meaning of
    it), StoreRejected for a malformed request; anything else stays the ClientError."""
    outcome = outcome_of(err)
    code = err.response.get("Error", {}).get("Code", "")
    if outcome is Outcome.INVALID:
        return StoreRejected(code, reasons_of(err))
    if outcome is Outcome.LOST and lost is not None:
        if err.response.get("CancellationReasons"):
            lost.details["reasons"] = reasons_of(err)
        return lost
    return err
