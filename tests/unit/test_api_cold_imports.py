"""What the API function leaves for later when it starts (its cold start is measured): each module
or model named here was made lazy on purpose, and loading it again at import would cost the
cold start again (`tenure bench coldstart`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app, surface
from tenure.config import settings

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, json, sys
import pydantic
spec = importlib.util.spec_from_file_location("api_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure.api import models
built = sorted(
    name for name, value in vars(models).items()
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel)
    and value.__pydantic_complete__
)
print(json.dumps({"modules": sorted(sys.modules), "built": built}))
"""

# Loaded only where a route needs them: the OpenAPI document, the authorizer's event classes
# (the authorizer is another function), the MCP SDK and the X-Ray SDK (tracing is opt-in).
NOT_AT_IMPORT = (
    "aws_lambda_powertools.event_handler.openapi.models",
    "aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event",
    "tenure.api.authorizer",
    "mcp",
    "aws_xray_sdk",
)


@pytest.fixture(scope="module")
def started() -> dict[str, Any]:
    env = {**os.environ, "AWS_REGION": "us-east-1", "AWS_LAMBDA_FUNCTION_NAME": "tenure-api"}
    env.pop("TENURE_TRACING", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / "api" / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def test_the_api_function_starts_without_what_only_some_routes_use(
    started: dict[str, Any],
) -> None:
    assert "tenure.api.app" in started["modules"]  # the probe did import the API
    loaded = [
        name
        for name in NOT_AT_IMPORT
        if any(m == name or m.startswith(name + ".") for m in started["modules"])
    ]
    assert loaded == []


def test_no_api_model_builds_its_validator_at_import(started: dict[str, Any]) -> None:
    assert started["built"] == []


def test_every_route_s_query_parameters_can_be_read() -> None:
    """Read on a route's first call now, not at import: a broken annotation must still fail
    here rather than on a request."""
    assert app.ENDPOINTS  # the route modules, registered
    assert len(surface.HANDLERS) > 50
    for method, rule in surface.HANDLERS:
        known = surface.known_query(method, rule)
        assert known is not None
        assert all(isinstance(name, str) for name in known)
    assert surface.known_query("GET", "/api/v1/leases") >= {"space", "limit", "cursor"}
    assert surface.known_query("GET", "/api/v1/health") is None  # public: not checked


def test_the_service_makes_its_s3_logs_and_scheduler_clients_on_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []
    monkeypatch.setenv("TENURE_ATTACHMENTS_BUCKET", "bucket")
    monkeypatch.setenv("TENURE_LOG_GROUP", "group")
    monkeypatch.setenv("TENURE_SCHEDULER_TARGET_ARN", "arn:aws:lambda:us-east-1:1:function:f")
    monkeypatch.setenv("TENURE_SCHEDULER_ROLE_ARN", "arn:aws:iam::1:role/r")

    def client(service: str) -> SimpleNamespace:
        made.append(service)
        return SimpleNamespace(generate_presigned_url=f"{service} client's")

    monkeypatch.setattr(wiring, "aws_client", client)
    settings.cache_clear()
    try:
        svc = wiring.build_service(store=object())  # type: ignore[arg-type]
        assert svc.artifacts.blobs is not None and svc.artifacts.log_sink is not None
        assert svc.rules.schedules is not None
        assert made == []
        assert svc.artifacts.blobs.client.generate_presigned_url == "s3 client's"  # its first use
        assert made == ["s3"]
    finally:
        settings.cache_clear()
