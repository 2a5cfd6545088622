"""A final report sent with the worker token (the one that carries `next`) may carry the
worker's heartbeat for its other leases: `heartbeat: [{id, fence}]`, renewed after the report
and its claim exactly as `POST /workers/{worker_id}/heartbeat` renews them, answered per lease
in the report's answer. One request fewer per lease for a busy worker.

What it must refuse: a lease token's `heartbeat` (the job holds that token: it must not renew
its worker's other leases), more leases than the worker heartbeat takes, another worker's or
another token's lease (that item alone, `stale_lease`), the reported lease itself (that item
alone: it has just ended). A refusal of the heartbeat as a whole never fails the report.

Every case runs through the real handlers (the authorizer and the API function, and the
worker function on its function URL), on the unit rig."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.leases.reports import Reports
from tenure.domain.errors import Unavailable

from tests.unit.both_endpoints import ENDPOINTS, SUCCESS, Send, api, served_rig
from tests.unit.support import ADMIN, POOL, Rig


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    return served_rig(monkeypatch)


def _worker_token(rig: Rig) -> str:
    name = rig.ids.new_id("worker-token")
    return rig.svc.tokens.create_token(ADMIN, name, "worker", None, None, (POOL,), None)[1]


def _hold(rig: Rig, send: Send, token: str, n: int, worker_id: str = "w1") -> list[Any]:
    """`n` leases claimed by `worker_id` with `token` (work filed for them, plus one more
    for the reports' next claims)."""
    for i in range(n + 1):
        rig.task(title=f"job {worker_id} {i}")
    held = []
    for _ in range(n):
        status, won = send("POST", f"/pools/{POOL}/claim", token, {"worker_id": worker_id})
        assert status == 200, won
        held.append(won)
    return held


def _body(claim_id: str, beats: list[Any], report: dict[str, Any] = SUCCESS) -> dict[str, Any]:
    return {**report, "next": {"worker_id": "w1", "claim_id": claim_id}, "heartbeat": beats}


def _pair(won: Any) -> dict[str, Any]:
    return {"id": won["lease"]["id"], "fence": won["fence"]}


# -------------------------------------------------------------------------- what it does


@ENDPOINTS
def test_the_report_renews_the_other_leases_as_the_worker_heartbeat_does(
    rig: Rig, send: Send
) -> None:
    wt = _worker_token(rig)
    done, *others = _hold(rig, send, wt, 3)
    before = {o["lease"]["id"]: rig.lease(o["lease"]["id"]).deadline for o in others}
    rig.advance(5)
    beats = [_pair(o) for o in others]
    status, answer = send("POST", f"/leases/{done['lease']['id']}/complete", wt, _body("c", beats))
    assert status == 200, answer
    assert answer["lease"]["state"] == "completed"
    assert answer["next"] is not None, "the report's claim is answered as before"
    rows = answer["heartbeat"]
    assert [(r["id"], r["fence"]) for r in rows] == [(b["id"], b["fence"]) for b in beats]
    for row in rows:
        assert "error" not in row, row
        assert row["state"] == "running", "a first heartbeat starts a dispatched lease"
        assert (rig.lease(row["id"]).deadline or 0) > (before[row["id"]] or 0), "renewed"
    # The same leases, by the worker heartbeat route: the same per-lease items.
    status, plain = send("POST", "/workers/w1/heartbeat", wt, {"leases": beats})
    assert status == 200, plain
    assert [sorted(r) for r in plain["leases"]] == [sorted(r) for r in rows]


@ENDPOINTS
def test_a_failure_report_carries_it_too(rig: Rig, send: Send) -> None:
    wt = _worker_token(rig)
    done, other = _hold(rig, send, wt, 2)
    body = _body("f", [_pair(other)], {"error": "boom"})
    status, answer = send("POST", f"/leases/{done['lease']['id']}/fail", wt, body)
    assert status == 200, answer
    assert answer["lease"]["state"] == "failed"
    assert answer["heartbeat"][0]["state"] == "running", answer


def test_a_report_without_heartbeat_answers_none(rig: Rig) -> None:
    wt = _worker_token(rig)
    (done,) = _hold(rig, api, wt, 1)
    body = {**SUCCESS, "next": {"worker_id": "w1", "claim_id": "n"}}
    status, answer = api("POST", f"/leases/{done['lease']['id']}/complete", wt, body)
    assert status == 200, answer
    assert "heartbeat" not in answer, "the answer is as it was for a report without one"


# ----------------------------------------------------------------------- what it refuses


@ENDPOINTS
def test_a_lease_token_may_not_renew_its_workers_other_leases(rig: Rig, send: Send) -> None:
    wt = _worker_token(rig)
    done, other = _hold(rig, send, wt, 2)
    lease_id = done["lease"]["id"]
    deadline = rig.lease(other["lease"]["id"]).deadline
    rig.advance(5)
    for body in (
        {**SUCCESS, "heartbeat": [_pair(other)]},
        _body("x", [_pair(other)]),
        {**SUCCESS, "heartbeat": []},
        {**SUCCESS, "heartbeat": "junk", "unknown": 1},  # refused before it is validated
    ):
        status, answer = send("POST", f"/leases/{lease_id}/complete", done["token"], body)
        assert status == 403, answer
        assert answer["error"]["code"] == "lease_token_mismatch", answer
    status, answer = send(
        "POST", f"/leases/{lease_id}/fail", done["token"], {"error": "x", "heartbeat": []}
    )
    assert status == 403 and answer["error"]["code"] == "lease_token_mismatch", answer
    assert rig.lease(lease_id).state.value == "dispatched", "nothing was applied"
    assert rig.lease(other["lease"]["id"]).deadline == deadline, "nothing was renewed"


@ENDPOINTS
def test_more_leases_than_the_worker_heartbeat_takes_is_refused_whole(rig: Rig, send: Send) -> None:
    wt = _worker_token(rig)
    (done,) = _hold(rig, send, wt, 1)
    lease_id = done["lease"]["id"]
    beats = [{"id": f"lease-{i}", "fence": 1} for i in range(101)]
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, _body("o", beats))
    assert status == 422 and answer["error"]["code"] == "validation_failed", answer
    assert "heartbeat" in answer["error"]["message"]
    assert rig.lease(lease_id).state.value == "dispatched", "nothing was applied"
    status, _ = send("POST", "/workers/w1/heartbeat", wt, {"leases": beats})
    assert status == 422, "the worker heartbeat's own limit"
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, _body("o", beats[:100]))
    assert status == 200 and len(answer["heartbeat"]) == 100, answer


