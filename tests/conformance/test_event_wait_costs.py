"""What an event wait costs, on DynamoDB Local: write units as AWS bills them (the store's
writes and the timeline rows the stream makes of them) and read units as DynamoDB reports them,
for placing an `event` block, for an event that clears one waiting block, and for an event
nothing waits for. docs/autonomy.md states these figures; this test keeps them true."""

from __future__ import annotations

from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.bills import Bills
from tests.conformance.contract import SPACE, make_world
from tests.conftest import ADMIN, Rig


def _measure(rig: Rig, bills: Bills, act: object) -> tuple[float, float]:
    rig.pump.drain()
    bills.writes.clear()
    reads = rig.store.meter.read_units
    assert callable(act)
    act()
    read = rig.store.meter.read_units - reads
    rig.pump.drain()  # the timeline rows the stream writes for it
    return sum(units for _, units in bills.writes), read


def test_what_an_event_wait_costs(rig: Rig, ddb_local: DynamoDBLocal) -> None:
    make_world(rig.svc)
    bills = Bills(rig, ddb_local.endpoint)
    task, _ = rig.svc.filing.create_task(ADMIN, SPACE, "waits", None, None, {}, None, None)
    block = rig.svc.event_waits.block
    send = rig.svc.event_waits.send
    place = _measure(rig, bills, lambda: block(ADMIN, task.id, "event", None, event="e", key="1"))
    clear = _measure(rig, bills, lambda: send(ADMIN, SPACE, "e", "1", {"sha": "abc"}))
    idle = _measure(rig, bills, lambda: send(ADMIN, SPACE, "e", "nobody", None))
    print(
        "\nevent waits (write units, read units): "
        f"place {place[0]:g}, {place[1]:g}; event clearing one {clear[0]:g}, {clear[1]:g}; "
        f"event clearing none {idle[0]:g}, {idle[1]:g}"
    )
    # Placing: the wait row (1); the block on the task row with the scheduler row's hold, one
    # transaction (4: AWS bills its items twice); the timeline row (1). Reads, consistent: the
    # task (twice: the caller's check, the block's own read), the instance row, the kept event.
    assert place == (6, 4)
    # Clearing one: the kept event (1), the same transaction (4), the wait row's delete (1),
    # the timeline row (1). Reads: the instance row, the wait page, the task, the next page.
    assert clear == (7, 4)
    # Nothing waiting: the kept event; the instance row and one read of the empty partition.
    assert idle == (1, 2)
