"""The reactor publishes lease and task transitions on the bus: batched, at least once, with
an id to de-duplicate on and nothing a worker reported beyond the outcome; which of them go out
is the OutboundEvents setting (endings by default, all, none)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from tenure.app.leases.orphans import ORPHAN_AFTER_MS
from tenure.app.ports import Change
from tenure.app.tasks.filing import TaskLinks
from tenure.domain import outbound as out
from tenure.domain.errors import Unavailable
from tenure.domain.events import LEASE_COMPLETED
from tenure.domain.model import Lease, TaskGraph
from tenure.domain.states import LeaseState
from tenure.store import items
from tenure.store.codec import dump
from tenure.store.events import EventBridgePublisher
from tenure.triggers import stream
from tenure.triggers.stream import handle, outbound_events

from tests.unit.support import MEMBER, POOL, WORKER, Rig, as_lease, emitted_metrics


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
    entry, told = bus.sent()
    assert told["DetailType"] == "task.completed"  # its task is linked to nothing
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


# ------------------------------------------------------------------ OutboundEvents settings


def _sent(rig: Rig, records: list[dict[str, Any]], setting: str) -> list[dict[str, Any]]:
    bus = FakeBus()
    answer = handle(
        {"Records": records},
        None,
        rig.store,
        rig.svc,
        EventBridgePublisher(bus, "b"),
        publishing=setting,
    )
    assert answer["batchItemFailures"] == []
    return [{"type": e["DetailType"], **json.loads(e["Detail"])} for e in bus.sent()]


def test_a_claim_is_published_only_when_every_transition_is(rig: Rig) -> None:
    pending = rig.task()[1]
    assert pending is not None
    claimed = rig.claim().lease
    record = _record(1, pending, claimed)
    assert [e["type"] for e in _sent(rig, [record], out.ALL)] == ["lease.claimed"]
    assert _sent(rig, [record], out.ENDINGS) == []
    assert _sent(rig, [record], out.NONE) == []


def test_a_failed_run_is_the_end_of_its_lease_and_of_its_task(rig: Rig) -> None:
    running = rig.running()
    failed = rig.svc.reports.fail(as_lease(running.id), running.id, {"error": "exit 2"})
    record = _record(1, running, failed)
    sent = _sent(rig, [record], out.ENDINGS)
    assert [e["type"] for e in sent] == ["lease.failed", "task.failed"]
    task_event = sent[1]
    assert (task_event["task_id"], task_event["space"], task_event["pool"]) == (
        failed.task_id,
        failed.space,
        failed.pool,
    )
    assert task_event["status"] == "failed" and task_event["lease_id"] == failed.id
    assert task_event["id"] == f"{failed.id}.v{failed.version:06d}.task.failed"
    assert [e["type"] for e in _sent(rig, [record], out.ALL)] == ["lease.failed", "task.failed"]
    assert _sent(rig, [record], out.NONE) == []


def test_a_failure_the_pool_retries_does_not_end_the_task(rig: Rig) -> None:
    rig.make_pool("retrying", retry={"on_failure": True, "max_attempts": 3})
    running = rig.running(pool="retrying")
    failed = rig.svc.reports.fail(as_lease(running.id), running.id, {"error": "flaky"})
    assert (failed.event_data or {}).get("retry_scheduled")
    sent = _sent(rig, [_record(1, running, failed)], out.ENDINGS)
    assert [e["type"] for e in sent] == ["lease.failed"]


def test_a_success_of_a_task_linked_to_nothing_is_told_by_its_lease(rig: Rig) -> None:
    """No graph row records it: the lease's record tells the task's completion, with the id
    a graph row's would have had, once however often it is delivered."""
    running = rig.running()
    done = rig.svc.reports.complete(as_lease(running.id), running.id, {"outcome": "success"})
    assert done.task_id is not None
    record = _record(1, running, done)
    for _ in range(2):  # a redelivery tells it again under the same id
        sent = _sent(rig, [record], out.ENDINGS)
        assert [e["type"] for e in sent] == ["lease.completed", "task.completed"]
        assert sent[1]["id"] == f"{done.task_id}.succeeded.{done.ended_at}"
        assert (sent[1]["task_id"], sent[1]["status"], sent[1]["lease_id"]) == (
            done.task_id,
            "completed",
            done.id,
        )
    assert rig.store.get_graph(done.task_id) == TaskGraph(done.task_id)  # no row written
    assert _sent(rig, [record], out.NONE) == []


