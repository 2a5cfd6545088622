"""The reactor publishes each lease and task transition on the bus: batched, at least once,
with an id to de-duplicate on and nothing a worker reported beyond the outcome."""

from __future__ import annotations

import json
from typing import Any

from tenure.domain.model import Lease
from tenure.store import items
from tenure.store.codec import dump
from tenure.store.events import EventBridgePublisher
from tenure.triggers.stream import handle

from tests.unit.support import Rig, as_lease


class FakeBus:
    """A PutEvents client: records each call, refuses the entries whose detail id it is told."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.refuse = refuse or set()

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(Entries)
        answers = [
            {"ErrorCode": "InternalFailure"}
            if json.loads(e["Detail"])["id"] in self.refuse
            else {"EventId": "x"}
            for e in Entries
        ]
        return {"FailedEntryCount": sum("ErrorCode" in a for a in answers), "Entries": answers}

    def sent(self) -> list[dict[str, Any]]:
        return [entry for call in self.calls for entry in call]


def _record(sequence: int, old: Lease | None, new: Lease) -> dict[str, Any]:
    change: dict[str, Any] = {
        "SequenceNumber": f"{sequence:021d}",
        "NewImage": dump(items.lease_item(new)),
    }
    if old is not None:
        change["OldImage"] = dump(items.lease_item(old))
    return {"eventName": "MODIFY", "eventSource": "aws:dynamodb", "dynamodb": change}


def _completed(rig: Rig) -> tuple[Lease, Lease]:
    running = rig.running()
    body = {"outcome": "success", "result": {"secret_answer": 42}, "details": "all green"}
    done = rig.svc.reports.complete(as_lease(running.id), running.id, body)
    return running, done


def test_a_completed_lease_is_published_as_lease_completed_without_its_result(rig: Rig) -> None:
    running, done = _completed(rig)
    bus = FakeBus()
    publisher = EventBridgePublisher(bus, "tenure-events")
    answer = handle({"Records": [_record(1, running, done)]}, None, rig.store, rig.svc, publisher)
    assert answer["batchItemFailures"] == []
    (entry,) = bus.sent()
    assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == (
        "tenure",
        "lease.completed",
        "tenure-events",
    )
    detail = json.loads(entry["Detail"])
    assert detail["id"] == f"{done.id}.v{done.version:06d}"
    assert {k: detail[k] for k in ("lease_id", "task_id", "space", "pool", "state", "outcome")} == {
        "lease_id": done.id,
        "task_id": done.task_id,
        "space": done.space,
        "pool": done.pool,
        "state": "completed",
        "outcome": "success",
    }
    assert "secret_answer" not in entry["Detail"] and "all green" not in entry["Detail"]
    assert "token" not in " ".join(detail)


def test_a_refused_event_fails_its_record_only_and_a_redelivery_publishes_it_again(
    rig: Rig,
) -> None:
    first, first_done = _completed(rig)
    second, second_done = _completed(rig)
    records = [_record(1, first, first_done), _record(2, second, second_done)]
    refused = f"{second_done.id}.v{second_done.version:06d}"
    bus = FakeBus(refuse={refused})
    answer = handle({"Records": records}, None, rig.store, rig.svc, EventBridgePublisher(bus, "b"))
    assert answer["batchItemFailures"] == [{"itemIdentifier": f"{2:021d}"}]
    assert len(bus.calls) == 1  # both in one PutEvents call
    bus.refuse.clear()
    again = handle(
        {"Records": records[1:]}, None, rig.store, rig.svc, EventBridgePublisher(bus, "b")
    )
    assert again["batchItemFailures"] == []
    ids = [json.loads(e["Detail"])["id"] for e in bus.sent()]
    assert ids.count(refused) == 2  # at least once: the consumer de-duplicates on the id


def test_a_batch_of_many_transitions_goes_out_ten_entries_a_call() -> None:
    bus = FakeBus()
    events = [("lease.created", {"id": f"l{n}.v000001"}) for n in range(23)]
    assert EventBridgePublisher(bus, "b").publish_batch("tenure", events) == set()
    assert [len(call) for call in bus.calls] == [10, 10, 3]


def test_a_failed_call_refuses_every_entry_it_carried() -> None:
    class Down(FakeBus):
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="https://events")

    events = [("task.created", {"id": f"t{n}.v000001"}) for n in range(12)]
    assert EventBridgePublisher(Down(), "b").publish_batch("tenure", events) == set(range(12))
