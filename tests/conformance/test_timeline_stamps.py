"""A task lease's routine transitions (claimed, started, completed) are stamped on the lease row
by the write that makes them, and the reactor writes no timeline row for them: on DynamoDB
Local, with the table's stream delivered to the reactor, a plain lifecycle leaves no row in
the task's timeline partition (the task's first lease is read by its id, its creation a stamp
too; a later lease has an anchor row, its first event), while the timeline reads back every
event as before; a transition the row cannot tell keeps a row of its own; a
stream delivered twice changes nothing; a crash between a stamped write and the reactor loses
no event."""

from __future__ import annotations

import time
from typing import Any

import boto3
from tenure.app.migrations import (
    CREATED_STAMPS_FROM_SCHEMA,
    STAMPS_FROM_SCHEMA,
    SchemaState,
    migrate,
)
from tenure.domain.model import Event, Task
from tenure.domain.timeline import first_lease_id, lease_event
from tenure.store import keys as k
from tenure.triggers.stream import react

from tests.conformance.contract import ALPHA, SPACE, make_world, read_stream, walk_timeline
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


def test_a_plain_lifecycle_writes_no_timeline_row_and_reads_back_every_event(rig: Rig) -> None:
    task, lease_id = _lifecycle(rig)
    assert _partition(rig, task) == []
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
    assert stamps is not None and stamps.tl == {"n": 1, "c": 2, "s": 3, "b": "heartbeat", "e": 4}


def test_a_claim_that_starts_its_lease_is_two_events_of_one_write(rig: Rig) -> None:
    """The worker SDK's claim asks for its lease running: one conditional write claims and
    starts it, the row's stamps tell both events, and the timeline reads them back as a
    claim and a first heartbeat would have written them, at the claim's instant."""
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, claim_id="c-1", start=True)
    assert won is not None and won.lease.state.value == "running"
    assert rig.store.get_lease(lease.id) == won.lease
    retried = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, claim_id="c-1", start=True)
    assert retried is not None and retried.lease.id == lease.id  # the same lease, running
    rig.clock.advance(1)
    rig.svc.reports.worker_heartbeat(WORKER, "w-1", [(lease.id, won.lease.fence)])
    rig.clock.advance(1)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, {"result": {"n": 1}})
    rig.pump.drain()
    rows = _partition(rig, task)
    events = rig.store.timeline("task", task.id, None)
    types = [e.type for e in events]
    assert types == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        "lease.claim_retried",
        "lease.completed",
    ]
    at = events[0].at
    assert _shape(events[1:3]) == [
        ("lease.claimed", at + 1000, {"worker_id": "w-1", "worker_version": "1.0"}),
        ("lease.started", at + 1000, {"by": "claim"}),
    ]
    assert [e.id for e in events[:3]] == [f"{lease.id}.v{v:06d}" for v in (1, 2, 3)]
    # Only the claim retry's own row (a retry is no routine transition).
    assert len(rows) == 1 and rows[0].startswith(k.EVENT_PREFIX), rows
    for newest_first in (False, True):  # page by page, one event a page, both ways
        walked = walk_timeline(rig.store, task.id, 1, newest_first)
        ids = [e.id for e in (reversed(walked) if newest_first else walked)]
        assert ids == [e.id for e in events], newest_first


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
    # The write is the event: the creation, a claim, a start and a completion read back at
    # once, even while their stream records wait (or the reactor is down).
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert lease is not None
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    rig.svc.reports.start(lease_principal(lease.id), lease.id)
    rig.svc.reports.complete(lease_principal(lease.id), lease.id, {})
    types = [e.type for e in rig.store.timeline("task", task.id, None)]
    assert types == ["lease.created", "lease.claimed", "lease.started", "lease.completed"]
    rig.pump.drain()
    assert [e.type for e in rig.store.timeline("task", task.id, None)] == types
    assert _partition(rig, task) == []


def test_a_lease_made_before_stamps_goes_on_with_rows_of_its_own(rig: Rig) -> None:
    # Data an earlier release wrote: the lease has no stamps and its creation is an event
    # row. Its later transitions are rows too, and the timeline is whole.
    make_world(rig.svc)
    task, lease = rig.svc.filing.create_task(ADMIN, SPACE, "old", None, None, {}, ALPHA, None)
    assert lease is not None
    assert _partition(rig, task) == []
    created = lease_event(None, lease)
    assert created is not None
    rig.store.put_event(created)
    client, table = rig.store.client, rig.store.table
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


def _run_one(rig: Rig, lease_id: str, fail: bool = False) -> None:
    rig.clock.advance(1)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None and won.lease.id == lease_id
    rig.clock.advance(1)
    rig.svc.reports.start(lease_principal(lease_id), lease_id)
    rig.clock.advance(1)
    if fail:
        rig.svc.reports.fail(lease_principal(lease_id), lease_id, {"error": "exit 2"})
    else:
        rig.svc.reports.complete(lease_principal(lease_id), lease_id, {})