def test_a_success_ends_the_task_when_its_graph_row_says_so(rig: Rig) -> None:
    """A lease's success is its end; the completion of a task something is linked to (here a
    dependent) is told by the graph row's `succeeded_at` (a parent with children outstanding
    has not completed yet)."""
    running = rig.running()
    assert running.task_id is not None
    rig.task(links=TaskLinks(depends_on=(running.task_id,)))
    done = rig.svc.reports.complete(as_lease(running.id), running.id, {"outcome": "success"})
    assert [e["type"] for e in _sent(rig, [_record(1, running, done)], out.ENDINGS)] == [
        "lease.completed"
    ]
    assert done.task_id is not None
    graph = TaskGraph(done.task_id, succeeded_at=done.ended_at)
    task = rig.store.get_task(done.task_id)
    assert task is not None
    for setting in (out.ENDINGS, out.ALL):
        (sent,) = outbound_events(rig.svc, "graph", TaskGraph(done.task_id), graph, [], setting)
        assert sent.detail_type == "task.completed"
        assert {k: sent.detail[k] for k in ("task_id", "task_key", "space", "pool")} == {
            "task_id": task.id,
            "task_key": task.key,
            "space": task.space,
            "pool": task.pool,
        }
        assert sent.detail["id"] == f"{task.id}.succeeded.{done.ended_at}"
    assert outbound_events(rig.svc, "graph", None, graph, [], out.NONE) == []
    # Once it has succeeded, a later change of the row is no second completion.
    assert outbound_events(rig.svc, "graph", graph, graph, [], out.ENDINGS) == []


def test_a_task_parked_in_needs_attention_is_one_of_its_endings(rig: Rig) -> None:
    task, _ = rig.task()
    parked = replace(task, attention=True, version=task.version + 1, event_type="task.escalated")
    (sent,) = outbound_events(rig.svc, "task", task, parked, [], out.ENDINGS)
    assert sent.detail_type == "task.needs_attention"
    assert sent.detail["id"] == f"{task.id}.v{parked.version:06d}.needs_attention"
    assert outbound_events(rig.svc, "task", task, parked, [], out.NONE) == []
    assert outbound_events(rig.svc, "task", parked, parked, [], out.ENDINGS) == []


def test_an_unknown_setting_is_refused_and_none_given_means_the_default() -> None:
    assert out.setting_of(None) == out.ENDINGS == out.setting_of("")
    for good in ("endings", "all", "none"):
        assert out.setting_of(good) == good
    with pytest.raises(ValueError, match="endings, all, none"):
        out.setting_of("terminal")


