"""How OneTable ends a failed call: bounded retries on throttles, honest domain errors.

No engine can be made to throttle, so botocore's Stubber plays DynamoDB's answers to a real
client (requests are still validated against the service model).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.stub import Stubber
from tenure.app.ports import Ceiling, Change, JobWrite, LeaseWrite
from tenure.domain.errors import AlreadyExists, CeilingReached, Conflict, Unavailable
from tenure.domain.model import Job, Space, Worker, Workflow
from tenure.domain.states import SubjectKind
from tenure.store.calls import BACKOFF_BASE_S, RETRY_AFTER_S, TRIES, Retry, StoreRejected
from tenure.store.dynamo import OneTable

from tests.unit.support import T0, make_lease

THROTTLE_CODES = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
]


class Rig:
    def __init__(self) -> None:
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
        )
        self.stub = Stubber(client)
        self.slept: list[float] = []
        # The largest jitter every time: the bound is what is asserted.
        self.store = OneTable(client, "t", Retry(sleep=self.slept.append, jitter=lambda: 1.0))

    def cancelled(self, *reasons: str | None, times: int = 1) -> None:
        for _ in range(times):
            self.stub.add_client_error(
                "transact_write_items",
                service_error_code="TransactionCanceledException",
                service_message="Transaction cancelled, please refer cancellation reasons",
                modeled_fields={"CancellationReasons": [{"Code": r or "None"} for r in reasons]},
            )

    def error(self, method: str, code: str, times: int = 1) -> None:
        for _ in range(times):
            self.stub.add_client_error(method, service_error_code=code, service_message="x")


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    with r.stub:
        yield r
    r.stub.assert_no_pending_responses()


def _job() -> Job:
    return Job(
        id="job_1",
        space="OPS",
        pool="p",
        subject_kind=SubjectKind.TASK,
        subject_id="task_1",
        created_at=T0,
        lease_id="lease_1",
        fence=1,
    )


def _change() -> Change:
    """Two writes: a transaction (a lease and its job)."""
    return Change(leases=[LeaseWrite(make_lease("lease_1"))], jobs=[JobWrite(_job())])


def _item(**attrs: str) -> dict[str, Any]:
    return {name: {"S": value} for name, value in attrs.items()}


# ------------------------------------------------------------------------- throttling


def test_a_transaction_cancelled_by_throttling_is_retried_then_unavailable(rig: Rig) -> None:
    rig.cancelled(None, "ThrottlingError", times=TRIES)
    with pytest.raises(Unavailable) as raised:
        rig.store.commit(_change())
    assert not isinstance(raised.value, Conflict)
    assert raised.value.retry_after == RETRY_AFTER_S
    assert raised.value.details["tries"] == TRIES
    # Full jitter, doubling: never more than 0.1 + 0.2 + 0.4 s asleep in all.
    assert rig.slept == [BACKOFF_BASE_S * 2**n for n in range(TRIES - 1)]
    assert sum(rig.slept) <= 0.7 + 1e-9


def test_a_throttled_transaction_that_then_lands_is_not_an_error(rig: Rig) -> None:
    rig.cancelled("ProvisionedThroughputExceeded", None, times=2)
    rig.stub.add_response("transact_write_items", {})
    rig.store.commit(_change())
    assert len(rig.slept) == 2


@pytest.mark.parametrize("code", THROTTLE_CODES)
def test_every_read_and_write_gives_up_on_a_throttle_as_unavailable(rig: Rig, code: str) -> None:
    calls = [
        ("get_item", lambda: rig.store.get_lease("lease_1")),
        ("query", lambda: rig.store.queue_candidates("p", 5)),
        ("batch_get_item", lambda: rig.store.get_leases(["lease_1"])),
        ("put_item", lambda: rig.store.put_workflow(Workflow("OPS", "ci", "CI", created_at=1))),
        ("update_item", lambda: rig.store.next_task_number("OPS")),
        ("transact_write_items", lambda: rig.store.commit(_change())),
    ]
    for method, call in calls:
        rig.error(method, code, times=TRIES)
        with pytest.raises(Unavailable):
            call()
    assert len(rig.slept) == len(calls) * (TRIES - 1)


def test_a_throttled_read_that_then_answers_returns_the_row(rig: Rig) -> None:
    rig.error("get_item", "ThrottlingException")
    rig.stub.add_response(
        "get_item",
        {
            "Item": {
                **_item(PK="SPACE#OPS", SK="SPACE", key="OPS", name="Ops"),
                "created_at": {"N": "1"},
            }
        },
    )
    space = rig.store.get_space("OPS")
    assert space == Space(key="OPS", name="Ops", created_at=1)
    assert len(rig.slept) == 1


# --------------------------------------------------------------- lost conditions


def test_a_lost_condition_in_a_transaction_is_a_conflict_at_once(rig: Rig) -> None:
    rig.cancelled("ConditionalCheckFailed", None)
    with pytest.raises(Conflict) as raised:
        rig.store.commit(_change())
    assert type(raised.value) is Conflict
    assert raised.value.details["reasons"] == ["ConditionalCheckFailed", "None"]
    assert rig.slept == []


def test_a_transaction_conflict_is_a_conflict_not_a_throttle(rig: Rig) -> None:
    rig.cancelled(None, "TransactionConflict")
    with pytest.raises(Conflict):
        rig.store.commit(_change())
    rig.error("transact_write_items", "TransactionConflictException")
    with pytest.raises(Conflict):
        rig.store.commit(_change())
    assert rig.slept == []


def test_a_lost_condition_beats_a_throttle_in_the_same_cancellation(rig: Rig) -> None:
    # Sending it again would lose again: no retry.
    rig.cancelled("ThrottlingError", "ConditionalCheckFailed")
    with pytest.raises(Conflict):
        rig.store.commit(_change())
    assert rig.slept == []


def test_a_full_ceiling_alone_is_ceiling_reached(rig: Rig) -> None:
    rig.cancelled(None, None, "ConditionalCheckFailed")
    change = Change(
        leases=[LeaseWrite(make_lease("lease_1"))],
        jobs=[JobWrite(_job())],
        ceilings=[Ceiling("pool", "p", 1, limit=2)],
    )
    with pytest.raises(CeilingReached):
        rig.store.commit(change)


def test_a_single_conditional_write_that_loses_is_its_own_domain_error(rig: Rig) -> None:
    rig.error("put_item", "ConditionalCheckFailedException")
    with pytest.raises(AlreadyExists):
        rig.store.put_workflow(Workflow("OPS", "ci", "CI", created_at=1))
    assert rig.slept == []


# ------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "reasons", [("ValidationError", None), ("ConditionalCheckFailed", "ValidationError")]
)
def test_a_transaction_refused_as_invalid_is_never_a_conflict(
    rig: Rig, reasons: tuple[str | None, ...]
) -> None:
    rig.cancelled(*reasons)
    with pytest.raises(StoreRejected) as raised:
        rig.store.commit(_change())
    assert not isinstance(raised.value, Conflict)
    assert "ValidationError" in raised.value.reasons
    assert rig.slept == []


def test_a_malformed_read_is_rejected_not_retried(rig: Rig) -> None:
    rig.error("query", "ValidationException")
    with pytest.raises(StoreRejected):
        rig.store.queue_candidates("p", 5)
    assert rig.slept == []


# ----------------------------------------------------------------- unprocessed keys


def _batch(rows: list[str], unprocessed: list[str]) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "Responses": {"t": [_item(PK=f"LEASE#{i}", SK="LEASE", **_lease_attrs(i)) for i in rows]}
    }
    if unprocessed:
        answer["UnprocessedKeys"] = {
            "t": {"Keys": [_item(PK=f"LEASE#{i}", SK="LEASE") for i in unprocessed]}
        }
    return answer


def _lease_attrs(lease_id: str) -> dict[str, str]:
    lease = make_lease(lease_id)
    return {
        "id": lease.id,
        "job_id": lease.job_id,
        "space": lease.space,
        "pool": lease.pool,
        "subject_kind": lease.subject_kind.value,
        "subject_id": lease.subject_id,
        "state": lease.state.value,
    }


def test_unprocessed_keys_are_asked_for_again_until_all_are_read(rig: Rig) -> None:
    rig.stub.add_response("batch_get_item", _batch(["a"], ["b", "c"]))
    rig.stub.add_response("batch_get_item", _batch(["b"], ["c"]))
    rig.stub.add_response("batch_get_item", _batch(["c"], []))
    # The rows stubbed are partial leases: read them as rows, not entities.
    rows = rig.store.rows.batch_get([{"PK": f"LEASE#{i}", "SK": "LEASE"} for i in "abc"])
    assert sorted(r["id"] for r in rows) == ["a", "b", "c"]
    assert len(rig.slept) == 2


def test_keys_still_unprocessed_after_the_bound_make_the_read_unavailable(rig: Rig) -> None:
    for _ in range(TRIES):
        rig.stub.add_response("batch_get_item", _batch([], ["a"]))
    with pytest.raises(Unavailable) as raised:
        rig.store.rows.batch_get([{"PK": "LEASE#a", "SK": "LEASE"}])
    assert raised.value.retry_after == RETRY_AFTER_S
    assert len(rig.slept) == TRIES - 1


# ------------------------------------------------------------- connection failures


class Flaky:
    """A client whose calls fail with `errors` in turn, then answer `{}`."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.sent = 0

    def _answer(self, **_: Any) -> dict[str, Any]:
        self.sent += 1
        if self.errors:
            raise self.errors.pop(0)
        return {}

    get_item = put_item = update_item = _answer


