"""The Lambda entry points in functions/*/app.py: the authorizer speaks Powertools' payload
2.0 authorizer types, and a handler is traced only where the stack turned tracing on."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tenure import wiring
from tenure.config import export
from tenure_cli.local.lambda_host import _Context

from tests.aws.mocked import mocked_aws

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))
ADMIN_TOKEN = "tnr_o_handlers-admin-" + uuid.uuid4().hex


def load(function: str) -> ModuleType:
    """functions/<function>/app.py under a name of its own (every entry point is `app`)."""
    spec = importlib.util.spec_from_file_location(
        f"fn_{function}", ROOT / "functions" / function / "app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def authorizer_event(authorization: str | None) -> dict[str, Any]:
    """What API Gateway sends an HTTP API authorizer (payload 2.0), from a sample request."""
    text = (ROOT / "samplesources" / "api" / "07_get_task.json").read_text()
    event: dict[str, Any] = json.loads(text.replace("{{TASK_ID}}", "task_x"))
    event["headers"].pop("authorization")
    path = event["rawPath"]
    if authorization is not None:
        event["headers"]["Authorization"] = authorization
    event |= {
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:abc123/$default/GET{path}",
        "identitySource": [authorization] if authorization else [],
    }
    return event


@pytest.fixture
def service() -> Iterator[None]:
    with mocked_aws():
        export("TENURE_TABLE", "handlers")
        export("TENURE_DYNAMODB_ENDPOINT", "")
        wiring.service.cache_clear()
        wiring.build_store().create_table()
        wiring.service().tokens.bootstrap_admin(ADMIN_TOKEN)
        yield
        wiring.service.cache_clear()


def test_the_authorizer_function_passes_the_principal_on_in_a_simple_response(
    service: None,
) -> None:
    handler = load("authorizer").handler
    answer = handler(authorizer_event(f"Bearer {ADMIN_TOKEN}"), _Context())
    assert answer["isAuthorized"] is True
    assert set(answer) == {"isAuthorized", "context"}
    principal = json.loads(answer["context"]["principal"])
    assert principal["kind"] == "operator" and principal["role"] == "admin"
    assert ADMIN_TOKEN not in json.dumps(answer), "the token itself is never passed on"


@pytest.mark.parametrize("authorization", [None, "Bearer tnr_o_unknown", "Basic abc"])
def test_the_authorizer_function_lets_a_refusal_through_with_its_reason(
    service: None, authorization: str | None
) -> None:
    answer = load("authorizer").handler(authorizer_event(authorization), _Context())
    assert answer["isAuthorized"] is True  # the API function answers with Tenure's envelope
    assert answer["context"]["principal"] == ""
    assert answer["context"]["reason"]


def _layers(handler: Any) -> list[str]:
    names = []
    while hasattr(handler, "__wrapped__"):
        names.append(handler.__code__.co_qualname)  # wraps() copies __qualname__, not this
        handler = handler.__wrapped__
    return names


@pytest.mark.parametrize("function", FUNCTIONS)
def test_a_handler_is_traced_only_where_the_stack_turned_tracing_on(
    function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TENURE_TRACING", raising=False)
    plain = _layers(load(function).handler)
    assert not any("capture_lambda_handler" in name for name in plain), (function, plain)
    monkeypatch.setenv("TENURE_TRACING", "on")
    traced = _layers(load(function).handler)
    assert any("capture_lambda_handler" in name for name in traced), (function, traced)


def test_without_tracing_no_x_ray_sdk_is_loaded_by_the_api_function() -> None:
    entry = str(ROOT / "functions" / "api" / "app.py")
    code = (
        "import importlib.util, sys;"
        f"spec = importlib.util.spec_from_file_location('api_app', {entry!r});"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        "print('aws_xray_sdk' in sys.modules)"
    )
    env = {**os.environ, "AWS_REGION": "us-east-1", "TENURE_TABLE": "t"}
    env.pop("TENURE_TRACING", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
