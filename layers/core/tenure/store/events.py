"""EventBridge: the service's own events (task.wake_creator, every transition) on the
template's bus."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from tenure.domain.errors import Unavailable

# PutEvents takes at most ten entries a call.
ENTRIES_PER_CALL = 10


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self.client = client
        self.bus_name = bus_name

    def _entry(self, source: str, detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
        return {
            "EventBusName": self.bus_name,
            "Source": source,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, sort_keys=True),
        }

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        answer = self.client.put_events(Entries=[self._entry(source, detail_type, detail)])
        if answer.get("FailedEntryCount"):
            code = (answer.get("Entries") or [{}])[0].get("ErrorCode", "unknown")
            raise Unavailable(f"the event bus refused the event ({code})", retry_after=1)

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
