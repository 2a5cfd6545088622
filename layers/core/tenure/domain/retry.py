"""A pool's retry policy: whether a failure gets another attempt, and how long it waits."""

from __future__ import annotations

from typing import Any

from tenure.records import record

DEFAULT_INITIAL_SECONDS = 10
DEFAULT_MULTIPLIER = 2.0
DEFAULT_MAX_SECONDS = 600


@record
class RetryPolicy:
    on_failure: bool = False
    initial_seconds: int = DEFAULT_INITIAL_SECONDS
    multiplier: float = DEFAULT_MULTIPLIER
    max_seconds: int = DEFAULT_MAX_SECONDS
    jitter: bool = True

    @classmethod
    def of(cls, settings: dict[str, Any] | None) -> RetryPolicy:
        """The policy a pool's stored `retry` setting says (absent: off)."""
        if not settings:
            return cls()
        backoff = settings.get("backoff") or {}
        return cls(
            on_failure=bool(settings.get("on_failure", False)),
            initial_seconds=int(backoff.get("initial_seconds", DEFAULT_INITIAL_SECONDS)),
            multiplier=float(backoff.get("multiplier", DEFAULT_MULTIPLIER)),
            max_seconds=int(backoff.get("max_seconds", DEFAULT_MAX_SECONDS)),
            jitter=bool(backoff.get("jitter", True)),
        )

    def view(self) -> dict[str, Any]:
        return {
            "on_failure": self.on_failure,
            "backoff": {
                "initial_seconds": self.initial_seconds,
                "multiplier": self.multiplier,
                "max_seconds": self.max_seconds,
                "jitter": self.jitter,
            },
        }

    def backoff_ms(self, attempt: int, draw: float) -> int:
        """The wait after attempt `attempt` failed: min(max, initial x multiplier^(attempt-1)),
        scaled by `draw` (a number in [0, 1)) when jitter is on — full jitter, so retries of
        many tasks that failed together spread over the whole window."""
        ceiling = min(
            float(self.max_seconds),
            self.initial_seconds * self.multiplier ** max(attempt - 1, 0),
        )
        return int(1000 * (ceiling * draw if self.jitter else ceiling))


def retries(policy: RetryPolicy, attempt: int, max_attempts: int, report: dict[str, Any]) -> bool:
    """Whether a failure reported as `report` on attempt `attempt` gets another attempt."""
    return policy.on_failure and attempt < max_attempts and report.get("retryable") is not False
