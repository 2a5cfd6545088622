"""Functions that validate no request body load no pydantic: their settings are plain values
read from the environment, so building the store, as each does before its first event, needs
none (each would pay ~30-60 ms of CPU of its cold start for it, `tenure bench coldstart`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("entry", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure import wiring
wiring.build_store()
print(json.dumps({"table": wiring.settings().table_name, "modules": sorted(sys.modules)}))
"""


def _started(function: str) -> dict[str, object]:
    env = {
        **os.environ,
        "AWS_REGION": "us-east-1",
        "TENURE_TABLE": "probe",
        "AWS_LAMBDA_FUNCTION_NAME": f"tenure-{function}",
    }
    env.pop("TENURE_TRACING", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / function / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


@pytest.mark.parametrize("function", ["authorizer", "sweeper", "reactor", "scheduler"])
def test_a_function_that_validates_no_body_starts_without_pydantic(function: str) -> None:
    started = _started(function)
    assert started["table"] == "probe"  # the settings were read from this environment
    modules = started["modules"]
    assert isinstance(modules, list) and "tenure.wiring" in modules
    assert [m for m in modules if m == "pydantic" or m.startswith("pydantic.")] == []


def test_the_worker_function_still_loads_pydantic_for_its_routes_bodies() -> None:
    # The probe can tell: the worker routes validate their bodies with the API's models.
    modules = _started("worker")["modules"]
    assert isinstance(modules, list) and "pydantic" in modules
