"""Attacks on a final report that starts from an eventually consistent copy of its lease, on
DynamoDB Local, whose copies are never behind: the store here answers a lease's copy from
what a replica behind the table would still hold. Whatever the copy shows, a report's answer
and what it writes are those the table's row calls for: a resend writes nothing again, and an
ended lease's report is refused as stale, never judged on the copy's say-so."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import tokens, worker
from tenure.api.authorizer import authorize
from tenure.app.leases.claims import Claimed
from tenure.app.rows import Rows
from tenure.app.tenure import Tenure, compose
from tenure.domain.events import (
    TASK_COMPLETION_HALLUCINATION_BLOCKED,
    TASK_COMPLETION_HALLUCINATION_SUSPECTED,
)
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState
from tenure.store.dynamo import OneTable
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

TOLERATION_S = 300  # the pool's default
# Shaped like a task id, naming none: a completion's result that says it made this task is
# recorded as a suspected hallucination, once.
MADE_UP = "task_0123456789abcdef0123"


class LaggingCopies:
    """The real store, whose eventually consistent copy of a lease in `copies` is that row
    (what a replica behind the table still holds)."""

    def __init__(self, inner: OneTable) -> None:
        self.inner = inner
        self.copies: dict[str, Lease] = {}
        self.served = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None:
        if not consistent and lease_id in self.copies:
            self.served += 1
            return self.copies[lease_id]
        return self.inner.get_lease(lease_id, consistent)


@pytest.fixture
def lagging(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[LaggingCopies, Tenure]:
    """A world, and the service as every endpoint runs it, on a store whose copies lag."""
    make_world(rig.svc)
    lag = LaggingCopies(rig.store)
    svc = compose(Rows.of(lag, lag), rig.clock, wiring.RandomIds())  # type: ignore[arg-type]
    monkeypatch.setattr(wiring, "service", lambda: svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: svc.core)
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    return lag, svc


def _running(rig: Rig, svc: Tenure) -> Claimed:
    svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    won = svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None, start=True)
    assert won is not None
    return won


def _stored(rig: Rig, lease_id: str) -> Lease:
    found = rig.store.get_lease(lease_id)
    assert found is not None
    return found


def test_a_completion_resent_on_a_lagging_copy_records_its_suspicion_once(
    rig: Rig, lagging: tuple[LaggingCopies, Tenure]
) -> None:
    # The first completion ended the lease and recorded the made-up task id it names; its
    # resend, judged on a copy that still shows the lease running, answers the first answer
    # and must record nothing again: it ended nothing.
    lag, svc = lagging
    won = _running(rig, svc)
    lease_id = won.lease.id
    copy = _stored(rig, lease_id)
    body = {"outcome": "success", "result": f"filed {MADE_UP}"}
    first = svc.reports.complete(lease_principal(lease_id), lease_id, dict(body))
    lag.copies[lease_id] = copy
    again = svc.reports.complete(lease_principal(lease_id), lease_id, dict(body))
    assert lag.served >= 1, "the resend was judged on the copy"
    assert again == first
    task_id = won.lease.task_id or ""
    kinds = [e.type for e in rig.store.timeline("task", task_id, None)]
    assert kinds.count(TASK_COMPLETION_HALLUCINATION_SUSPECTED) == 1, kinds


# ------------------------------------------------------------------------ both endpoints

Send = Callable[[str, str, str, dict[str, Any] | None], dict[str, Any]]


def _on_url(method: str, path: str, token: str, body: dict[str, Any] | None) -> dict[str, Any]:
    head = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    return dict(worker.handle(to_event(method, f"/api/v1{path}", head, raw), None))


def _through_gateway(
    method: str, path: str, token: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    head = {"host": "unit", "authorization": f"Bearer {token}"}
    raw = json.dumps(body).encode() if body is not None else b""
    event = to_event(method, f"/api/v1{path}", head, raw)
    event["requestContext"]["authorizer"] = {"lambda": authorize(event)["context"]}
    return dict(api.handle(event, None))


ENDPOINTS: dict[str, Send] = {"url": _on_url, "gateway": _through_gateway}
REPORTS: dict[str, dict[str, Any]] = {
    "complete": {"outcome": "success"},
    "fail": {"error": "no"},
    "release": {},
}


def _keep_verdict(send: Send, won: Claimed) -> None:
    """A heartbeat first: on the URL the token's verdict is kept from here on, so the report
    after it reads no row for its check and starts from the copy, as through the gateway."""
    answer = send("POST", f"/leases/{won.lease.id}/heartbeat", won.token, {})
    assert answer["statusCode"] == 200, answer


def _code(answer: dict[str, Any]) -> str:
    return str(json.loads(answer["body"])["error"]["code"])


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("report", sorted(REPORTS))
def test_an_expired_lease_s_report_on_its_running_copy_is_stale_on_both_endpoints(
    rig: Rig, lagging: tuple[LaggingCopies, Tenure], endpoint: str, report: str
) -> None:
    lag, svc = lagging
    send = ENDPOINTS[endpoint]
    won = _running(rig, svc)
    lease_id = won.lease.id
    _keep_verdict(send, won)
    lag.copies[lease_id] = _stored(rig, lease_id)
    rig.clock.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    svc.sweep.once()
    expired = _stored(rig, lease_id)
    assert expired.state is LeaseState.LOST
    answer = send("POST", f"/leases/{lease_id}/{report}", won.token, REPORTS[report])
    assert answer["statusCode"] == 409 and _code(answer) == "stale_lease", answer
    assert _stored(rig, lease_id) == expired, "nothing written"


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_a_cancelled_lease_s_completion_on_its_running_copy_ends_it_as_the_table_says(
    rig: Rig, lagging: tuple[LaggingCopies, Tenure], endpoint: str
) -> None:
    # The copy has not seen the operator's cancel: the completion's write on it loses, and
    # the completion is judged again on the cancelling row, which it ends as cancelled.
    lag, svc = lagging
    send = ENDPOINTS[endpoint]
    won = _running(rig, svc)
    lease_id = won.lease.id
    _keep_verdict(send, won)
    lag.copies[lease_id] = _stored(rig, lease_id)
    svc.operator.cancel(ADMIN, lease_id)
    answer = send("POST", f"/leases/{lease_id}/complete", won.token, {"outcome": "success"})
    assert answer["statusCode"] == 200, answer
    ended = _stored(rig, lease_id)
    assert ended.state is LeaseState.CANCELLED, ended
    assert json.loads(answer["body"])["lease"]["state"] == "cancelled"


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("report", sorted(REPORTS))
def test_a_report_resent_on_a_lagging_copy_answers_its_first_answer_on_both_endpoints(
    rig: Rig, lagging: tuple[LaggingCopies, Tenure], endpoint: str, report: str
) -> None:
    lag, svc = lagging
    send = ENDPOINTS[endpoint]
    won = _running(rig, svc)
    lease_id = won.lease.id
    copy = _stored(rig, lease_id)
    path = f"/leases/{lease_id}/{report}"
    first = send("POST", path, won.token, REPORTS[report])
    assert first["statusCode"] == 200, first
    ended = _stored(rig, lease_id)
    lag.copies[lease_id] = copy
    rig.clock.advance(0.2)
    again = send("POST", path, won.token, REPORTS[report])
    assert lag.served >= 1, "judged on the copy first"
    assert (again["statusCode"], again["body"]) == (first["statusCode"], first["body"])
    assert _stored(rig, lease_id) == ended, "nothing written again"


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_an_expired_lease_s_completion_naming_tasks_is_stale_not_judged_on_its_copy(
    rig: Rig, lagging: tuple[LaggingCopies, Tenure], endpoint: str
) -> None:
    # The copy still shows the lease running; the table says the sweeper expired it. The
    # completion names a task it did not make: the table's answer is stale_lease, and the
    # copy must not turn it into a refusal of the body (nor record a refused delegation).
    lag, svc = lagging
    won = _running(rig, svc)
    lease_id = won.lease.id
    lag.copies[lease_id] = _stored(rig, lease_id)
    body = {"outcome": "success", "created_task_ids": [MADE_UP]}
    _keep_verdict(ENDPOINTS[endpoint], won)
    rig.clock.advance(TOLERATION_S * (1 + DEADLINE_SLACK) + 5)
    svc.sweep.once()
    expired = _stored(rig, lease_id)
    assert expired.state is LeaseState.LOST
    answer = ENDPOINTS[endpoint]("POST", f"/leases/{lease_id}/complete", won.token, body)
    assert answer["statusCode"] == 409 and _code(answer) == "stale_lease", answer
    assert _stored(rig, lease_id) == expired, "nothing written"
    kinds = [e.type for e in rig.store.timeline("task", won.lease.task_id or "", None)]
    assert TASK_COMPLETION_HALLUCINATION_BLOCKED not in kinds, kinds
