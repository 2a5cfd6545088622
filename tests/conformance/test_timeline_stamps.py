"""A task lease's routine transitions (claimed, started, completed) are stamped on the lease row
by the write that makes them, and the reactor writes no timeline row for them: on DynamoDB
Local, with the table's stream delivered to the reactor, a plain lifecycle leaves one row in
the task's timeline partition (the lease's anchor, its `lease.created`), while the timeline
reads back every event as before; a transition the row cannot tell keeps a row of its own; a
stream delivered twice changes nothing; a crash between a stamped write and the reactor loses
no event."""

from __future__ import annotations

from typing import Any

import boto3
from tenure.domain.model import Event, Task
from tenure.store import keys as k
from tenure.triggers.stream import react

from tests.conformance.contract import ALPHA, SPACE, make_world, read_stream
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


def _partition(rig: Rig, task: Task) -> list[str]:
    """The sort keys of every row in the task's timeline partition."""
    out = rig.store.client.query(
        TableName=rig.store.table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": k.timeline_pk("task", task.id)}},
    )
    return [item["SK"]["S"] for item in out["Items"]]


def _lifecycle(rig: Rig, report: dict[str, Any] | None = None) -> tuple[Task, str]:
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, claim_id="c-1")
    assert won is not None
    rig.clock.advance(1)
    rig.svc.reports.worker_heartbeat(WORKER, "w-1", [(won.lease.id, won.lease.fence)])
    rig.clock.advance(1)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, report or {"result": {"n": 1}})
    rig.pump.drain()
    return task, lease.id


def _shape(events: list[Event]) -> list[tuple[str, int, dict[str, Any]]]:
    return [(e.type, e.at, e.data) for e in events]


def test_a_plain_lifecycle_writes_one_timeline_row_and_reads_back_every_event(rig: Rig) -> None:
    task, lease_id = _lifecycle(rig)
    rows = _partition(rig, task)
    assert len(rows) == 1 and rows[0].startswith(k.ANCHOR_PREFIX), rows
    events = rig.store.timeline("task", task.id, None)
    at = events[0].at
    assert _shape(events) == [
        ("lease.created", at, {"pool": ALPHA}),
        ("lease.claimed", at + 1000, {"worker_id": "w-1", "worker_version": "1.0"}),
        ("lease.started", at + 2000, {"by": "heartbeat"}),
        (
            "lease.completed",
            at + 3000,
            {
                "report": "complete",
                "state": "completed",
                "end_reason": "completed",
                "outcome": "success",
                "result": {"n": 1},
            },
        ),
    ]
    assert [e.id for e in events] == [f"{lease_id}.v{v:06d}" for v in (1, 2, 3, 4)]
    assert {(e.lease_id, e.fence) for e in events} == {(lease_id, 1)}
    stamps = rig.store.get_lease(lease_id)
    assert stamps is not None and stamps.tl == {"c": 2, "s": 3, "b": "heartbeat", "e": 4}


def test_a_redelivered_stream_writes_nothing_and_the_timeline_stays(rig: Rig) -> None:
    task, _ = _lifecycle(rig)
    before = rig.store.timeline("task", task.id, None)
    rows = _partition(rig, task)
    ddb = rig.store.client
    streams = boto3.client(
        "dynamodbstreams",
        endpoint_url=ddb.meta.endpoint_url,
        region_name=ddb.meta.region_name,
    )
    records = read_stream(ddb, streams, rig.store.table)
    assert records
    for record in records:  # Lambda delivers at least once: every record again
        react(rig.store, record)
    assert _partition(rig, task) == rows
    assert rig.store.timeline("task", task.id, None) == before


def test_events_the_row_cannot_tell_keep_rows_of_their_own(rig: Rig) -> None:
    # A failure is not a routine ending: its event is a row, beside the stamped claim/start.
    task, lease_id = _lifecycle(rig, {"outcome": "failure", "details": {"why": "exit 2"}})
    rows = _partition(rig, task)
    assert sum(sk.startswith(k.EVENT_PREFIX) for sk in rows) == 1
    types = [e.type for e in rig.store.timeline("task", task.id, None)]
    assert types == ["lease.created", "lease.claimed", "lease.started", "lease.failed"]
    lease = rig.store.get_lease(lease_id)
    assert lease is not None and lease.tl is not None and "e" not in lease.tl


def test_a_stamped_event_is_on_the_timeline_before_the_reactor_has_run(rig: Rig) -> None:
    # The write is the event: once the anchor is there, a claim, a start and a completion
    # read back at once, even while their stream records wait (or the reactor is down).
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.pump.drain()  # the anchor
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    rig.svc.reports.start(lease_principal(lease.id), lease.id)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, {})
    types = [e.type for e in rig.store.timeline("task", task.id, None)]
    assert types == ["lease.created", "lease.claimed", "lease.started", "lease.completed"]
    rig.pump.drain()
    assert [e.type for e in rig.store.timeline("task", task.id, None)] == types
    assert len(_partition(rig, task)) == 1


def test_a_lease_made_before_stamps_goes_on_with_rows_of_its_own(rig: Rig) -> None:
    # Data an earlier release wrote: the lease has no stamps and its creation is an event
    # row, not an anchor. Its later transitions are rows too, and the timeline is whole.
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "old", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.pump.drain()
    client, table = rig.store.client, rig.store.table
    [anchor] = _partition(rig, task)
    pk = {"S": k.timeline_pk("task", task.id)}
    row = client.get_item(TableName=table, Key={"PK": pk, "SK": {"S": anchor}})["Item"]
    client.delete_item(TableName=table, Key={"PK": pk, "SK": {"S": anchor}})
    event_sk = k.EVENT_PREFIX + anchor.removeprefix(k.ANCHOR_PREFIX)
    client.put_item(TableName=table, Item={**row, "SK": {"S": event_sk}})
    client.update_item(
        TableName=table,
        Key={"PK": {"S": f"LEASE#{lease.id}"}, "SK": {"S": "LEASE"}},
        UpdateExpression="REMOVE tl",
    )
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    rig.svc.reports.start(lease_principal(lease.id), lease.id)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, {})
    rig.pump.drain()
    types = [e.type for e in rig.store.timeline("task", task.id, None)]
    assert types == ["lease.created", "lease.claimed", "lease.started", "lease.completed"]
    assert all(sk.startswith(k.EVENT_PREFIX) for sk in _partition(rig, task))
    stored = rig.store.get_lease(lease.id)
    assert stored is not None and stored.tl is None
