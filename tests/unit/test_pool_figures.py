"""`GET /pools/{pool}/figures`: what is queued and held, the oldest queued age, the last hour's
claims, completions and failures, and a mass-expiry hold while it is on; read only, refused
outside the caller's spaces and to a lease token."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.app.ports import SweeperState
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import POOL, READER, Rig, as_lease


@pytest.fixture
def get(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(path: str, actor: Principal = READER) -> tuple[int, dict[str, Any]]:
        event = to_event("GET", f"/api/v1{path}", {"host": "unit"}, b"")
        principal = json.dumps(dataclasses.asdict(actor))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return out["statusCode"], json.loads(out.get("body") or "{}")

    return call


def _end(rig: Rig, how: str) -> None:
    won = rig.claimed()
    lease = as_lease(won.lease.id)
    rig.svc.reports.start(lease, won.lease.id)
    if how == "complete":
        rig.svc.reports.complete(lease, won.lease.id, {})
    else:
        rig.svc.reports.fail(lease, won.lease.id, {"error": "boom\nat line 2"})


def test_the_figures_count_what_is_queued_held_and_ended_in_the_hour(rig: Rig, get: Any) -> None:
    _end(rig, "complete")
    _end(rig, "complete")
    _end(rig, "fail")
    rig.running()  # held
    rig.task()  # queued
    rig.advance(90)
    rig.task()  # queued, younger
    status, body = get(f"/pools/{POOL}/figures")
    assert status == 200, body
    f = body["figures"]
    assert (f["pool"], f["queued"], f["held"]) == (POOL, 2, 1)
    assert f["oldest_queued_age_seconds"] == pytest.approx(90, abs=1)
    assert f["last_hour"] == {"claims": 4, "completed": 2, "failed": 1, "capped": False}
    assert f["mass_expiry_hold"] is None and not f["queued_capped"] and not f["held_capped"]
    # An hour and more later the ended runs fall out of the hour; the held one was claimed
    # before it, so no claim is counted either.
    rig.advance(3700)
    f = get(f"/pools/{POOL}/figures")[1]["figures"]
    assert f["last_hour"] == {"claims": 0, "completed": 0, "failed": 0, "capped": False}


def test_a_mass_expiry_hold_shows_while_it_is_on(rig: Rig, get: Any) -> None:
    until = rig.clock.now_ms() + 60_000
    rig.store.sweeper = SweeperState(last_pass_at=rig.clock.now_ms(), holds={POOL: until})
    hold = get(f"/pools/{POOL}/figures")[1]["figures"]["mass_expiry_hold"]
    assert hold is not None and hold["until"].endswith("Z")
    rig.advance(61)
    assert get(f"/pools/{POOL}/figures")[1]["figures"]["mass_expiry_hold"] is None


def test_reading_the_figures_writes_nothing(rig: Rig, get: Any) -> None:
    _end(rig, "fail")
    rig.task()
    before = list(rig.store.writes)
    assert get(f"/pools/{POOL}/figures")[0] == 200
    assert rig.store.writes == before


def test_another_space_or_a_lease_token_is_refused(rig: Rig, get: Any) -> None:
    won = rig.claimed()
    elsewhere = Principal(kind="operator", token_id="tok-else", role="admin", spaces=("ELSE",))
    status, body = get(f"/pools/{POOL}/figures", elsewhere)
    assert (status, body["error"]["code"]) == (403, "forbidden")
    status, body = get(f"/pools/{POOL}/figures", as_lease(won.lease.id))
    assert status == 403, body
    status, body = get("/pools/nope/figures")
    assert (status, body["error"]["code"]) == (404, "not_found")
