"""The reactor: turns table stream records into timeline events (idempotently), hands each
changed row to the reactions table (app/reactions.py, filled in by compose()), and publishes
on the stack's bus what the OutboundEvents setting asks for (domain/outbound.py): by default
the end of every lease and a task's endings, or every transition, or nothing."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from tenure import wiring
from tenure.app.autonomy.wake import WAKE_PUBLISH_FAILED
from tenure.app.ports import EventBatchPublisher
from tenure.app.rows import Store, TimelineRows
from tenure.app.tenure import Tenure
from tenure.config import settings

# `out`: the module's own name is taken here by handle()'s `outbound` parameter (the bus).
from tenure.domain import outbound as out
from tenure.domain.errors import Conflict
from tenure.domain.events import (
    LEASE_CANCELLED,
    LEASE_CLAIMED,
    LEASE_COMPLETED,
    LEASE_FAILED,
    LEASE_FORCE_FAILED,
    LEASE_KILLED,
    LEASE_LOST,
    LEASE_RELEASED,
    TASK_COMPLETED,
    TASK_NEEDS_ATTENTION,
)
from tenure.domain.model import Event
from tenure.domain.outbound import SOURCE, Outbound, outbound_of
from tenure.domain.states import LeaseState
from tenure.domain.timeline import (
    graph_event,
    is_stamped,
    lease_event,
    lease_events,
    task_event,
    task_side_events,
)
from tenure.store.dynamo.stream import decode_record


def rows_of(record: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The (entity, old, new) a stream record changed (the store decodes its keys and images),
    or None for any other row or a delete."""
    return decode_record(record)


# How much of a failed record's error its log line keeps.
ERROR_CHARS = 1000

# The timeline event each kind of row change stands for.
EVENTS: dict[str, Callable[[Any, Any], Event | None]] = {
    "lease": lease_event,
    "task": task_event,
    "graph": graph_event,
}


processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
metrics = Metrics(namespace="Tenure", service="reactor")
# A failed record is logged here with its sequence number and error: the dead-letter message
# a record reaches after its retries names only a range of the shard.
logger = Logger(service="tenure-reactor")
# A lease's endings counted as metrics (the dashboard's completions, failures, losses),
# whichever endpoint or trigger made them, from the records the reactor processed, whatever
# OutboundEvents publishes: the trigger lets every ending through at every setting. Claims are
# counted where they are served (`Claims`, api/surface.py): a claim stamped on its lease wakes
# the reactor only when every transition is published. A redelivered record counts again: a
# dashboard figure, not a ledger.
TRANSITION_METRICS = {
    LEASE_COMPLETED: "LeasesCompleted",
    LEASE_FAILED: "LeasesFailed",
    LEASE_FORCE_FAILED: "LeasesFailed",
    LEASE_LOST: "LeasesLost",
    LEASE_KILLED: "LeasesKilled",
    LEASE_CANCELLED: "LeasesCancelled",
    LEASE_RELEASED: "LeasesReleased",
}


