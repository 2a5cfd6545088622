"""What the cost bench's meter books for a call, on hand-made calls: the reads DynamoDB bills
though DynamoDB Local reports none, and the meter's own time kept out of a function's."""

from __future__ import annotations

import time
import types
from typing import Any

from tenure_cli.bench.meter import AwsMeter
from tenure_cli.bench.rig import Rig


def _model(name: str) -> Any:
    return types.SimpleNamespace(
        name=name, service_model=types.SimpleNamespace(service_name="dynamodb")
    )


def _query(meter: AwsMeter, consistent: bool, reported: float, items: int) -> float:
    model = _model("Query")
    before = meter.usage(meter.actor).read_units
    meter._before_call({"TableName": "t", "ConsistentRead": consistent}, model)
    parsed = {
        "Items": [{}] * items,
        "ConsumedCapacity": {"TableName": "t", "CapacityUnits": reported},
    }
    meter._after_call(types.SimpleNamespace(status_code=200), parsed, model)
    return meter.usage(meter.actor).read_units - before


def test_a_query_that_finds_nothing_books_the_least_read_of_its_kind() -> None:
    meter = AwsMeter()
    assert _query(meter, consistent=False, reported=0.0, items=0) == 0.5
    assert _query(meter, consistent=True, reported=0.0, items=0) == 1.0


def test_a_query_that_finds_rows_books_what_the_engine_reports() -> None:
    meter = AwsMeter()
    assert _query(meter, consistent=True, reported=2.0, items=3) == 2.0
    assert _query(meter, consistent=False, reported=0.5, items=1) == 0.5


# The meter's time inside the invocation, long beside the function's own 10 ms: a billed
# time under it has left it out, however late a busy machine wakes the function's sleep.
METER_S = 0.5


class _SlowPricer:
    """Stands in for the pricer's read of an item before its write."""

    def before(self, op: str, params: dict[str, Any]) -> None:
        time.sleep(METER_S)


def test_an_invocation_s_billed_time_leaves_out_the_meter_s_own() -> None:
    rig = Rig()
    rig.meter.pricer = _SlowPricer()  # type: ignore[assignment]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        rig.meter._before_call({"TableName": "t"}, _model("PutItem"))  # the meter: METER_S
        time.sleep(0.01)  # the function's own work
        return {}

    rig.functions["api"] = types.SimpleNamespace(handler=handler)  # type: ignore[assignment]
    rig.invoke("api", {})
    [billed] = rig.calls["api"].billed_ms
    assert 10 <= billed < METER_S * 1000
    assert rig.meter.own_time()[0] >= METER_S
