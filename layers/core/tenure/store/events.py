"""EventBridge: the service's own events (task.wake_creator) on the template's bus."""

from __future__ import annotations

import json
from typing import Any

from tenure.domain.errors import Unavailable


class EventBridgePublisher:
    def __init__(self, client: Any, bus_name: str) -> None:
        self.client = client
        self.bus_name = bus_name

    def publish(self, source: str, detail_type: str, detail: dict[str, Any]) -> None:
        answer = self.client.put_events(
            Entries=[
                {
                    "EventBusName": self.bus_name,
                    "Source": source,
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail, sort_keys=True),
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            code = (answer.get("Entries") or [{}])[0].get("ErrorCode", "unknown")
            raise Unavailable(f"the event bus refused the event ({code})", retry_after=1)
