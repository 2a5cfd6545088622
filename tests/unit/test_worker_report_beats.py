"""The runner folds the worker heartbeat into a report that claims the next lease when that
heartbeat is due within half a renewal (one request fewer), and takes the report's answer to it
exactly as a heartbeat's: acks, revokes, refused leases, the fence file, the next beat's time.
Against a service that does not know a report's `heartbeat` (422 naming it, nothing applied)
it sends the report again without it, and its heartbeats apart from then on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from tenure_worker.client import Answer
from tenure_worker.runner import Held, Worker

from tests.unit.test_worker_client import FakeTransport, client, worker
from tests.unit.worker_support import held_record

DONE = {"lease": {"id": "L1", "state": "completed"}, "next": None}


def _ok(body: dict[str, Any]) -> Answer:
    return Answer(200, {}, json.dumps(body).encode())


def _refused(status: int, code: str, message: str) -> Answer:
    return Answer(status, {}, json.dumps({"error": {"code": code, "message": message}}).encode())


def _held(tmp_path: Path, lease_id: str, fence: int = 1) -> Held:
    fence_file = f"{tmp_path / lease_id}.fence"
    return held_record(
        tmp_path, lease_id, fence=fence, token=f"tnr_l_{lease_id}", fence_file=fence_file
    )


def _busy_worker(tmp_path: Path, fake: FakeTransport, due_in: float) -> Worker:
    """A worker holding L2 and L3 (renewed every 10 s), whose next heartbeat is `due_in` s
    away, with room to claim again."""
    w = worker(tmp_path, fake)
    w.opts.concurrency = 4
    for lease_id in ("L2", "L3"):
        w.held[lease_id] = _held(tmp_path, lease_id, fence=2)
    w.next_beat = time.monotonic() + due_in
    return w


def test_a_report_that_claims_carries_the_heartbeat_due_within_half_a_renewal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        {"id": "L2", "fence": 2, "state": "running", "deadline": "x", "revoke": "cancel"},
        {"id": "L3", "fence": 2, "error": {"code": "stale_lease", "message": "moved on"}},
    ]
    fake = FakeTransport(_ok({**DONE, "heartbeat": rows}))
    w = _busy_worker(tmp_path, fake, due_in=4.0)
    monkeypatch.setattr(w, "_launch", lambda claim, at: None)
    before = time.monotonic()
    w._finish(_held(tmp_path, "L1"), 0)
    (sent,) = fake.requests
    assert sent["url"].endswith("/leases/L1/complete") and sent["bearer"] == "tnr_w_x"
    assert sent["body"]["heartbeat"] == [{"id": "L2", "fence": 2}, {"id": "L3", "fence": 2}]
    assert "next" in sent["body"]
    # Taken as a heartbeat's answers: L2 acked and its revoke applied, L3 stopped as stale.
    l2, l3 = w.held["L2"], w.held["L3"]
    assert l2.last_ok >= before and l2.acked_at > 0
    assert Path(l2.fence_file).exists(), "the job's fence moved on"
    assert l2.revoke == "cancel" and l2.stop_reason == "cancel"
    assert l3.stop_reason == "stale" and l3.last_ok == 0.0
    assert w.next_beat >= before + 10.0, "the next heartbeat is a renewal after this one"
    assert "L1" not in w.unreported


def test_no_heartbeat_rides_when_it_is_not_due_soon(tmp_path: Path) -> None:
    fake = FakeTransport(_ok(DONE))
    w = _busy_worker(tmp_path, fake, due_in=6.0)
    due = w.next_beat
    w._finish(_held(tmp_path, "L1"), 0)
    assert "next" in fake.requests[0]["body"]
    assert "heartbeat" not in fake.requests[0]["body"]
    assert w.next_beat == due


def test_no_heartbeat_rides_on_a_report_that_claims_nothing(tmp_path: Path) -> None:
    """Without `next` the report goes with the lease token, which may not carry it."""
    fake = FakeTransport(_ok(DONE))
    w = _busy_worker(tmp_path, fake, due_in=0.0)
    w.stopping = True  # claims no more
    w._finish(_held(tmp_path, "L1"), 0)
    body = fake.requests[0]["body"]
    assert "next" not in body and "heartbeat" not in body
    assert fake.requests[0]["bearer"] == "tnr_l_L1"


def test_a_heartbeat_refused_as_a_whole_is_sent_apart_when_due(tmp_path: Path) -> None:
    refusal = {"error": {"code": "unavailable", "message": "throttled"}}
    beat = [{"id": i, "fence": 2, "state": "running", "deadline": "x"} for i in ("L2", "L3")]
    fake = FakeTransport(_ok({**DONE, "heartbeat": refusal}), _ok({"leases": beat}))
    w = _busy_worker(tmp_path, fake, due_in=0.0)
    due = w.next_beat
    w._finish(_held(tmp_path, "L1"), 0)
    assert "L1" not in w.unreported, "the report stands"
    assert w.next_beat == due, "the heartbeat is still due"
    assert all(h.last_ok == 0.0 for h in w.held.values()), "nothing was taken as acked"
    w._heartbeat()
    assert fake.requests[1]["url"].endswith("/workers/w1/heartbeat")
    assert all(h.last_ok > 0 for h in w.held.values())


def test_against_a_service_without_it_the_report_goes_again_and_heartbeats_apart(
    tmp_path: Path,
) -> None:
    old = _refused(422, "validation_failed", "heartbeat: is not a known field")
    beat = [{"id": i, "fence": 2, "state": "running", "deadline": "x"} for i in ("L2", "L3")]
    fake = FakeTransport(old, _ok({"leases": beat}), _ok(DONE), _ok(DONE))
    w = _busy_worker(tmp_path, fake, due_in=1.0)
    w._finish(_held(tmp_path, "L1"), 0)
    assert "L1" in w.unreported, "refused whole, nothing applied: the report is kept"
    assert w.fold_beats is False
    w._heartbeat()  # the loop's heartbeat, apart, when due
    w._send_reports()
    first, beat_sent, again = (r["body"] for r in fake.requests)
    assert "heartbeat" in first and "heartbeat" not in again
    assert again["next"]["claim_id"] == first["next"]["claim_id"], "the same report"
    assert fake.requests[1]["url"].endswith("/workers/w1/heartbeat")
    assert beat_sent["leases"] == [{"id": "L2", "fence": 2}, {"id": "L3", "fence": 2}]
    assert set(beat_sent) <= {"leases", "signal"}  # the signal it echoes, if any
    assert "L1" not in w.unreported
    # From then on no report carries it, even when a heartbeat is due.
    w.next_beat = time.monotonic()
    w._finish(_held(tmp_path, "L4"), 0)
    assert "heartbeat" not in fake.requests[3]["body"]


def test_a_report_sent_again_with_the_lease_token_drops_the_heartbeat() -> None:
    """A service that takes reports only with the lease token predates `heartbeat`, and a
    lease token may not carry it: the resend goes without it."""
    forbidden = _refused(403, "forbidden", "this route needs the lease's own token")
    fake = FakeTransport(forbidden, _ok(DONE))
    body = {
        "outcome": "success",
        "next": {"worker_id": "w1", "claim_id": "c1"},
        "heartbeat": [{"id": "L2", "fence": 1}],
    }
    assert client(fake, [])._report("complete", "L1", "tnr_l_x", body) == DONE
    assert [r["bearer"] for r in fake.requests] == ["tnr_w_x", "tnr_l_x"]
    assert "heartbeat" in fake.requests[0]["body"]
    assert "heartbeat" not in fake.requests[1]["body"]
