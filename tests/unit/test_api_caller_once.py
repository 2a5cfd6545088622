"""The caller's principal is read once per request, by the dispatch, and handed to the route:
the route never reads the authorizer's answer again, and a route run without a caller handed
on refuses."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.api import gate, surface
from tenure.domain import errors as e
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import ADMIN, Rig


def _event(method: str, path: str, body: Any = None) -> dict[str, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw)
    principal = json.dumps(dataclasses.asdict(ADMIN))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    return event


@pytest.fixture
def reads(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    seen: list[Any] = []
    real = gate._principal_of

    def counted(raw: str) -> Any:
        seen.append(raw)
        return real(raw)

    monkeypatch.setattr(gate, "_principal_of", counted)
    return seen


def test_a_request_reads_its_caller_once(reads: list[Any]) -> None:
    out = api.handle(_event("GET", "/spaces"), None)
    assert out["statusCode"] == 200
    assert len(reads) == 1


def test_the_caller_does_not_outlive_its_request(reads: list[Any]) -> None:
    api.handle(_event("GET", "/spaces"), None)
    assert surface.CALLER not in surface.app.context
    with pytest.raises(e.Unauthenticated):
        surface.actor()


def test_a_principal_handed_on_in_process_is_taken_as_it_is(rig: Rig) -> None:
    assert surface.principal({"principal": ADMIN}, None, surface.whole_core) is ADMIN
    assert (
        surface.principal(
            {"principal": json.dumps(dataclasses.asdict(ADMIN))}, None, surface.whole_core
        )
        == ADMIN
    )
    with pytest.raises(e.Unauthenticated):
        surface.principal({"principal": "", "reason": "unknown token"}, None, surface.whole_core)
