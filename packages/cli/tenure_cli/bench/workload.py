"""The cost bench's reference workload in figures, and the cost budget: what the workload
(bench/cost.py) runs and what its report (bench/cost_report.py) prices and holds to."""

from __future__ import annotations

# The worker routes: on the template's default WorkerEndpoint (a Lambda function URL) they
# reach the worker function directly, with no API Gateway request and no authorizer call.
WORKER_ROUTES = (
    "/claim",
    "/start",
    "/heartbeat",
    "/complete",
    "/fail",
    "/release",
    "/payload",
)


def is_worker_route(route: str) -> bool:
    method, _, path = route.partition(" ")
    return path.endswith(WORKER_ROUTES) or (
        method == "POST" and path.endswith(("/logs", "/attachments"))
    )


# The cost budget's targets, in one place: the budget test and the report both read these.
# What a lease costs later (its retention reclaim) is in each figure.
BUDGET = {
    "lifecycle_write_units": 11.0,
    "read_units_per_lease": 15.0,
    "requests_per_lease": 6.0,
    "usd_per_million_leases": 14.0,
    "usd_per_million_leases_all_events": 19.0,
    "usd_per_million_leases_provisioned": 9.0,
}

JOB_SECONDS = 120
RENEW_SECONDS = 10
LEASES_PER_WORKER = 4
EMAIL_SHARE = 0.10
# The volume the fixed monthly costs are spread over in `usd_per_million_leases_with_fixed`.
LEASES_PER_MONTH = 1_000_000
# Whose AWS requests are Tenure's per-lease cost: its functions, SES's delivery of mail, and
# Lambda's pollers (SQS receives and deletes; the stream reads of a DynamoDB trigger are free).
PER_LEASE_ACTORS = ["api", "authorizer", "reactor", "inbound", "ses", "lambda-pollers"]
PER_LEASE_FUNCTIONS = ["api", "authorizer", "reactor", "inbound"]
