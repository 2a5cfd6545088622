"""`tenure bench coldstart`: what a cold API function pays before its first request, beside
what any Python function talking to DynamoDB pays.

Each sample is a fresh interpreter (a new Lambda environment is one): it times, from its
first line, the imports and the first client, and prints the milliseconds. The two kinds of
sample alternate, so a busy machine slows both alike; the medians are compared.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
TARGET_RATIO = 1.3

BARE = """
import time
t0 = time.perf_counter()
import boto3
boto3.client("dynamodb", region_name="us-east-1")
print((time.perf_counter() - t0) * 1000)
"""

API = """
import importlib.util, sys, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("api_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure import wiring
wiring.build_store()
print((time.perf_counter() - t0) * 1000)
"""


def _sample(code: str, *args: str, traced: bool = False) -> float:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "TENURE_TABLE": "coldstart",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env["AWS_LAMBDA_FUNCTION_NAME"] = "tenure-api"
    env["LAMBDA_TASK_ROOT"] = str(ROOT / "functions" / "api")
    if traced:  # deployed with the template's Tracing=Active: the X-Ray SDK is loaded
        env["TENURE_TRACING"] = "on"
    else:  # the template's default (PassThrough)
        env.pop("TENURE_TRACING", None)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def run(runs: int = 5) -> dict[str, Any]:
    handler = ROOT / "functions" / "api" / "app.py"
    if not handler.exists():
        raise FileNotFoundError(f"{handler} is missing: run the benches from a Tenure checkout")
    _sample(BARE)  # the first run of each warms the OS's file cache, like a reused host
    _sample(API, str(handler))
    bare, plain, traced = [], [], []
    for _ in range(runs):
        bare.append(_sample(BARE))
        plain.append(_sample(API, str(handler)))
        traced.append(_sample(API, str(handler), traced=True))
    b = statistics.median(bare)
    a, t = statistics.median(plain), statistics.median(traced)
    return {
        "bench": "coldstart",
        "runs": runs,
        "bare_boto3_dynamodb_client_ms": {"median": round(b, 1), "samples": _r(bare)},
        "api_handler_import_and_first_client_ms": {"median": round(a, 1), "samples": _r(plain)},
        "ratio": round(a / b, 3),
        "api_tracing_on_ms": {"median": round(t, 1), "samples": _r(traced)},
        "ratio_tracing_on": round(t / b, 3),
        "target_ratio": TARGET_RATIO,
        "within_target": a / b <= TARGET_RATIO,
        "how": "each sample a fresh interpreter timing its own imports and first DynamoDB "
        "client (interpreter start-up is in neither); the API side imports "
        "functions/api/app.py, the deployed entry point, and builds the store, with Lambda's "
        "environment set. `ratio` as the template deploys it by default (Tracing "
        "PassThrough); `ratio_tracing_on` with Tracing=Active (the X-Ray SDK loaded). The "
        "kinds alternate, medians compared",
    }


def _r(values: list[float]) -> list[float]:
    return [round(v, 1) for v in values]


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
