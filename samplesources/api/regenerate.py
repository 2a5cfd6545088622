"""Writes the sample API Gateway HTTP API (v2) events in this folder, one per route.

Placeholders in {{…}} (tokens, ids, names) are filled in by whoever replays them; see
tests/aws/test_samples.py. Run: .venv/bin/python samplesources/api/regenerate.py
"""

import json
from pathlib import Path

from tenure_cli.local.frontdoor import to_event

HERE = Path(__file__).parent
ROUTES = [
    ("health", "GET", "/api/v1/health", None, None),
    ("openapi", "GET", "/api/v1/openapi.json", None, None),
    (
        "create_space",
        "POST",
        "/api/v1/spaces",
        "ADMIN_TOKEN",
        {"key": "{{SPACE}}", "name": "Operations"},
    ),
    (
        "create_workflow",
        "POST",
        "/api/v1/workflows",
        "ADMIN_TOKEN",
        {
            "space": "{{SPACE}}",
            "slug": "nightly-sweep",
            "name": "Nightly sweep",
            "description": "Clears old artefacts",
        },
    ),
    (
        "create_pool",
        "POST",
        "/api/v1/pools",
        "ADMIN_TOKEN",
        {
            "name": "{{POOL}}",
            "space": "{{SPACE}}",
            "kind": "command",
            "renew_seconds": 10,
            "grace_seconds": 50,
            "toleration_seconds": 300,
            "on_expiry": "requeue",
        },
    ),
    (
        "create_worker_token",
        "POST",
        "/api/v1/tokens",
        "ADMIN_TOKEN",
        {"name": "{{TOKEN_NAME}}", "kind": "worker", "pools": ["{{POOL}}"]},
    ),
    (
        "create_task",
        "POST",
        "/api/v1/tasks",
        "ADMIN_TOKEN",
        {
            "space": "{{SPACE}}",
            "title": "Rotate the logs",
            "workflow": "nightly-sweep",
            "body": "Rotate and compress /var/log/app",
            "properties": {"host": "web-1"},
            "pool": "{{POOL}}",
            "max_attempts": 3,
        },
    ),
    ("get_task", "GET", "/api/v1/tasks/{{TASK_ID}}", "ADMIN_TOKEN", None),
    ("task_activity", "GET", "/api/v1/tasks/{{TASK_ID}}/activity", "ADMIN_TOKEN", None),
    (
        "claim",
        "POST",
        "/api/v1/pools/{{POOL}}/claim",
        "WORKER_TOKEN",
        {"worker_id": "laptop-1", "worker_version": "1.4.2", "wait_seconds": 0},
    ),
    ("start", "POST", "/api/v1/leases/{{LEASE_ID}}/start", "LEASE_TOKEN", None),
    (
        "heartbeat",
        "POST",
        "/api/v1/leases/{{LEASE_ID}}/heartbeat",
        "LEASE_TOKEN",
        {"lease_seconds": 300},
    ),
    (
        "worker_heartbeat",
        "POST",
        "/api/v1/workers/laptop-1/heartbeat",
        "WORKER_TOKEN",
        {"leases": [{"id": "{{LEASE_ID}}", "fence": 1}]},
    ),
    ("payload", "GET", "/api/v1/leases/{{LEASE_ID}}/payload", "LEASE_TOKEN", None),
    (
        "list_leases",
        "GET",
        "/api/v1/leases?space={{SPACE}}&state=running&limit=10",
        "ADMIN_TOKEN",
        None,
    ),
    ("get_lease", "GET", "/api/v1/leases/{{LEASE_ID}}", "ADMIN_TOKEN", None),
    ("list_workers", "GET", "/api/v1/workers?pool={{POOL}}", "ADMIN_TOKEN", None),
    ("pause", "POST", "/api/v1/leases/{{LEASE_ID}}/pause", "ADMIN_TOKEN", None),
    ("resume", "POST", "/api/v1/leases/{{LEASE_ID}}/resume", "ADMIN_TOKEN", None),
    (
        "complete",
        "POST",
        "/api/v1/leases/{{LEASE_ID}}/complete",
        "LEASE_TOKEN",
        {
            "outcome": "success",
            "details": {"rotated": 3},
            "result": {"summary": "rotated 3 files"},
            "usage": {"input_tokens": 1200, "output_tokens": 340},
            "report_id": "r-1",
        },
    ),
    ("enqueue", "POST", "/api/v1/tasks/{{TASK_ID}}/enqueue", "ADMIN_TOKEN", {"pool": "{{POOL}}"}),
    (
        "fail",
        "POST",
        "/api/v1/leases/{{LEASE_ID}}/fail",
        "LEASE_TOKEN",
        {"error": "disk full", "metadata": {"command": "logrotate"}},
    ),
    (
        "release",
        "POST",
        "/api/v1/leases/{{LEASE_ID}}/release",
        "LEASE_TOKEN",
        {"reason": "handoff"},
    ),
    ("kill", "POST", "/api/v1/leases/{{LEASE_ID}}/kill", "ADMIN_TOKEN", None),
    ("cancel", "POST", "/api/v1/leases/{{LEASE_ID}}/cancel", "ADMIN_TOKEN", None),
]


def main() -> None:
    for number, (name, method, path, token, body) in enumerate(ROUTES):
        headers = {
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "user-agent": "curl/8.5.0",
            "accept": "*/*",
            "x-forwarded-proto": "https",
        }
        if token:
            headers["authorization"] = "Bearer {{" + token + "}}"
        raw = json.dumps(body).encode() if body is not None else b""
        if body is not None:
            headers["content-type"] = "application/json"
            headers["content-length"] = str(len(raw))
        event = to_event(method, path, headers, raw)
        ctx = event["requestContext"]
        ctx.update(
            requestId=f"Sample{number:02d}RequestId=",
            apiId="abc123",
            domainName=headers["host"],
            domainPrefix="abc123",
            accountId="123456789012",
            time="29/Nov/2026:11:00:00 +0000",
            timeEpoch=1795950000000,
        )
        ctx["http"]["sourceIp"] = "203.0.113.7"
        out = HERE / f"{number:02d}_{name}.json"
        out.write_text(json.dumps(event, indent=2) + "\n")


if __name__ == "__main__":
    main()
