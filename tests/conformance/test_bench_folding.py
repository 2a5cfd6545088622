"""The cost bench's worker folds its renewal's heartbeat into a report that claims, as the
runner does: where one job ends while another goes on, the report carries the other lease's
heartbeat, the service renews it, and no heartbeat request is sent that renewal. (The
reference workload's leases end together, so its runs never show this case.)"""

from __future__ import annotations

import uuid
from typing import Any

from tenure.domain.outbound import ENDINGS
from tenure_cli.bench import cost
from tenure_cli.bench.rig import Rig
from tenure_cli.bench.workload import JOB_SECONDS, RENEW_SECONDS
from tenure_cli.local.engines import DynamoDBLocal

BEAT = "POST /api/v1/workers/<worker_id>/heartbeat"
COMPLETE = "POST /api/v1/leases/<lease_id>/complete"


def test_a_report_that_claims_carries_the_heartbeat_of_the_lease_that_goes_on(
    ddb_local: DynamoDBLocal,
) -> None:
    table = f"fold-{uuid.uuid4().hex[:8]}"
    with Rig(ddb_endpoint=ddb_local.endpoint, table=table, outbound_events=ENDINGS) as rig:
        admin, (token,) = cost._set_up(rig, 1)
        cost._file(rig, admin, 3, 0)
        worker = cost.BenchWorker(rig, token, "bench-host-0", "bench")
        queue = [2]
        worker.tick(queue)  # claims two leases, running
        ending, going_on = worker.held
        ending.since -= JOB_SECONDS * 1000  # its job ends at the next tick
        queue[0] = 1  # the third task is left for the report's claim
        answers: list[dict[str, Any]] = []
        sent = worker.client.complete

        def complete(*args: Any, **kwargs: Any) -> Any:
            answers.append(sent(*args, **kwargs))
            return answers[-1]

        worker.client.complete = complete  # type: ignore[method-assign]
        rig.clock.advance(RENEW_SECONDS)
        worker.tick(queue)
        assert rig.routes[COMPLETE] == 1 and rig.routes[BEAT] == 0, rig.routes
        ((row,),) = (a["heartbeat"] for a in answers)
        assert row["id"] == going_on.lease_id and row["fence"] == going_on.fence
        assert "error" not in row and row["state"] == "running" and row["revoke"] is None
        assert worker.refused == 0
        assert len(worker.held) == 2 and queue[0] == 0, "and the report claimed the next"
        rig.clock.advance(RENEW_SECONDS)
        worker.tick(queue)  # nothing ends: the heartbeat goes apart, as before
        assert rig.routes[BEAT] == 1
