"""What a lease token's request reads on the worker function's URL, priced by what DynamoDB
Local reports: the bearer is checked in the same function as the route, so the lease row the
check reads consistently is the row the route starts from — one read of it, not two."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure import wiring
from tenure.api import tokens, worker
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig


class ReadUnits:
    """The read units DynamoDB Local reports for the store's reads, summed."""

    def __init__(self, rig: Rig) -> None:
        self.total = 0.0
        rig.store.client.meta.events.register("after-call.dynamodb", self._add)

    def _add(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name not in ("GetItem", "BatchGetItem", "Query"):
            return
        reported = parsed.get("ConsumedCapacity") or []
        for entry in reported if isinstance(reported, list) else [reported]:
            self.total += float(entry.get("CapacityUnits", 0))


@pytest.fixture
def world(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Rig:
    make_world(rig.svc)
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    monkeypatch.setattr(wiring, "worker_service", lambda: rig.svc.core)
    return rig


def _first_request(rig: Rig, monkeypatch: pytest.MonkeyPatch, route: str) -> float:
    """A fresh lease's token, its first request on the URL (no verdict kept): read units."""
    rig.svc.filing.create_task(ADMIN, SPACE, "build", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    monkeypatch.setattr(worker, "VERDICTS", tokens.Verdicts())
    rig.svc.kernel.catalog.pool(ALPHA)  # the pool row kept warm, as a warm function keeps it
    units = ReadUnits(rig)
    head = {"host": "unit", "authorization": f"Bearer {won.token}"}
    body = json.dumps({"outcome": "success"}).encode() if route == "complete" else b""
    path = f"/api/v1/leases/{won.lease.id}/{route}"
    answer = worker.handle(to_event("POST", path, head, body), None)
    assert answer["statusCode"] == 200, answer
    return units.total


@pytest.mark.parametrize("route", ["start", "heartbeat", "complete"])
def test_a_lease_token_s_first_report_on_the_url_reads_its_lease_once(
    world: Rig, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    # One consistent read of a lease row under 4 KB: 1 unit. It was 2 for a start or a
    # complete (the check's read and the report's), 2.5 for a heartbeat (the check's, then
    # the heartbeat's cheap read and, the lease not yet running, its consistent one).
    assert _first_request(world, monkeypatch, route) == pytest.approx(1.0)
