"""The reactor: turns table stream records into timeline events (idempotently), and hands
each changed row to the reactions table (app/reactions.py, filled in by compose())."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from tenure import wiring
from tenure.app.ports import Store
from tenure.app.tenure import Tenure, compose
from tenure.domain.errors import Conflict
from tenure.domain.model import Event
from tenure.domain.timeline import graph_event, lease_event, task_event
from tenure.store import items, keys
from tenure.store.dynamo import load_image


def rows_of(record: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The (entity, old, new) a stream record changed — lease, task or graph row — decoded
    once for both the timeline event and the reactions; None for any other row or a delete."""
    change = record.get("dynamodb", {})
    if "NewImage" not in change:
        return None  # a delete: nothing on the timeline, nothing to react to
    new = load_image(change["NewImage"])
    old = load_image(change["OldImage"]) if "OldImage" in change else None
    if new.get(keys.SK) == keys.GRAPH_SK:
        task_id = str(new[keys.PK]).removeprefix("TASK#")
        before = items.graph_from(task_id, old) if old else None
        return "graph", before, items.graph_from(task_id, new)
    entity = new.get("entity")
    if entity == "lease":
        return "lease", items.lease_from(old) if old else None, items.lease_from(new)
    if entity == "task":
        return "task", items.task_from(old) if old else None, items.task_from(new)
    return None


# The timeline event each kind of row change stands for.
EVENTS: dict[str, Callable[[Any, Any], Event | None]] = {
    "lease": lease_event,
    "task": task_event,
    "graph": graph_event,
}


def event_of(record: dict[str, Any]) -> Event | None:
    """The timeline event one stream record stands for, if any."""
    changed = rows_of(record)
    return EVENTS[changed[0]](changed[1], changed[2]) if changed is not None else None


processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def handle(
    event: dict[str, Any],
    context: Any,
    store: Store | None = None,
    service: Tenure | None = None,
) -> dict[str, Any]:
    """One batch of stream records; a record that fails is reported back for a retry."""
    if service is None:
        if store is not None:
            service = compose(
                store, wiring.SystemClock(), wiring.RandomIds(), publisher=wiring.publisher()
            )
        else:
            service = wiring.service()
    target = store or service.store
    svc = service

    def on_record(record: DynamoDBRecord) -> None:
        process(target, svc, record.raw_event)

    answer = process_partial_response(
        event=event, record_handler=on_record, processor=processor, context=context
    )
    return dict(answer)


def process(store: Store, svc: Tenure, record: dict[str, Any]) -> None:
    """One stream record, decoded once: its timeline event, then its reactions (rollup,
    auto-enqueue, the breaker, wake-creator), each conditional, so a replayed record changes
    nothing and a failed one is retried."""
    changed = rows_of(record)
    if changed is None:
        return
    entity, old, new = changed
    event = EVENTS[entity](old, new)
    if event is not None:
        with contextlib.suppress(Conflict):  # already written: the stream delivered it before
            store.put_event(event)
    svc.reactions.react(entity, old, new)


def react(store: Store, record: dict[str, Any]) -> Event | None:
    """The timeline event of one record, written (idempotently)."""
    event = event_of(record)
    if event is None:
        return None
    with contextlib.suppress(Conflict):  # already written: the stream delivered it before
        store.put_event(event)
    return event