@ENDPOINTS
def test_another_workers_or_tokens_lease_is_that_items_stale_lease(rig: Rig, send: Send) -> None:
    wt, stranger = _worker_token(rig), _worker_token(rig)
    done, mine = _hold(rig, send, wt, 2)
    (theirs,) = _hold(rig, send, stranger, 1)  # another token's lease
    (other_worker,) = _hold(rig, send, wt, 1, worker_id="w2")  # same token, another worker
    before = {
        x["lease"]["id"]: rig.lease(x["lease"]["id"]).deadline for x in (theirs, other_worker)
    }
    rig.advance(5)
    beats = [_pair(theirs), _pair(mine), _pair(other_worker)]
    status, answer = send("POST", f"/leases/{done['lease']['id']}/complete", wt, _body("s", beats))
    assert status == 200, answer
    codes = [r.get("error", {}).get("code") for r in answer["heartbeat"]]
    assert codes == ["stale_lease", None, "stale_lease"], answer["heartbeat"]
    for lease_id, deadline in before.items():
        assert rig.lease(lease_id).deadline == deadline, "not renewed"


@ENDPOINTS
def test_the_reported_lease_itself_is_refused_for_its_item(rig: Rig, send: Send) -> None:
    wt = _worker_token(rig)
    done, other = _hold(rig, send, wt, 2)
    beats = [_pair(done), _pair(other)]
    status, answer = send("POST", f"/leases/{done['lease']['id']}/complete", wt, _body("r", beats))
    assert status == 200, answer
    first, second = answer["heartbeat"]
    assert first["id"] == done["lease"]["id"]
    assert first["error"]["code"] == "invalid_transition", first
    assert "state" not in first
    assert rig.lease(done["lease"]["id"]).state.value == "completed", "it stays ended"
    assert second["state"] == "running" and "error" not in second


def test_a_refusal_of_the_heartbeat_as_a_whole_leaves_the_report_standing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    wt = _worker_token(rig)
    done, other = _hold(rig, api, wt, 2)

    def throttled(self: Reports, *args: Any, **kwargs: Any) -> Any:
        raise Unavailable("the table throttled")

    monkeypatch.setattr(Reports, "worker_heartbeat", throttled)
    lease_id = done["lease"]["id"]
    status, answer = api("POST", f"/leases/{lease_id}/complete", wt, _body("u", [_pair(other)]))
    assert status == 200, answer
    assert answer["lease"]["state"] == "completed", "the report stands"
    assert answer["next"] is not None, "and its claim"
    assert answer["heartbeat"] == {
        "error": {"code": "unavailable", "message": "the table throttled"}
    }
    assert rig.lease(lease_id).state.value == "completed"
