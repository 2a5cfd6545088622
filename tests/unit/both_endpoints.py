"""The worker routes through the real handlers on the unit rig, on both endpoints a worker may
use: the HTTP API (the authorizer, then the API function) and the worker function on its
function URL. A test module's `rig` fixture returns `served_rig(monkeypatch)`, and its tests
take `ENDPOINTS` (the parametrisation over both)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import Rig

Send = Callable[[str, str, str | None, Any], tuple[int, Any]]
SUCCESS = {"outcome": "success", "details": {"exit_status": 0}}


def served_rig(monkeypatch: pytest.MonkeyPatch) -> Rig:
    """A unit rig the handlers answer from, its clock the token verdicts' too."""
    rig = Rig()
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    monkeypatch.setattr(
        worker, "VERDICTS", tokens.Verdicts(clock=lambda: rig.clock.now_ms() / 1000)
    )
    return rig


def _call(invoke: Callable[[dict[str, Any]], dict[str, Any]]) -> Send:
    def send(method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
        head = {"host": "unit"} | ({"authorization": f"Bearer {token}"} if token else {})
        raw = json.dumps(body).encode() if body is not None else b""
        out = invoke(to_event(method, f"/api/v1{path}", head, raw))
        return out["statusCode"], json.loads(out["body"]) if out.get("body") else None

    return send


api = _call(lambda_host.invoke)
url = _call(lambda_host.invoke_worker)
ENDPOINTS = pytest.mark.parametrize("send", [api, url], ids=["http-api", "worker-url"])
