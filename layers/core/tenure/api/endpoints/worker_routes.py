"""The routes a worker calls, as the HTTP API function's resolver serves them: with its worker
token, the claim and the worker's heartbeat; with a lease's token, that lease's start,
heartbeat, reports and payload. Each registration serves the route's one function in
api/worker_logic.py, which the worker function calls too. (The operators' routes for leases
are in operator_leases.py, the workers list in operator_workers.py.)"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from tenure.api import models
from tenure.api import worker_logic as logic
from tenure.api.routes import BASE
from tenure.api.surface import op, served

LEASE = f"{BASE}/leases/<lease_id>"

op("POST", f"{BASE}/pools/<pool>/claim", 200, models.Claimed, 404, 409, 422, extra=204)(
    served(logic.claim, pool=str, body=Annotated[models.Claim, Body()])
)
op("POST", f"{LEASE}/start", 200, models.LeaseAnswer, 404, 409)(served(logic.start, lease_id=str))
op("POST", f"{LEASE}/heartbeat", 200, models.Beat, 404, 409, 422)(
    served(logic.heartbeat, lease_id=str, body=(Annotated[models.Heartbeat | None, Body()], None))
)
op("POST", f"{BASE}/workers/<worker_id>/heartbeat", 200, models.WorkerBeat, 404, 422)(
    served(logic.worker_heartbeat, worker_id=str, body=Annotated[models.WorkerHeartbeat, Body()])
)
op("POST", f"{LEASE}/complete", 200, models.ReportAnswer, 403, 404, 409, 422)(
    served(logic.complete, lease_id=str, body=(Annotated[models.Complete | None, Body()], None))
)
op("POST", f"{LEASE}/fail", 200, models.ReportAnswer, 403, 404, 409, 422)(
    served(logic.fail, lease_id=str, body=Annotated[models.Fail, Body()])
)
op("POST", f"{LEASE}/release", 200, models.LeaseAnswer, 404, 409, 422)(
    served(logic.release, lease_id=str, body=(Annotated[models.Release | None, Body()], None))
)
op("GET", f"{LEASE}/payload", 200, models.Payload, 404, 409)(served(logic.payload, lease_id=str))