def _flaky_store(*errors: Exception) -> tuple[OneTable, Flaky, list[float]]:
    client, slept = Flaky(*errors), []
    return OneTable(client, "t", Retry(sleep=slept.append, jitter=lambda: 1.0)), client, slept


def test_a_request_that_never_reached_the_table_is_sent_again_within_the_bound() -> None:
    refused = EndpointConnectionError(endpoint_url="http://ddb")
    store, client, _ = _flaky_store(refused, refused)
    store.note_worker(Worker(pool="p", worker_id="w", last_seen=T0))
    assert client.sent == 3
    store, client, slept = _flaky_store(*[refused] * TRIES)
    with pytest.raises(Unavailable):
        store.note_worker(Worker(pool="p", worker_id="w", last_seen=T0))
    assert client.sent == TRIES and len(slept) == TRIES - 1


def test_a_write_whose_answer_was_lost_is_not_sent_twice_but_a_read_is() -> None:
    lost = ReadTimeoutError(endpoint_url="http://ddb")
    store, client, _ = _flaky_store(lost)
    with pytest.raises(ReadTimeoutError):  # it may have landed: the caller must find out
        store.note_worker(Worker(pool="p", worker_id="w", last_seen=T0))
    assert client.sent == 1
    store, client, _ = _flaky_store(lost)
    assert store.get_lease("lease_1") is None
    assert client.sent == 2
