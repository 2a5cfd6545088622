"""A work bundle (a claim's answer, GET payload) takes the stamps of the lease it is about
from the row in hand — the row the claim just wrote, or the one the request read consistently
— instead of reading that row again, on DynamoDB Local: the activity is the same as a fresh
read of the task's timeline gives, and no lease row is read for it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


class LeaseRowReads:
    """The lease rows the store's client reads by key (GetItem, BatchGetItem), counted."""

    def __init__(self, rig: Rig) -> None:
        self.keys: list[str] = []
        rig.store.client.meta.events.register("before-parameter-build.dynamodb", self._seen)

    def _seen(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem":
            keys = [params["Key"]]
        elif model.name == "BatchGetItem":
            keys = [key for ask in params["RequestItems"].values() for key in ask["Keys"]]
        else:
            return
        self.keys.extend(str(key["PK"]["S"]) for key in keys if "LEASE#" in str(key["PK"]))


@pytest.fixture
def world(rig: Rig) -> Rig:
    make_world(rig.svc)
    return rig


def _fresh_activity(rig: Rig, task_id: str) -> list[str]:
    """The task's recent activity as a read with nothing in hand gives it."""
    return [f"{e.type}@{e.lease_id}" for e in rig.store.timeline("task", task_id, 200)[-20:]]


def _bundle_activity(bundle: dict[str, Any]) -> list[str]:
    return [f"{e['type']}@{e['lease_id']}" for e in bundle["subject"]["activity"]]


def test_a_claim_s_bundle_reads_no_lease_row_and_shows_what_a_fresh_read_shows(
    world: Rig,
) -> None:
    task, _ = world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    won = world.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, start=True)
    assert won is not None
    reads = LeaseRowReads(world)
    bundle = world.svc.payloads.claimed_payload(won.lease)
    assert bundle is not None
    assert reads.keys == []
    shown = _bundle_activity(bundle)
    assert shown == _fresh_activity(world, task.id)
    assert shown == [
        f"{t}@{won.lease.id}" for t in ("lease.created", "lease.claimed", "lease.started")
    ]


def test_a_retry_s_bundle_still_reads_the_earlier_lease_it_does_not_hold(world: Rig) -> None:
    """Only the row in hand is spared: the task's earlier lease, released back to the queue,
    is read (its end is the next lease's prior attempt) and shown as a fresh read shows it."""
    task, first = world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    assert first is not None
    won = world.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    world.svc.reports.release(lease_principal(won.lease.id), won.lease.id, {})
    world.pump.drain()  # the reactor's rows: the next lease's anchor on the task's timeline
    retry = world.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert retry is not None and retry.lease.id != won.lease.id
    reads = LeaseRowReads(world)
    bundle = world.svc.payloads.claimed_payload(retry.lease)
    assert bundle is not None
    assert f"LEASE#{first.id}" in reads.keys
    assert f"LEASE#{retry.lease.id}" not in reads.keys
    assert _bundle_activity(bundle) == _fresh_activity(world, task.id)
    prior = bundle["subject"]["prior_attempts"]
    assert [p["lease_id"] for p in prior] == [won.lease.id]
    assert prior[0]["ended"] == "released"


def test_get_payload_takes_the_stamps_from_the_row_its_token_check_read(world: Rig) -> None:
    task, _ = world.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    won = world.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    reads = LeaseRowReads(world)
    bundle = world.svc.payloads.payload(lease_principal(won.lease.id), won.lease.id)
    assert reads.keys == [f"LEASE#{won.lease.id}"]  # its own check's consistent read alone
    assert _bundle_activity(bundle) == _fresh_activity(world, task.id)