@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The reactor function: one batch, then its transitions and its failed records as
    metrics (a batch whose every record failed is a function error, counted too)."""
    tally: Counter[str] = Counter()
    counters = wiring.service().counters  # the process's service, which handle() uses
    unsent, failed = counters[WAKE_PUBLISH_FAILED], 0
    try:
        answer = handle(event, context, tally=tally)
        failed = len(answer.get("batchItemFailures") or [])
    except BatchProcessingError:
        failed = len(event.get("Records") or [])
        raise
    finally:
        for name, count in (
            ("ReactorRecordsFailed", failed),
            ("WakesUnpublished", counters[WAKE_PUBLISH_FAILED] - unsent),
        ):
            if count:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    named: Counter[str] = Counter()
    for event_type, count in tally.items():
        if event_type in TRANSITION_METRICS:
            named[TRANSITION_METRICS[event_type]] += count
    for name, count in sorted(named.items()):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    return answer


def handle(
    event: dict[str, Any],
    context: Any,
    store: Store | None = None,
    service: Tenure | None = None,
    outbound: EventBatchPublisher | None = None,
    tally: Counter[str] | None = None,
    publishing: str | None = None,
) -> dict[str, Any]:
    """One batch of stream records; a record that fails is reported back for a retry. The
    batch's bus events go out together once every record is processed (PutEvents takes ten a
    call); a record whose event the bus did not take is failed too, so the stream delivers it
    again: at least once, the consumer de-duplicating on the detail's `id`. `publishing`: which
    events go out (domain/outbound.py; default the deployment's OutboundEvents)."""
    setting = out.setting_of(publishing or settings().outbound_events)
    if service is None:
        bus = wiring.publisher()
        outbound = outbound or bus
        if store is not None:
            service = wiring.build_service(store, bare=True, publisher=bus)
        else:
            service = wiring.service()
    # The reactor's own writes are timeline rows: on the table it was handed, or its service's.
    target = store or service.rows.timeline
    svc = service
    published: list[tuple[str, Outbound]] = []  # (the record's sequence number, its bus event)

    told: list[tuple[str, str]] = []  # (the record's sequence number, a lease transition)

    def on_record(record: DynamoDBRecord) -> None:
        sequence = record.raw_event["dynamodb"]["SequenceNumber"]
        seen: list[str] = []
        try:
            events = process(target, svc, record.raw_event, setting, seen)
        except Exception as err:
            logger.exception(
                "stream record failed: the stream delivers it again",
                extra={
                    "sequence_number": sequence,
                    "event_name": record.raw_event.get("eventName"),
                    "error": f"{type(err).__name__}: {err}"[:ERROR_CHARS],
                },
            )
            raise
        published.extend((sequence, event) for event in events)
        told.extend((sequence, kind) for kind in seen)

    answer: dict[str, Any] = dict(
        process_partial_response(
            event=event, record_handler=on_record, processor=processor, context=context
        )
    )
    if outbound is not None and published:
        refused = outbound.publish_batch(SOURCE, [(o.detail_type, o.detail) for _, o in published])
        failures: list[dict[str, str]] = answer.setdefault("batchItemFailures", [])
        known = {f["itemIdentifier"] for f in failures}
        again = sorted({published[position][0] for position in refused} - known)
        if again:
            logger.error(
                "the bus refused these records' events: the stream delivers them again",
                extra={"sequence_numbers": again, "events_refused": len(refused)},
            )
        failures.extend({"itemIdentifier": sequence} for sequence in again)
    if tally is not None:
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        tally.update(kind for seq, kind in told if seq not in failed)
    return answer


def process(
    store: TimelineRows,
    svc: Tenure,
    record: dict[str, Any],
    publishing: str = out.ALL,
    seen: list[str] | None = None,
) -> list[Outbound]:
    """One stream record, decoded once: its timeline events, then its reactions (rollup,
    auto-enqueue, the breaker, wake-creator), each conditional, so a replayed record changes
    nothing and a failed one is retried. Returns the bus events the `publishing` setting
    sends for it (domain/outbound.py); `seen` gets the lease transitions it stands for."""
    changed = rows_of(record)
    if changed is None:
        return []
    entity, old, new = changed
    events = events_of(entity, old, new)
    if seen is not None and entity == "lease":
        seen.extend(event.type for event in events)
    side = task_side_events(old, new) if entity == "task" else []
    for written in [*events, *side]:
        record_event(store, entity, new, written)
    context = svc.reactions.react(entity, old, new)
    return outbound_events(svc, entity, old, new, events, publishing, context.told_by_lease)


def outbound_events(
    svc: Tenure,
    entity: str,
    old: Any,
    new: Any,
    events: list[Event],
    publishing: str,
    told_by_lease: bool = False,
) -> list[Outbound]:
    """The bus events of one row change under `publishing`: its timeline events (all of them,
    or a lease's end only), then the task ending it is, if any (every setting but none).
    `told_by_lease`: the record's reactions found this lease's success to be its task's
    completion with no graph row change to tell it (app/reactions.py Context)."""
    if publishing == out.NONE:
        return []
    sent: list[Outbound] = []
    for event in events:
        if entity == "graph" and publishing != out.ALL:
            continue
        if entity == "task" and publishing != out.ALL:
            continue
        if entity == "lease" and not out.lease_publishes(publishing, old, new, event):
            continue
        sent.append(outbound_of(entity, _as_of(entity, new, event), event))
    if entity == "lease" and events:
        kind = out.task_ending_of_lease(old, new)
        if kind is None and told_by_lease:
            kind = TASK_COMPLETED  # a success no graph row change tells
        if kind is not None:
            sent.append(out.lease_task_ending(kind, events[-1], new))
    elif entity == "task" and out.task_needs_attention(old, new):
        event_id = f"{new.id}.v{new.version:06d}.needs_attention"
        at = new.updated_at or new.created_at
        sent.append(out.task_ending(TASK_NEEDS_ATTENTION, event_id, at, new))
    elif entity == "graph" and out.task_completed(old, new):
        # The graph row names only its task: the task's filed fields (key, space, pool) from
        # any copy of its row, as the reactions read them.
        task = svc.kernel.task_as_filed(new.task_id)
        if task is not None:
            event_id = f"{task.id}.succeeded.{new.succeeded_at}"
            sent.append(out.task_ending(TASK_COMPLETED, event_id, new.succeeded_at, task))
    return sent


def events_of(entity: str, old: Any, new: Any) -> list[Event]:
    """The timeline events of one row change, oldest first: a lease's write may stand for
    two transitions (a claim that also started it), any other row's for one at most."""
    if entity == "lease":
        return lease_events(old, new)
    event = EVENTS[entity](old, new)
    return [event] if event is not None else []


def _as_of(entity: str, row: Any, event: Event) -> Any:
    """The row as the bus event tells it: a lease claimed and started by one write was
    dispatched when its claim's event happened."""
    if entity == "lease" and event.type == LEASE_CLAIMED and row.state is LeaseState.RUNNING:
        return replace(row, state=LeaseState.DISPATCHED)
    return row


def react(store: TimelineRows, record: dict[str, Any]) -> Event | None:
    """The timeline events of one record, written (idempotently); the newest of them."""
    changed = rows_of(record)
    if changed is None:
        return None
    events = events_of(*changed)
    for event in events:
        record_event(store, changed[0], changed[2], event)
    return events[-1] if events else None


def record_event(store: TimelineRows, entity: str, row: Any, event: Event) -> None:
    """Put `event` on its timeline, only if new: a redelivered record writes nothing. A
    routine transition the lease row holds as a stamp needs no row of its own; the first
    event of a lease made with stamps (`lease.created`, or `lease.retried` and the like for
    a retry's new lease) is written as that lease's anchor, by which a timeline read finds
    the lease (store/reads.py)."""
    if entity == "lease" and is_stamped(row, event):
        return
    with contextlib.suppress(Conflict):  # already written: the stream delivered it before
        if entity == "lease" and row.version == 1 and row.tl is not None:
            store.put_anchor(event)
        else:
            store.put_event(event)
