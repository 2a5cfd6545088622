"""What each scheduling control costs when it is on, in write units as AWS bills them (the
store's writes and the stream's timeline rows they cause), on DynamoDB Local: a filing, a
claim and a failure with every control off, then with each on. The README and
docs/pools-and-capacity.md state these figures; this test keeps them true."""

from __future__ import annotations

from dataclasses import dataclass

from tenure.app.runs import RunControls
from tenure_cli.local.engines import DynamoDBLocal

from tests.conformance.bills import Bills
from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal

RETRYING = {
    "retry": {
        "on_failure": True,
        "backoff": {"initial_seconds": 10, "multiplier": 2, "max_seconds": 600, "jitter": False},
    }
}


@dataclass
class Lifecycle:
    filing: float
    claim: float
    end: float

    @property
    def lease(self) -> float:
        return self.filing + self.claim + self.end


def _lifecycle(rig: Rig, bills: Bills, controls: RunControls, fail: bool = False) -> Lifecycle:
    rig.pump.drain()
    bills.writes.clear()
    _, lease = rig.svc.filing.create_task(
        ADMIN, SPACE, "metered", None, None, {}, ALPHA, None, controls=controls
    )
    assert lease is not None
    rig.pump.drain()
    filing = sum(units for _, units in bills.writes)
    bills.writes.clear()
    won = rig.svc.claims.claim(WORKER, ALPHA, "meter", "1.0", 0, None)
    assert won is not None and won.lease.id == lease.id
    rig.pump.drain()
    claim = sum(units for _, units in bills.writes)
    bills.writes.clear()
    token = lease_principal(lease.id)
    if fail:
        rig.svc.reports.fail(token, lease.id, {"reason": "metered"})
    else:
        rig.svc.reports.complete(token, lease.id, {})
    rig.pump.drain()
    end = sum(units for _, units in bills.writes)
    return Lifecycle(filing, claim, end)


def test_what_each_scheduling_control_costs_when_it_is_on(
    rig: Rig, ddb_local: DynamoDBLocal
) -> None:
    make_world(rig.svc)
    bills = Bills(rig, ddb_local.endpoint)
    # The worker's own row is written by its first claim only: take it out of the figures.
    _lifecycle(rig, bills, RunControls())
    off = _lifecycle(rig, bills, RunControls())
    priority = _lifecycle(rig, bills, RunControls(priority=9))
    priority_again = _lifecycle(rig, bills, RunControls(priority=9))
    expiring = _lifecycle(rig, bills, RunControls(expires_in_seconds=3600))
    run_limited = _lifecycle(rig, bills, RunControls(max_run_seconds=3600))
    failed = _lifecycle(rig, bills, RunControls(), fail=True)
    rig.svc.pools.update_pool(ADMIN, ALPHA, RETRYING)
    retried = _lifecycle(rig, bills, RunControls(), fail=True)
    print(
        "\nwrite units (filing, claim, end; per lease): "
        + "; ".join(
            f"{name} {c.filing:g}+{c.claim:g}+{c.end:g}={c.lease:g}"
            for name, c in (
                ("off", off),
                ("priority 9, first", priority),
                ("priority 9, again", priority_again),
                ("expires_in", expiring),
                ("max_run", run_limited),
                ("failure", failed),
                ("failure with retry", retried),
            )
        )
    )
    # A priority other than the default marks its partition on the pool row once (then only
    # every few minutes per process): the lease's own writes are the same as the default's.
    assert priority_again.lease == off.lease
    assert priority.lease - off.lease <= 2
    # A queue timeout puts the pending lease in the sweeper's index (added at filing, removed
    # at claim); a run timeout rides on the claim's own index entry.
    assert expiring.lease - off.lease == 3
    assert run_limited.lease == off.lease
    # A retry's new run (lease, job, the task's pointer, a check of the old job) is committed
    # with the failure, in one transaction, which AWS bills at twice each item's units.
    assert 8 <= retried.end - failed.end <= 14
