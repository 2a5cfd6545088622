"""A final report that claims the next lease (`complete`/`fail` with `next`) claims with the
worker's own credential as it stands at that moment, never the job's.

The job a worker runs holds only its lease token, so a lease token alone claims nothing: its
`next` is not acted on. The runner sends the report with its worker token instead, naming the
lease it claimed with that token; a worker token that is revoked, expired, not the lease's
claimant or not allowed the pool claims nothing. A report replayed after its lease ended
answers its first answer and claims nothing new; only a replay carrying the first
application's `claim_id` answers that same next lease again, under a fresh token.

Every attack here runs through the real handlers (the authorizer and the API function, and
the worker function on its function URL), on the unit rig."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tenure.app.leases.claims.answer import Pick
from tenure.app.migrations import HANDOVER_INTENTS_FROM_SCHEMA, SchemaState

from tests.unit.both_endpoints import ENDPOINTS, SUCCESS, Send, api, served_rig
from tests.unit.support import ADMIN, POOL, SPACE, Rig


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    return served_rig(monkeypatch)


def _worker_token(rig: Rig, expires: int | None = None, pools: tuple[str, ...] = (POOL,)) -> str:
    name = rig.ids.new_id("worker-token")
    return rig.svc.tokens.create_token(ADMIN, name, "worker", None, None, pools, expires)[1]


def _file(rig: Rig, n: int) -> None:
    for i in range(n):
        rig.task(title=f"job {i}", body=f"secret body {i}")


def _claim(send: Send, token: str, claim_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"worker_id": "w1"} | ({"claim_id": claim_id} if claim_id else {})
    status, won = send("POST", f"/pools/{POOL}/claim", token, body)
    assert status == 200, won
    return dict(won)


def _next(claim_id: str) -> dict[str, Any]:
    return {"next": {"worker_id": "w1", "claim_id": claim_id}}


def _open_leases(rig: Rig) -> int:
    page = rig.svc.operator.list_leases(ADMIN, SPACE, 100, None, None, None)
    return sum(1 for lease in page.leases if lease.claimed_by is not None)


# ----------------------------------------------------------------- a lease token claims nothing


@ENDPOINTS
def test_a_job_holding_its_lease_token_claims_nothing_through_next(rig: Rig, send: Send) -> None:
    _file(rig, 3)
    won = _claim(send, _worker_token(rig))
    lease_id, lease_token = won["lease"]["id"], won["token"]
    status, answer = send(
        "POST", f"/leases/{lease_id}/complete", lease_token, {**SUCCESS, **_next("job-1")}
    )
    assert status == 200, answer
    assert answer["lease"]["state"] == "completed", "the report itself is applied"
    assert answer["next"] is None, "a lease token alone claims nothing"
    assert _open_leases(rig) == 1, "no other task of the pool was taken"


@ENDPOINTS
def test_a_spent_lease_token_replaying_its_report_claims_nothing(rig: Rig, send: Send) -> None:
    _file(rig, 1)
    won = _claim(send, _worker_token(rig))
    lease_id, lease_token = won["lease"]["id"], won["token"]
    assert send("POST", f"/leases/{lease_id}/complete", lease_token, SUCCESS)[0] == 200
    for hours in (3, 31 * 24):
        rig.advance(hours * 3600)
        rig.sweep()  # retention reclaims the ended lease after its pool's retention
        _file(rig, 2)  # claimable work, filed after the sweep (which parks starved tasks)
        for n in range(2):
            body = {**SUCCESS, **_next(f"replay-{hours}-{n}")}
            status, answer = send("POST", f"/leases/{lease_id}/complete", lease_token, body)
            assert status == 200, answer
            assert answer["lease"]["state"] == "completed"
            assert answer.get("next") is None, "a replay claims nothing"
    # Nothing to delete (no logs, no attachments): reclaimed by derivation, with no write.
    assert rig.lease(lease_id).reclaimed_at is None
    assert rig.svc.kernel.catalog.reclaimed_at(rig.lease(lease_id)) is not None
    assert answer["lease"]["reclaimed"] is True, "retention reclaimed the lease"
    assert _open_leases(rig) == 1


# ----------------------------------------------------- the worker token, as it stands now


@ENDPOINTS
def test_the_worker_token_reports_and_claims_the_next_lease(rig: Rig, send: Send) -> None:
    _file(rig, 2)
    wt = _worker_token(rig)
    won = _claim(send, wt)
    lease_id = won["lease"]["id"]
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, {**SUCCESS, **_next("n-1")})
    assert status == 200, answer
    assert answer["lease"]["state"] == "completed"
    nxt = answer["next"]
    assert nxt is not None and nxt["lease"]["id"] != lease_id
    assert nxt["token"].startswith("tnr_l_")
    assert rig.lease(nxt["lease"]["id"]).claimed_by == rig.lease(lease_id).claimed_by


@ENDPOINTS
def test_a_resent_report_with_the_same_claim_id_answers_the_same_next_lease(
    rig: Rig, send: Send
) -> None:
    _file(rig, 4)
    wt = _worker_token(rig)
    lease_id = _claim(send, wt)["lease"]["id"]
    body = {**SUCCESS, **_next("same-claim")}
    first = send("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    rig.advance(30)
    status, again = send("POST", f"/leases/{lease_id}/complete", wt, body)
    assert status == 200, again
    assert again["next"]["lease"]["id"] == first["lease"]["id"], "the same next lease"
    assert again["next"]["token"] != first["token"], "under a fresh token (the lost one is dead)"
    status, other = send("POST", f"/leases/{lease_id}/complete", wt, {**SUCCESS, **_next("x")})
    assert status == 200 and other["next"] is None, "another claim_id claims nothing new"
    assert _open_leases(rig) == 2


@ENDPOINTS
def test_a_revoked_worker_token_claims_nothing_through_its_leases(rig: Rig, send: Send) -> None:
    _file(rig, 3)
    wt = _worker_token(rig)
    won = _claim(send, wt)
    token_id = rig.lease(won["lease"]["id"]).claimed_by
    assert token_id is not None
    rig.svc.tokens.revoke_token(ADMIN, token_id)
    rig.advance(120)  # past every cached verdict
    lease_id, lease_token = won["lease"]["id"], won["token"]
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, {**SUCCESS, **_next("r")})
    assert status == 401, answer
    status, answer = send(
        "POST", f"/leases/{lease_id}/complete", lease_token, {**SUCCESS, **_next("r")}
    )
    assert status == 200 and answer["next"] is None, answer
    assert _open_leases(rig) == 1


@ENDPOINTS
def test_an_expired_worker_token_claims_nothing_through_its_leases(rig: Rig, send: Send) -> None:
    _file(rig, 3)
    wt = _worker_token(rig, expires=60)
    won = _claim(send, wt)
    rig.advance(3600)
    lease_id, lease_token = won["lease"]["id"], won["token"]
    status, answer = send("POST", f"/leases/{lease_id}/fail", wt, {"error": "x", **_next("e")})
    assert status == 401, answer
    status, answer = send(
        "POST", f"/leases/{lease_id}/fail", lease_token, {"error": "x", **_next("e")}
    )
    assert status == 200 and answer["next"] is None, answer
    assert _open_leases(rig) == 1


@ENDPOINTS
def test_another_worker_token_cannot_report_on_a_lease_it_did_not_claim(
    rig: Rig, send: Send
) -> None:
    _file(rig, 3)
    won = _claim(send, _worker_token(rig))
    stranger = _worker_token(rig)
    lease_id = won["lease"]["id"]
    status, answer = send(
        "POST", f"/leases/{lease_id}/complete", stranger, {**SUCCESS, **_next("s")}
    )
    assert status == 409 and answer["error"]["code"] == "stale_lease", answer
    assert rig.lease(lease_id).state.value == "dispatched", "nothing was applied"
    rig.make_pool("other-pool")
    elsewhere = _worker_token(rig, pools=("other-pool",))
    status, answer = send(
        "POST", f"/leases/{lease_id}/complete", elsewhere, {**SUCCESS, **_next("s")}
    )
    assert status == 404 and answer["error"]["code"] == "lease_not_found", answer
    assert _open_leases(rig) == 1


@ENDPOINTS
def test_a_worker_token_reports_only_with_next(rig: Rig, send: Send) -> None:
    _file(rig, 1)
    wt = _worker_token(rig)
    lease_id = _claim(send, wt)["lease"]["id"]
    for body in ({}, SUCCESS, {**SUCCESS, "junk": 1}):
        status, answer = send("POST", f"/leases/{lease_id}/complete", wt, body)
        assert status == 403 and answer["error"]["code"] == "forbidden", answer
    assert rig.lease(lease_id).state.value == "dispatched"


@ENDPOINTS
def test_a_worker_names_the_worker_id_it_claimed_with(rig: Rig, send: Send) -> None:
    _file(rig, 2)
    wt = _worker_token(rig)
    lease_id = _claim(send, wt)["lease"]["id"]
    body = {**SUCCESS, "next": {"worker_id": "w2", "claim_id": "c"}}
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, body)
    assert status == 409 and answer["error"]["code"] == "stale_lease", answer
    assert rig.lease(lease_id).state.value == "dispatched"


@ENDPOINTS
def test_a_claim_the_service_would_refuse_is_refused_before_the_report_is_applied(
    rig: Rig, send: Send
) -> None:
    """A 4xx means nothing happened: a `next` whose claim would be refused (here a claim_id
    that carries a token, which is never stored) leaves the lease as it was, so the report
    resent with a corrected claim is applied and claims."""
    _file(rig, 2)
    wt = _worker_token(rig)
    won = _claim(send, wt)
    lease_id = won["lease"]["id"]
    status, answer = send(
        "POST", f"/leases/{lease_id}/complete", wt, {**SUCCESS, **_next(won["token"])}
    )
    assert status == 422 and answer["error"]["code"] == "validation_failed", answer
    assert rig.lease(lease_id).state.value == "dispatched", "nothing was applied"
    status, answer = send("POST", f"/leases/{lease_id}/complete", wt, {**SUCCESS, **_next("ok")})
    assert status == 200 and answer["next"] is not None, answer


# -- the claim's intent rides in the report's own write -------------------------------------


def test_a_handover_claim_keeps_its_intent_on_the_ended_lease_and_writes_no_record(
    rig: Rig,
) -> None:
    _file(rig, 3)
    wt = _worker_token(rig)
    lease_id = _claim(api, wt)["lease"]["id"]
    body = {**SUCCESS, **_next("rides")}
    nxt = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert nxt is not None
    assert rig.store.claims == {}, "no claim_id record for a handover claim"
    assert rig.lease(lease_id).next_lease == nxt["lease"]["id"], "the intent names its lease"
    assert rig.lease(nxt["lease"]["id"]).claim_ref == rig.lease(lease_id).next_claim


def test_a_lost_pick_moves_the_intent_on_and_the_resend_follows_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pick names a lease a rival takes before this claim does: the claim moves the intent
    # on (a fenced write of the ended lease) and its resend answers the lease it moved to.
    _file(rig, 3)
    wt = _worker_token(rig)
    rival = _worker_token(rig)
    lease_id = _claim(api, wt)["lease"]["id"]
    claims = rig.svc.claims
    pick = claims.pick

    def raced(pool: str) -> Pick:
        picked = pick(pool)
        assert picked.lease_id is not None
        won = _claim(api, rival)  # the rival takes the head this report picked
        assert won["lease"]["id"] == picked.lease_id
        return picked

    monkeypatch.setattr(claims, "pick", raced)
    body = {**SUCCESS, **_next("moved")}
    first = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert first is not None
    ended = rig.lease(lease_id)
    assert ended.next_lease == first["lease"]["id"], "the intent moved on to what it won"
    assert rig.store.claims == {}
    rig.advance(30)
    again = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert again["lease"]["id"] == first["lease"]["id"], "the resend follows the intent"
    assert _open_leases(rig) == 3


def test_below_the_schema_version_a_handover_claim_writes_its_record(rig: Rig) -> None:
    # An earlier release's resend looks for the claim_id record: until the table is migrated a
    # handover claim writes it, and keeps no intent on the ended lease.
    rig.store.schema = SchemaState(version=HANDOVER_INTENTS_FROM_SCHEMA - 1, step=1)
    _file(rig, 2)
    wt = _worker_token(rig)
    lease_id = _claim(api, wt)["lease"]["id"]
    body = {**SUCCESS, **_next("old-kind")}
    nxt = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert nxt is not None
    assert rig.lease(lease_id).next_lease is None
    [record] = rig.store.claims.values()
    assert record.lease_id == nxt["lease"]["id"]
    rig.advance(30)
    again = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert again["lease"]["id"] == nxt["lease"]["id"]


def test_a_handover_with_an_empty_queue_keeps_a_record_as_a_standalone_claim(rig: Rig) -> None:
    _file(rig, 1)
    wt = _worker_token(rig)
    lease_id = _claim(api, wt)["lease"]["id"]
    body = {**SUCCESS, **_next("empty")}
    assert api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"] is None
    assert rig.lease(lease_id).next_lease is None, "nothing was picked: no intent written"


def test_a_resend_that_read_a_stale_intent_reads_it_again_before_answering_none(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The resend read the intent while it still named a lease a rival then won, and the first
    # copy has since moved it on and won another: a lease not its own is no answer yet, the
    # intent read again is, and the resend answers the lease held under its claim.
    _file(rig, 3)
    wt = _worker_token(rig)
    rival = _worker_token(rig)
    lease_id = _claim(api, wt)["lease"]["id"]
    body = {**SUCCESS, **_next("stale")}
    first = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    taken = _claim(api, rival)["lease"]["id"]
    records = rig.svc.claims.records
    find = records._find
    reads: list[str] = []

    def stale_first(intent: Any) -> Any:
        found = find(intent)
        if not reads and found is not None:
            found = replace(found, lease_id=taken)  # as read before the intent moved on
        reads.append(found.lease_id if found else "")
        return found

    monkeypatch.setattr(records, "_find", stale_first)
    rig.advance(30)
    again = api("POST", f"/leases/{lease_id}/complete", wt, body)[1]["next"]
    assert reads[:2] == [taken, first["lease"]["id"]], "the intent was read again"
    assert again is not None and again["lease"]["id"] == first["lease"]["id"]
