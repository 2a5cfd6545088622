"""Attacks on the worker function's own composition (the worker's use cases built alone, as
the deployed function builds them, not the whole service's) on DynamoDB Local: what a
worker does through it — a failure in a pool that retries, a completion naming the task its
lease token filed (and one it did not), a completion that claims the next lease, a claim
under a full ceiling, and a replaced lease token — lands as it does through the HTTP API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import tokens, worker
from tenure.api.authorizer import authorize
from tenure.domain.states import LeaseState
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, Rig

RETRY = {
    "on_failure": True,
    "backoff": {"initial_seconds": 10, "multiplier": 2, "max_seconds": 600, "jitter": False},
}


@pytest.fixture
def alone(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Rig:
    """The worker function on its own composition over the rig's table; the HTTP API on the
    whole service."""
    make_world(rig.svc)
    composed = wiring.build_worker_service(rig.store, rig.clock)
    assert composed is not rig.svc.core
    monkeypatch.setattr(wiring, "worker_service", lambda: composed)
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    return rig


def _url(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    head = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    out = worker.handle(to_event(method, f"/api/v1{path}", head, raw), None)
    return out["statusCode"], json.loads(out.get("body") or "null")


def _api(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    head = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    event = to_event(method, f"/api/v1{path}", head, raw)
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    out = api.handle(event, None)
    return out["statusCode"], json.loads(out.get("body") or "null")


def _worker(rig: Rig) -> str:
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None)
    return raw


def _file(rig: Rig, n: int = 1) -> None:
    for _ in range(n):
        rig.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, 3)
        rig.clock.advance(0.01)


def _claim(raw: str, worker_id: str = "w-1", claim_id: str | None = None) -> tuple[int, Any]:
    body: dict[str, Any] = {"worker_id": worker_id}
    if claim_id is not None:
        body["claim_id"] = claim_id
    return _url("POST", f"/pools/{ALPHA}/claim", raw, body)


def _pending(rig: Rig) -> list[str]:
    return list(rig.store.queue_candidates(ALPHA, 100))


def test_a_failure_through_the_worker_s_own_composition_schedules_the_pool_s_retry(
    alone: Rig,
) -> None:
    alone.svc.pools.update_pool(ADMIN, ALPHA, {"retry": RETRY})
    _file(alone)
    status, won = _claim(_worker(alone))
    assert status == 200
    lease_id = won["lease"]["id"]
    status, failed = _url("POST", f"/leases/{lease_id}/fail", won["token"], {"error": "boom"})
    assert (status, failed["lease"]["state"]) == (200, "failed"), failed
    [retry] = _pending(alone)
    again = alone.store.get_lease(retry)
    assert again is not None and again.job_id != won["lease"]["job_id"], "a new run: the retry"


def test_a_completion_through_it_checks_the_tasks_it_names_as_the_api_does(alone: Rig) -> None:
    _file(alone, 2)
    status, won = _claim(_worker(alone))
    assert status == 200
    lease_id, token = won["lease"]["id"], won["token"]
    # The lease token files a child on the HTTP API (an operator route it may use).
    status, filed = _api("POST", "/tasks", token, {"space": SPACE, "title": "child"})
    assert status == 201, filed
    child = filed["task"]["id"] if "task" in filed else filed["id"]
    other = next(iter(alone.store.queue_candidates(ALPHA, 100)))
    not_mine = alone.store.get_lease(other)
    assert not_mine is not None and not_mine.task_id is not None
    bad = {"outcome": "success", "created_task_ids": [not_mine.task_id]}
    status, refused = _url("POST", f"/leases/{lease_id}/complete", token, bad)
    assert (status, refused["error"]["code"]) == (422, "unverified_created_tasks"), refused
    good = {"outcome": "success", "created_task_ids": [child]}
    status, done = _url("POST", f"/leases/{lease_id}/complete", token, good)
    assert (status, done["lease"]["state"]) == (200, "completed"), done


def test_a_completion_with_next_through_it_claims_the_next_lease_once(alone: Rig) -> None:
    _file(alone, 3)
    raw = _worker(alone)
    status, won = _claim(raw)
    assert status == 200
    body = {"outcome": "success", "next": {"worker_id": "w-1", "claim_id": "n-1"}}
    path = f"/leases/{won['lease']['id']}/complete"
    status, first = _url("POST", path, raw, body)
    assert status == 200 and first["next"] is not None, first
    status, again = _url("POST", path, raw, body)  # its answer lost: the same next lease
    assert status == 200 and again["next"]["lease"]["id"] == first["next"]["lease"]["id"]
    assert len(_pending(alone)) == 1, "one next lease taken, one left"


def test_a_full_ceiling_holds_through_it(alone: Rig) -> None:
    alone.svc.pools.update_pool(ADMIN, ALPHA, {"max_active": 1})
    _file(alone, 2)
    raw = _worker(alone)
    assert _claim(raw, "w-1")[0] == 200
    assert _claim(raw, "w-2")[0] == 204
    assert len(_pending(alone)) == 1


def test_a_replaced_lease_token_is_refused_through_it(alone: Rig) -> None:
    _file(alone)
    raw = _worker(alone)
    status, first = _claim(raw, claim_id="c-1")
    assert status == 200
    lease_id, spent = first["lease"]["id"], first["token"]
    assert _url("POST", f"/leases/{lease_id}/heartbeat", spent, {})[0] == 200
    status, again = _claim(raw, claim_id="c-1")
    assert status == 200 and again["lease"]["id"] == lease_id
    status, refused = _url("POST", f"/leases/{lease_id}/complete", spent, {"outcome": "success"})
    assert status == 401, refused
    stored = alone.store.get_lease(lease_id)
    assert stored is not None and stored.state is LeaseState.RUNNING, "nothing reported"
