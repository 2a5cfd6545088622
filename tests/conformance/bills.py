"""What each DynamoDB write the store makes is billed, by AWS's rules (bench/billing.py):
DynamoDB Local misreports transactions, so the tests that state a control's cost price the
writes themselves."""

from __future__ import annotations

from typing import Any

from tenure_cli.bench.meter import WRITES, Pricer

from tests.conftest import Rig


class Bills:
    """The billed write units of each DynamoDB write the store's client makes."""

    def __init__(self, rig: Rig, endpoint: str) -> None:
        client = rig.store.client
        self.pricer = Pricer(endpoint, client.meta.region_name)
        self.writes: list[tuple[str, float]] = []
        self.parts: list[dict[str, float]] = []  # each write's table and index units
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES:
            self.pricer.before(model.name, params)

    def _after(self, http_response: Any, model: Any, **_: Any) -> None:
        if model.name in WRITES:
            bill = self.pricer.bill(model.name, failed=http_response.status_code >= 300)
            if bill is not None:
                self.writes.append((model.name, bill.total))
                self.parts.append({"table": bill.table, **bill.indexes})
