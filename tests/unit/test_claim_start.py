"""A claim that also starts its lease (`start`): the worker launches the job on the answer, so
the lease is claimed running by one write, its two transitions told by the row's stamps, and
the first heartbeat has nothing to write."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tenure.app.leases.handover import NextClaim
from tenure.app.migrations import CLAIM_START_FROM_SCHEMA, SchemaState, migrate
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, ReportKind
from tenure.domain.timeline import lease_events, stamped_events
from tenure.store import items
from tenure.triggers.stream import handle

from tests.unit.support import POOL, WORKER, Rig, as_lease


def _claim_started(rig: Rig, worker_id: str = "w1", claim_id: str | None = None) -> Any:
    won = rig.svc.claims.claim(WORKER, POOL, worker_id, "1.0", 0, None, claim_id, start=True)
    assert won is not None
    return won


def test_a_claim_with_start_hands_out_a_running_lease_by_one_write(rig: Rig) -> None:
    task, pending = rig.task()
    assert pending is not None
    rig.store.writes.clear()
    won = _claim_started(rig)
    lease = rig.lease(won.lease.id)
    assert lease == won.lease, "the answer is the committed row"
    assert lease.state is LeaseState.RUNNING
    assert lease.started_at == lease.claimed_at and lease.claimed_at is not None
    assert lease.version == pending.version + 2
    assert lease.tl == {"n": 1, "c": pending.version + 1, "s": pending.version + 2, "b": "claim"}
    assert rig.store.writes.count("commit") == 1
    types = rig.types(task.id)
    assert types[-2:] == ["lease.claimed", "lease.started"]
    claimed, started = rig.events(task.id)[-2:]
    assert claimed.id == f"{lease.id}.v{pending.version + 1:06d}"
    assert claimed.data == {"worker_id": "w1", "worker_version": "1.0"}
    assert started.id == f"{lease.id}.v{pending.version + 2:06d}"
    assert started.data == {"by": "claim"} and started.at == claimed.at


def test_its_first_heartbeat_writes_no_start(rig: Rig) -> None:
    won = _claim_started(rig) if rig.task() else None
    assert won is not None
    before = rig.lease(won.lease.id)
    rig.advance(10)
    beat = rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert beat.lease.state is LeaseState.RUNNING
    assert rig.lease(won.lease.id).version == before.version, "nothing was started again"


def test_a_lease_whose_row_cannot_tell_both_is_claimed_dispatched(rig: Rig) -> None:
    _, pending = rig.task()
    assert pending is not None
    # A lease made before timeline stamps: each of its events is a timeline row, one per
    # write, so one write cannot stand for two transitions.
    rig.store.lease_rows[pending.id].lease = replace(pending, tl=None)
    won = _claim_started(rig)
    assert won.lease.state is LeaseState.DISPATCHED
    started = rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    assert started.state is LeaseState.RUNNING


def test_a_retried_claim_with_start_gets_the_same_running_lease(rig: Rig) -> None:
    rig.task()
    rig.task()
    first = _claim_started(rig, claim_id="c-1")
    again = _claim_started(rig, claim_id="c-1")
    assert again.lease.id == first.lease.id
    assert again.lease.state is LeaseState.RUNNING
    assert again.token != first.token
    assert rig.lease(first.lease.id).token_hash != first.lease.token_hash


def test_a_report_can_claim_the_next_lease_running(rig: Rig) -> None:
    rig.task()
    rig.task()
    won = _claim_started(rig)
    ended, following = rig.svc.handover.report_then_claim(
        WORKER,
        won.lease.id,
        ReportKind.COMPLETE,
        {},
        NextClaim(worker_id="w1", claim_id="next-1", start=True),
    )
    assert ended.state is LeaseState.COMPLETED
    assert following is not None and following.lease.state is LeaseState.RUNNING


def _record(old: Lease, new: Lease, sequence: str) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeSerializer

    image = TypeSerializer()

    def dumped(lease: Lease) -> dict[str, Any]:
        row = {"PK": f"LEASE#{lease.id}", "SK": "LEASE", **items.lease_item(lease)}
        return {k: image.serialize(v) for k, v in row.items() if v is not None}

    return {
        "eventID": sequence,
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/x",
        "dynamodb": {
            "SequenceNumber": sequence,
            "OldImage": dumped(old),
            "NewImage": dumped(new),
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


class Bus:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def publish_batch(self, source: str, entries: list[tuple[str, dict[str, Any]]]) -> list[int]:
        self.sent.extend(entries)
        return []


def test_with_every_transition_published_the_reactor_publishes_both_and_writes_no_row(
    rig: Rig,
) -> None:
    _, pending = rig.task()
    assert pending is not None
    won = _claim_started(rig)
    running = rig.lease(won.lease.id)
    told = lease_events(pending, running)
    assert [e.type for e in told] == ["lease.claimed", "lease.started"]
    assert told == stamped_events(running)[-2:], "both are the row's stamps"
    bus = Bus()
    rows_before = dict(rig.store.timelines)
    answer = handle(
        {"Records": [_record(pending, running, "1")]},
        None,
        rig.store,
        rig.svc,
        outbound=bus,
        publishing="all",  # OutboundEvents all: the default publishes endings only
    )
    assert answer == {"batchItemFailures": []}
    assert [(t, d["state"]) for t, d in bus.sent] == [
        ("lease.claimed", "dispatched"),
        ("lease.started", "running"),
    ]
    assert [d["id"] for _, d in bus.sent] == [e.id for e in told]
    assert rig.store.timelines == rows_before, "stamped: no timeline row for either"


def test_a_table_an_earlier_release_migrated_claims_alone_until_migrated(rig: Rig) -> None:
    # A reactor of that release tells one event per row change: it must not meet a claim
    # that is also a start, so until the migrate the lease is claimed dispatched.
    rig.store.schema = SchemaState(version=CLAIM_START_FROM_SCHEMA - 1, step=2)
    rig.task()
    before = _claim_started(rig)
    assert before.lease.state is LeaseState.DISPATCHED
    assert before.lease.tl is not None and "s" not in before.lease.tl

    outcomes = {o.name: o.status for o in migrate(rig.store)}
    assert outcomes["claims-that-start"] == "applied"
    rig.advance(31)  # the kernel reads the schema row at most once per pool cache period
    rig.task()
    after = _claim_started(rig, worker_id="w2")
    assert after.lease.state is LeaseState.RUNNING