def _orphan_ended(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[Lease, Lease]:
    """A filing that died between its lease's write and its task's, then the claim that ended
    that lease once its filing was taken for dead: (the lease as left, the lease as ended)."""
    real = rig.store.commit

    def dies(change: Change) -> None:
        if change.tasks and not change.leases:
            raise RuntimeError("the filing's process died here")
        real(change)

    monkeypatch.setattr(rig.store, "commit", dies)
    with pytest.raises(RuntimeError):
        rig.task()
    monkeypatch.undo()
    [left] = [row.lease for row in rig.store.lease_rows.values()]
    rig.advance(ORPHAN_AFTER_MS / 1000 + 1)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    ended = rig.lease(left.id)
    assert ended.state is LeaseState.CANCELLED and ended.tp
    return left, ended


def test_the_end_of_a_lease_whose_filing_died_announces_no_task_ending(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, ended = _orphan_ended(rig, monkeypatch)
    assert out.task_ending_of_lease(left, ended) is None
    record = _record(1, left, ended)
    # Nor is it reacted to as a task's end: no creator to wake, no delegated run to stop.
    reacted: list[str] = []
    monkeypatch.setattr(rig.svc.kernel, "task_as_filed", lambda t: reacted.append("wake"))
    monkeypatch.setattr(
        rig.store, "graph_edges", lambda *a, **k: reacted.append("stop children") or []
    )
    assert [e["type"] for e in _sent(rig, [record], out.ENDINGS)] == ["lease.cancelled"]
    assert "task.cancelled" not in [e["type"] for e in _sent(rig, [record], out.ALL)]
    assert reacted == []


def test_a_real_tasks_pending_lease_cancelled_before_any_claim_still_ends_its_task(
    rig: Rig,
) -> None:
    _, pending = rig.task()
    assert pending is not None and pending.tp  # never claimed: it keeps its mark
    cancelled = rig.svc.operator.cancel(MEMBER, pending.id)
    assert cancelled.tp
    sent = _sent(rig, [_record(1, pending, cancelled)], out.ENDINGS)
    assert [e["type"] for e in sent] == ["lease.cancelled", "task.cancelled"]
    assert sent[1]["task_id"] == pending.task_id


@pytest.mark.parametrize("setting", [out.ENDINGS, out.ALL, out.NONE])
def test_the_reactor_counts_an_ending_for_the_dashboard_whatever_it_publishes(
    rig: Rig, setting: str
) -> None:
    # The dashboard's completions line is the reactor's LeasesCompleted: it counts the ending
    # the record stands for, not the bus entry, so publishing nothing still counts it.
    running, done = _completed(rig)
    publisher = EventBridgePublisher(FakeBus(), "tenure-events")
    tally: Counter[str] = Counter()
    record = _record(1, running, done)
    handle({"Records": [record]}, None, rig.store, rig.svc, publisher, tally, setting)
    assert tally == Counter({LEASE_COMPLETED: 1})


def test_a_record_that_fails_is_not_counted(rig: Rig) -> None:
    running, done = _completed(rig)
    publisher = EventBridgePublisher(FakeBus(refuse={f"{done.id}.v{done.version:06d}"}), "b")
    tally: Counter[str] = Counter()
    answer = handle(
        {"Records": [_record(1, running, done)]}, None, rig.store, rig.svc, publisher, tally
    )
    assert answer["batchItemFailures"]  # delivered again, and counted then
    assert tally == Counter()


class Said:
    """A logger's error and exception lines, as (message, extra)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, message: str, *, extra: dict[str, Any], **_: Any) -> None:
        self.lines.append((message, extra))


def test_a_record_that_raises_is_logged_with_its_sequence_number_and_the_error(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The operator reads the reactor's log for a failed record's error: the dead-letter
    # message names only a range of the shard.
    running, done = _completed(rig)
    said = Said()
    monkeypatch.setattr(stream.logger, "exception", said)
    poison = _record(2, running, done)
    poison["dynamodb"]["NewImage"]["state"] = {"S": "exploded"}
    records = [_record(1, running, done), poison, _record(3, running, done)]
    answer = handle({"Records": records}, None, rig.store, rig.svc, None)
    assert answer["batchItemFailures"] == [{"itemIdentifier": f"{2:021d}"}]
    ((message, extra),) = said.lines
    assert "delivers it again" in message
    assert extra["sequence_number"] == f"{2:021d}" and "exploded" in extra["error"]


def test_records_whose_events_the_bus_refused_are_logged_by_sequence_number(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    running, done = _completed(rig)
    said = Said()
    monkeypatch.setattr(stream.logger, "error", said)
    bus = FakeBus(refuse={f"{done.id}.v{done.version:06d}"})
    records = [_record(1, running, done)]
    handle({"Records": records}, None, rig.store, rig.svc, EventBridgePublisher(bus, "b"))
    ((message, extra),) = said.lines
    assert "refused" in message and extra["sequence_numbers"] == [f"{1:021d}"]


def test_the_function_counts_the_records_it_failed_as_a_metric(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    running, done = _completed(rig)
    poison = _record(2, running, done)
    poison["dynamodb"]["NewImage"]["state"] = {"S": "exploded"}
    monkeypatch.setattr(stream.wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(stream.wiring, "publisher", lambda: None)
    monkeypatch.setattr(stream.logger, "exception", Said())
    stream.lambda_handler({"Records": [_record(1, running, done), poison]}, None)
    assert emitted_metrics(capsys.readouterr().out)["ReactorRecordsFailed"] == 1.0
    # A batch whose every record fails is a function error: counted all the same.
    with pytest.raises(Exception, match="All records failed"):
        stream.lambda_handler({"Records": [poison, poison]}, None)
    assert emitted_metrics(capsys.readouterr().out) == {"ReactorRecordsFailed": 2.0}


class Throttled:
    """A PutEvents client that answers its first `refusals` calls with `code`: as the entry's
    ErrorCode, or as the whole call's error."""

    def __init__(self, refusals: int, code: str, whole_call: bool = False) -> None:
        self.refusals, self.code, self.whole_call = refusals, code, whole_call
        self.calls = 0

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        if self.calls > self.refusals:
            return {"FailedEntryCount": 0, "Entries": [{"EventId": "x"} for _ in Entries]}
        if self.whole_call:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": self.code, "Message": "slow"}}, "PutEvents")
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": self.code}]}


@pytest.mark.parametrize("whole_call", [False, True], ids=["entry", "call"])
def test_one_event_the_bus_throttled_is_sent_again_within_a_bound(whole_call: bool) -> None:
    # A wake is written to its timeline before it is sent, so the stream's redelivery never
    # sends it: the only second chance a throttled one gets is here.
    slept: list[float] = []
    client = Throttled(2, "ThrottlingException", whole_call)
    EventBridgePublisher(client, "b", sleep=slept.append).publish("tenure", "t", {"id": "e"})
    assert client.calls == 3 and len(slept) == 2 and sum(slept) <= 1
    client = Throttled(3, "ThrottlingException", whole_call)
    with pytest.raises(Unavailable, match="ThrottlingException"):
        EventBridgePublisher(client, "b", sleep=slept.append).publish("tenure", "t", {})
    assert client.calls == 3


def test_an_event_the_bus_refuses_for_what_it_is_is_not_sent_again() -> None:
    client = Throttled(1, "MalformedDetail")
    with pytest.raises(Unavailable, match="MalformedDetail"):
        EventBridgePublisher(client, "b", sleep=lambda _: None).publish("tenure", "t", {})
    assert client.calls == 1
