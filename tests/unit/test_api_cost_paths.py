"""The request-saving paths of the worker routes: the claim answer carries the
payload, and a final report may claim the worker's next lease in the same call."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import models as m
from tenure.domain import errors as e
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import WORKER, Rig, as_lease, shaped


@pytest.fixture
def http(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(method: str, path: str, body: Any, actor: Principal) -> tuple[int, Any]:
        raw = json.dumps(body) if body is not None else ""
        event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw.encode())
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        text = out.get("body") or ""
        return out["statusCode"], json.loads(text) if text else None

    return call


def claim(http: Any, worker_id: str = "w1") -> dict[str, Any]:
    status, data = http("POST", "/pools/builders/claim", {"worker_id": worker_id}, WORKER)
    assert status == 200
    return dict(data)


def nxt(worker_id: str = "w1", claim_id: str = "c-2") -> dict[str, Any]:
    return {"worker_id": worker_id, "claim_id": claim_id}


# ------------------------------------------------------------------ payload in the claim


def test_the_claim_answer_carries_the_same_bundle_as_get_payload(http: Any, rig: Rig) -> None:
    rig.task(title="Deploy", body="ship it")
    data = claim(http)
    shaped(m.Claimed, data)  # the OpenAPI model describes the answer
    lease_id = data["lease"]["id"]
    status, fetched = http("GET", f"/leases/{lease_id}/payload", None, as_lease(lease_id))
    assert status == 200
    assert data["payload"] == fetched
    assert data["payload"]["subject"]["title"] == "Deploy"
    assert data["payload"]["lease"] == data["lease"]
    assert data["token"] not in json.dumps(data["payload"])


def test_a_bundle_that_cannot_be_read_leaves_the_claim_won_with_a_null_payload(
    http: Any, rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.task()

    def throttled(*_: Any, **__: Any) -> Any:
        raise e.Unavailable("the table is throttling", retry_after=1)

    monkeypatch.setattr(rig.store, "timeline", throttled)
    data = claim(http)
    assert data["payload"] is None and data["token"]
    assert rig.lease(data["lease"]["id"]).state.value == "dispatched"  # the claim stands


# ------------------------------------------------------------ complete claims the next


def test_complete_with_next_ends_the_lease_and_claims_the_next_one(http: Any, rig: Rig) -> None:
    rig.task(title="first")
    rig.task(title="second")
    first = claim(http)["lease"]["id"]
    body = {"outcome": "success", "next": nxt()}
    status, data = http("POST", f"/leases/{first}/complete", body, WORKER)
    assert status == 200
    shaped(m.ReportAnswer, data)
    assert data["lease"]["state"] == "completed"
    won = data["next"]
    second = rig.lease(won["lease"]["id"])
    assert (second.state.value, second.worker_id, second.claimed_by) == (
        "dispatched",
        "w1",
        WORKER.token_id,  # held by the worker token: its worker heartbeat renews it
    )
    assert won["payload"]["subject"]["title"] == "second"
    assert second.token_hash == won["claim_token_hash"] and won["token"]
    assert rig.lease(first).report_fingerprint is not None
    assert "next" not in json.dumps(rig.lease(first).report)  # not part of the report
    beats = rig.svc.reports.worker_heartbeat(WORKER, "w1", [(second.id, second.fence)])
    assert not isinstance(beats[0][2], e.TenureError)


def test_the_same_complete_with_next_sent_again_claims_nothing_more(http: Any, rig: Rig) -> None:
    for title in ("a", "b", "c"):
        rig.task(title=title)
    first = claim(http)["lease"]["id"]
    body = {"next": nxt(claim_id="c-once")}
    _, one = http("POST", f"/leases/{first}/complete", body, WORKER)
    status, two = http("POST", f"/leases/{first}/complete", body, WORKER)
    assert status == 200 and two["lease"] == one["lease"]
    assert two["next"]["lease"]["id"] == one["next"]["lease"]["id"]
    assert two["next"]["token"] != one["next"]["token"]  # the lost token is dead
    assert rig.lease(one["next"]["lease"]["id"]).token_hash == two["next"]["claim_token_hash"]
    # Of three tasks, the first and the one claimed by `next` are out: exactly one is left.
    assert rig.svc.claims.claim(WORKER, "builders", "w9", None, 0, None) is not None
    assert rig.svc.claims.claim(WORKER, "builders", "w9", None, 0, None) is None


def test_fail_with_next_claims_too_and_an_empty_queue_answers_next_null(
    http: Any, rig: Rig
) -> None:
    rig.task()
    first = claim(http)["lease"]["id"]
    body = {"error": "boom", "next": nxt()}
    status, data = http("POST", f"/leases/{first}/fail", body, WORKER)
    assert status == 200
    assert (data["lease"]["state"], data["next"]) == ("failed", None)


def test_complete_without_next_answers_exactly_the_lease(http: Any, rig: Rig) -> None:
    rig.task()
    first = claim(http)["lease"]["id"]
    status, data = http("POST", f"/leases/{first}/complete", {}, as_lease(first))
    assert status == 200 and set(data) == {"lease"}


def test_next_for_another_worker_is_stale_and_the_lease_stays_held(http: Any, rig: Rig) -> None:
    rig.task()
    rig.task()
    first = claim(http)["lease"]["id"]
    body = {"next": nxt(worker_id="someone-else")}
    status, data = http("POST", f"/leases/{first}/complete", body, WORKER)
    assert (status, data["error"]["code"]) == (409, "stale_lease")
    assert rig.lease(first).state.value == "dispatched"  # refused before anything was written


def test_next_from_another_leases_token_is_a_token_mismatch(http: Any, rig: Rig) -> None:
    rig.task()
    rig.task()
    first = claim(http)["lease"]["id"]
    other = claim(http, "w2")["lease"]["id"]
    status, data = http("POST", f"/leases/{first}/complete", {"next": nxt()}, as_lease(other))
    assert (status, data["error"]["code"]) == (403, "lease_token_mismatch")
    assert rig.lease(first).state.value == "dispatched"


def test_a_lease_not_won_by_a_worker_claims_nothing(
    http: Any, rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.task()
    rig.task()
    first = claim(http)["lease"]["id"]
    real = rig.store.get_lease

    def unclaimed(lease_id: str, consistent: bool = True) -> Any:
        found = real(lease_id, consistent)
        return dataclasses.replace(found, claimed_by=None) if lease_id == first else found

    monkeypatch.setattr(rig.store, "get_lease", unclaimed)
    status, data = http("POST", f"/leases/{first}/complete", {"next": nxt()}, WORKER)
    assert (status, data["error"]["code"]) == (409, "invalid_transition")
    assert real(first).state.value == "dispatched"


def test_next_without_a_claim_id_is_validation_failed(http: Any, rig: Rig) -> None:
    rig.task()
    first = claim(http)["lease"]["id"]
    body = {"next": {"worker_id": "w1"}}
    status, data = http("POST", f"/leases/{first}/complete", body, WORKER)
    assert (status, data["error"]["code"]) == (422, "validation_failed")
    assert "claim_id" in data["error"]["message"]


def test_next_claims_only_on_the_pool_of_the_ended_lease(http: Any, rig: Rig) -> None:
    rig.make_pool("other")
    rig.task()
    rig.task(pool="other")
    first = claim(http)["lease"]["id"]
    status, data = http("POST", f"/leases/{first}/complete", {"next": nxt()}, WORKER)
    assert status == 200 and data["next"] is None  # the other pool's lease stays queued


def test_a_stale_complete_with_next_claims_nothing(http: Any, rig: Rig) -> None:
    rig.task()
    rig.task()
    first = claim(http)["lease"]["id"]
    body = {"fence": 7, "next": nxt()}
    status, data = http("POST", f"/leases/{first}/complete", body, WORKER)
    assert (status, data["error"]["code"]) == (409, "stale_lease")
    assert rig.svc.claims.claim(WORKER, "builders", "w9", None, 0, None) is not None  # still queued