def _by_lease(events: list[Event]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {}
    for event in events:
        out.setdefault(event.lease_id, []).append(event.type)
    return out


def test_a_retry_lease_is_anchored_by_its_first_event_and_keeps_its_stamped_events(
    rig: Rig,
) -> None:
    # A retry's new lease begins with `lease.retried`, not `lease.created`: its first event,
    # whatever its name, is its anchor, or its stamped claim, start and end would be lost.
    make_world(rig.svc)
    task, first = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert first is not None
    _run_one(rig, first.id, fail=True)
    rig.clock.advance(1)
    second = rig.svc.force.retry(ADMIN, first.id)
    rig.pump.drain()
    _run_one(rig, second.id)
    rig.pump.drain()
    stored = rig.store.get_lease(second.id)
    assert stored is not None and stored.tl == {"c": 2, "s": 3, "b": "start", "e": 4}
    by_lease = _by_lease(rig.store.timeline("task", task.id, None))
    assert by_lease[second.id] == [
        "lease.retried",
        "lease.claimed",
        "lease.started",
        "lease.completed",
    ]
    assert by_lease[first.id] == ["lease.created", "lease.claimed", "lease.started", "lease.failed"]


def test_a_one_megabyte_cut_of_event_rows_skips_no_row(rig: Rig) -> None:
    # A Query returns at most 1 MB: five 300 KB rows between two leases' stamped events are
    # read over several pages, and no page may run past the last row it read.
    make_world(rig.svc)
    task, first = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert first is not None
    rig.pump.drain()
    _run_one(rig, first.id)
    rig.pump.drain()
    for n in range(5):
        rig.clock.advance(1)
        rig.store.put_event(
            Event(
                id=f"big{n}",
                subject_kind="task",
                subject_id=task.id,
                type="task.note",
                at=rig.clock.now_ms(),
                data={"blob": "x" * 300_000},
            )
        )
    rig.clock.advance(1)
    second = rig.svc.filing.enqueue(ADMIN, task.id, ALPHA)
    rig.pump.drain()
    _run_one(rig, second.id)
    rig.pump.drain()
    for newest_first in (True, False):
        got = walk_timeline(rig.store, task.id, 50, newest_first)
        assert sorted(e.id for e in got if e.type == "task.note") == [f"big{n}" for n in range(5)]
        assert len({e.id for e in got}) == len(got) == 13, newest_first
        assert [e.at for e in got] == sorted((e.at for e in got), reverse=newest_first)


def test_a_release_stamped_by_a_clock_a_little_behind_loses_nothing_when_paged(
    rig: Rig,
) -> None:
    # Two instances, one 5 ms behind the other: the claim is stamped by the one ahead, the
    # release (and the successor's anchor, in the same transaction) by the one behind, so the
    # successor's anchor sorts before its predecessor's claim.
    make_world(rig.svc)
    task, first = rig.svc.filing.create_task(ADMIN, SPACE, "job", None, None, {}, ALPHA, None)
    assert first is not None
    rig.clock.advance(1)
    assert rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None) is not None
    time.sleep(0.01)  # ids are wall-clock ordered: the successor's sorts after the first's
    rig.clock.now -= 5
    rig.svc.reports.release(lease_principal(first.id), first.id, {})
    rig.pump.drain()
    whole = rig.store.timeline("task", task.id, None)
    assert len(whole) == 4
    for newest_first in (False, True):
        want = whole[::-1] if newest_first else whole
        for limit in (1, 2, 3, 4, 10):
            got = walk_timeline(rig.store, task.id, limit, newest_first)
            assert [e.id for e in got] == [e.id for e in want], (newest_first, limit)


def test_a_table_an_earlier_release_migrated_stamps_only_once_migrated_again(rig: Rig) -> None:
    # While the table's schema is that of the release before, an instance of that release
    # may still share it (a deploy under way): leases keep a timeline row per event and
    # their full rows. `tenure admin migrate` moves the schema on, and new leases are stamped.
    assert rig.store.save_schema(SchemaState(), SchemaState(version=STAMPS_FROM_SCHEMA - 1))
    task, lease_id = _lifecycle(rig)
    rows = _partition(rig, task)
    assert len(rows) == 4 and all(sk.startswith(k.EVENT_PREFIX) for sk in rows), rows
    raw = rig.store.client.get_item(
        TableName=rig.store.table,
        Key={"PK": {"S": f"LEASE#{lease_id}"}, "SK": {"S": "LEASE"}},
    )["Item"]
    assert raw["subject_id"] == {"S": task.id} and "tl" not in raw
    assert [o.status for o in migrate(rig.store)][-1] == "applied"
    rig.clock.advance(31)  # the schema row is read again after the pools' cache time
    later, _ = rig.svc.filing.create_task(ADMIN, SPACE, "next", None, None, {}, ALPHA, None)
    rig.pump.drain()
    assert _partition(rig, later) == []


def test_a_first_lease_goes_without_an_anchor_only_once_the_schema_allows(rig: Rig) -> None:
    # A timeline read of the release before finds leases only by their anchors: while it may
    # still be serving, a task's first lease is anchored as it would have been.
    assert rig.store.save_schema(
        SchemaState(), SchemaState(version=CREATED_STAMPS_FROM_SCHEMA - 1, step=1)
    )
    task, lease_id = _lifecycle(rig)
    assert [sk[:3] for sk in _partition(rig, task)] == [k.ANCHOR_PREFIX]
    lease = rig.store.get_lease(lease_id)
    assert lease is not None and lease.tl is not None and "n" not in lease.tl
    assert lease_id != first_lease_id(task.id)
    assert [e.type for e in rig.store.timeline("task", task.id, None)] == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        "lease.completed",
    ]
    assert [o.status for o in migrate(rig.store)][-1] == "applied"
    rig.clock.advance(31)
    later, first = rig.svc.filing.create_task(ADMIN, SPACE, "next", None, None, {}, ALPHA, None)
    rig.pump.drain()
    assert first is not None and first.id == first_lease_id(later.id)
    assert _partition(rig, later) == []
    assert [e.type for e in rig.store.timeline("task", later.id, None)] == ["lease.created"]
