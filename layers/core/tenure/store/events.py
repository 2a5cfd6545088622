"""EventBridge: the service's own events (task.wake_creator, every transition) on the
template's bus."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

# Named apart from the builtin ConnectionError: a request that never reached the bus.
from botocore.exceptions import ConnectionError as NeverSent

from tenure.domain.errors import Unavailable

# PutEvents takes at most ten entries a call.
ENTRIES_PER_CALL = 10
# One event (`publish`) is sent at most TRIES times, BACKOFF_S doubling between tries (0.3 s
# in all): again only when the bus took nothing (it throttled, failed inside, or was never
# reached, for the whole call or the entry), never after an answer lost in flight, which may
# have landed. The client is built with botocore's retries off, so this is the only bound.
TRIES = 3
BACKOFF_S = 0.1
SEND_AGAIN = frozenset({"ThrottlingException", "InternalException", "InternalFailure"})


class EventBridgePublisher:
    def __init__(
        self, client: Any, bus_name: str, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.client = client
        self.bus_name = bus_name
        self.sleep = sleep

    def _entry(self, source: str, detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
        return {
            "EventBusName": self.bus_name,
            "Source": source,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, sort_keys=True),
        }

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        """One event, sent again within the bound while the bus took nothing; raises
        Unavailable naming the bus's error code when it is not taken."""
        entry = self._entry(source, detail_type, detail)
        for attempt in range(1, TRIES + 1):
            try:
                answer = self.client.put_events(Entries=[entry])
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "unknown")
                if code not in SEND_AGAIN:
                    raise
            except NeverSent:
                code = "unreachable"
            else:
                if not answer.get("FailedEntryCount"):
                    return
                code = (answer.get("Entries") or [{}])[0].get("ErrorCode", "unknown")
            if code not in SEND_AGAIN | {"unreachable"} or attempt == TRIES:
                raise Unavailable(f"the event bus refused the event ({code})", retry_after=1)
            self.sleep(BACKOFF_S * 2 ** (attempt - 1))
        raise AssertionError("unreachable: the last try raises")

    def publish_batch(self, source: str, events: list[tuple[str, dict[str, Any]]]) -> set[int]:
        failed: set[int] = set()
        for start in range(0, len(events), ENTRIES_PER_CALL):
            chunk = events[start : start + ENTRIES_PER_CALL]
            positions = range(start, start + len(chunk))
            try:
                answer = self.client.put_events(
                    Entries=[self._entry(source, kind, detail) for kind, detail in chunk]
                )
            except (ClientError, BotoCoreError):
                # The caller fails these records so the stream delivers them again.
                failed.update(positions)
                continue
            count = int(answer.get("FailedEntryCount") or 0)
            if count:
                # Entries answer in request order; a refused one carries an ErrorCode. An answer
                # that does not say which failed fails the whole call.
                entries = answer.get("Entries") or []
                refused = {
                    p for p, e in zip(positions, entries, strict=False) if e.get("ErrorCode")
                }
                failed.update(refused if len(refused) >= count else positions)
        return failed
