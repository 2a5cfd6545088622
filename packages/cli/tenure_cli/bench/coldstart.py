"""`tenure bench coldstart`: what a cold API function pays before its first request, and up to
its first answer, and what the worker function (the worker routes on a function URL) pays,
beside what any Python function talking to DynamoDB pays.

Each sample is a fresh interpreter (a new Lambda environment is one): it times, from its
first line, the imports and the first client (or the first request), and prints the
milliseconds of wall clock and of CPU. The kinds of sample alternate, so a busy machine slows
them alike; the medians are compared. CPU time is the steadier figure on a shared machine
(another process's load stretches wall time, not CPU time), and a cold start's imports are
all CPU.

The tenure package is imported as the layer ships it (layers/core/build_layer.py): its
sources beside their bytecode, compiled ahead, in a folder of their own that comes first on
the samples' path, so no sample spends its time compiling the service's sources, as Lambda
does not. (The dependencies' bytecode is the environment's own, as pip compiled it.)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
TARGET_RATIO = 1.3
# The worker function imports only what the worker routes need: held to a bound of its own.
WORKER_TARGET_RATIO = 1.5
# Fewer fresh interpreters of each kind than this and one slow sample on a shared machine
# moves a median by more than the gaps the figures are read for.
MIN_RUNS = 7
# What `tenure bench coldstart` runs unless told: 7 runs resolve a median to about 5-10 %, a
# tenth of a 1.5 ratio; 11 to about half that. Each figure prints its CPU spread besides.
DEFAULT_RUNS = 11

# Every sample prints "<wall ms> <cpu ms>" last.
BARE = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
boto3.client("dynamodb", region_name="us-east-1")
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""

API = """
import importlib.util, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("api_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure import wiring
wiring.build_store()
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""

# The deployed entry's import, then its first request: a lease's heartbeat, the hot worker
# route (route match, the caller's principal from the authorizer's context, the body through
# Powertools' validation and pydantic, the service and its DynamoDB client built, one GetItem
# serialized, signed and its answer parsed, the error envelope). Only the network is left
# out: DynamoDB's answers are canned by botocore's before-send hook (`{}` to a read: no such
# item), so the answer is 404 lease_not_found, checked. Timed until handler() returns; only
# the hook's registration is outside the timed span.
REQUEST = """
import importlib.util, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("api_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import boto3
boto3.setup_default_session()  # timed: the request's first client would make it
t1, c1 = time.perf_counter(), time.process_time()
from botocore.awsrequest import AWSResponse

class Raw:
    def __init__(self, body):
        self.body = body
    def stream(self, **_):
        yield self.body

def canned(request, **_):
    target = request.headers.get("X-Amz-Target", b"")
    if "GetItem" not in (target.decode() if isinstance(target, bytes) else target):
        raise AssertionError("the heartbeat of an unknown lease reads one item, nothing else")
    headers = {"Content-Type": "application/x-amz-json-1.0"}
    return AWSResponse(request.url, 200, headers, Raw(b"{}"))

boto3.DEFAULT_SESSION.events.register("before-send.dynamodb", canned)
principal = {"kind": "lease", "token_id": "tok_bench", "lease_id": "lease_bench"}
path = "/api/v1/leases/lease_bench/heartbeat"
event = {
    "version": "2.0",
    "routeKey": "ANY /{proxy+}",
    "rawPath": path,
    "rawQueryString": "",
    "headers": {"content-type": "application/json", "authorization": "Bearer tnr_l_bench"},
    "requestContext": {
        "accountId": "000000000000", "apiId": "bench", "domainName": "bench",
        "domainPrefix": "bench", "requestId": "bench", "routeKey": "ANY /{proxy+}",
        "stage": "$default", "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 0,
        "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1",
                 "sourceIp": "127.0.0.1", "userAgent": "bench"},
        "authorizer": {"lambda": {"principal": json.dumps(principal)}},
    },
    "body": json.dumps({"lease_seconds": 60}),
    "isBase64Encoded": False,
}

class Context:
    function_name = "tenure-api"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:tenure-api"
    aws_request_id = "bench"

t2, c2 = time.perf_counter(), time.process_time()
out = module.handler(event, Context())
t3, c3 = time.perf_counter(), time.process_time()
code = json.loads(out["body"])["error"]["code"]
assert (out["statusCode"], code) == (404, "lease_not_found"), out
print(((t1 - t0) + (t3 - t2)) * 1000, ((c1 - c0) + (c3 - c2)) * 1000)
"""

# The worker function's first request: its entry imported, then one worker heartbeat through
# its handler up to the answer. On the function URL the bearer is checked in process, so the
# worker token's row is read (one GetItem, answered with the row `sys.argv[2]` holds, made by
# the bench with the store's own codec); every other call is answered `{}` (no such item, or
# done). The answer is checked: 200 with the one lease the body names unknown to the table.
WORKER_REQUEST = """
import importlib.util, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("worker_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import boto3
boto3.setup_default_session()  # timed: the request's first client would make it
t1, c1 = time.perf_counter(), time.process_time()
from botocore.awsrequest import AWSResponse
token, row = json.loads(sys.argv[2])

class Raw:
    def __init__(self, body):
        self.body = body
    def stream(self, **_):
        yield self.body

def canned(request, **_):
    target = request.headers.get("X-Amz-Target", b"")
    target = target.decode() if isinstance(target, bytes) else target
    body = request.body.decode() if isinstance(request.body, bytes) else request.body or ""
    found = row["PK"] == json.loads(body or "{}").get("Key", {}).get("PK")
    headers = {"Content-Type": "application/x-amz-json-1.0"}
    answer = json.dumps({"Item": row} if found else {}).encode()
    return AWSResponse(request.url, 200, headers, Raw(answer))

boto3.DEFAULT_SESSION.events.register("before-send.dynamodb", canned)
path = "/api/v1/workers/w-bench/heartbeat"
event = {
    "version": "2.0",
    "routeKey": "$default",
    "rawPath": path,
    "rawQueryString": "",
    "headers": {"content-type": "application/json", "authorization": "Bearer " + token},
    "requestContext": {
        "accountId": "anonymous", "apiId": "bench", "domainName": "bench",
        "domainPrefix": "bench", "requestId": "bench", "routeKey": "$default",
        "stage": "$default", "time": "01/Jan/2026:00:00:00 +0000", "timeEpoch": 0,
        "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1",
                 "sourceIp": "127.0.0.1", "userAgent": "bench"},
    },
    "body": json.dumps({"leases": [{"id": "lease_bench", "fence": 1}]}),
    "isBase64Encoded": False,
}

class Context:
    function_name = "tenure-worker"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:tenure-worker"
    aws_request_id = "bench"

t2, c2 = time.perf_counter(), time.process_time()
out = module.handler(event, Context())
t3, c3 = time.perf_counter(), time.process_time()
assert out["statusCode"] == 200, out
(beat,) = json.loads(out["body"])["leases"]
assert beat["id"] == "lease_bench" and beat.get("error", {}).get("code") == "lease_not_found", out
print(((t1 - t0) + (t3 - t2)) * 1000, ((c1 - c0) + (c3 - c2)) * 1000)
"""


def _worker_token() -> str:
    """A worker token and its row in DynamoDB's JSON (the WORKER_REQUEST sample's argument):
    made here, so the sample spends none of its time on it. Used within the minute, so the
    check notes no use (no write)."""
    import time

    from tenure.domain import fencing
    from tenure.domain.model import Token
    from tenure.store import codec, items, keys

    raw = fencing.TOKEN_PREFIX["worker"] + "coldstart-bench-secret"
    now = time.time_ns() // 1_000_000
    token = Token(
        id="tok_bench",
        name="bench",
        kind="worker",
        token_hash=fencing.hash_token(raw),
        created_at=now,
        last_used_at=now + 3_600_000,  # no note of use during the bench's run
    )
    row = codec.dump({**keys.token_key(token.token_hash), **items.token_item(token)})
    return json.dumps([raw, row])


# The floor any function on Powertools' HTTP resolver pays, whatever its routes: boto3 and
# its DynamoDB client, Powertools' logger, metrics and resolver with request validation on,
# and pydantic with one model built (validation builds at least one on the first request).
FLOOR = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
boto3.client("dynamodb", region_name="us-east-1")
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from pydantic import BaseModel
Logger(service="floor")
Metrics(namespace="Floor", service="floor")
APIGatewayHttpResolver(enable_validation=True)
type("Body", (BaseModel,), {"__annotations__": {"lease_seconds": int}})
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""

# Two rungs under the worker function, to show where its time goes beside the bare client:
# what any function on Powertools' logger and metrics pays, with no resolver and no pydantic
# (WORKER_FLOOR); then that plus the service's core the worker routes call, the bearer's
# check and the store built as the worker function builds it (its use cases composed alone,
# app/worker_tenure.py), still without the HTTP
# resolver, pydantic or the API's models (WORKER_CORE). The worker
# function pays both and then those three; what it pays above WORKER_CORE is what serving the
# worker routes through the resolver and its validation costs.
WORKER_FLOOR = """
import time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
boto3.client("dynamodb", region_name="us-east-1")
from aws_lambda_powertools import Logger, Metrics
Logger(service="floor")
Metrics(namespace="Floor", service="floor")
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""

WORKER_CORE = """
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
boto3.client("dynamodb", region_name="us-east-1")
from aws_lambda_powertools import Logger, Metrics
Logger(service="floor")
Metrics(namespace="Floor", service="floor")
import tenure.app.worker_tenure, tenure.api.routes, tenure.api.tokens
from tenure import wiring
wiring.build_store()
t1, c1 = time.perf_counter(), time.process_time()
for name in ("pydantic", "aws_lambda_powertools.event_handler", "tenure.api.models"):
    assert name not in sys.modules, name + " is loaded: the rung would measure it"
print((t1 - t0) * 1000, (c1 - c0) * 1000)
"""


@contextlib.contextmanager
def shipped_service() -> Iterator[Path]:
    """The tenure package as the layer's build leaves it, in a temporary folder, compiled by
    this interpreter (the one the samples run)."""
    spec = importlib.util.spec_from_file_location(
        "build_layer", ROOT / "layers" / "core" / "build_layer.py"
    )
    if spec is None or spec.loader is None:
        raise FileNotFoundError("layers/core/build_layer.py is missing: run from a checkout")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    with tempfile.TemporaryDirectory(prefix="tenure-coldstart-") as tmp:
        layer = Path(tmp)
        builder.copy_service(layer)
        if not builder.precompile(layer, mounted_at=None):
            raise RuntimeError("the service's sources did not compile")
        yield layer


# The folder the samples import tenure from (set by run(); None: wherever it is installed).
LAYER: list[Path] = []


def _sample(
    code: str, *args: str, traced: bool = False, function: str = "api"
) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=_env(traced, function),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _env(traced: bool, function: str) -> dict[str, str]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
        "TENURE_TABLE": "coldstart",
        "PYTHONDONTWRITEBYTECODE": "1",
        # What the template sets on the API function: each names a client the service holds.
        "TENURE_ATTACHMENTS_BUCKET": "coldstart-attachments",
        "TENURE_LOG_GROUP": "/tenure/coldstart/leases",
        "TENURE_SCHEDULER_TARGET_ARN": "arn:aws:lambda:us-east-1:000000000000:function:sched",
        "TENURE_SCHEDULER_ROLE_ARN": "arn:aws:iam::000000000000:role/coldstart",
        "POWERTOOLS_METRICS_NAMESPACE": "Tenure",
        "POWERTOOLS_LOG_LEVEL": "WARNING",  # the sample's own stdout carries its figures
    }
    if LAYER:
        env["PYTHONPATH"] = os.pathsep.join([str(LAYER[0]), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
    env["AWS_LAMBDA_FUNCTION_NAME"] = f"tenure-{function}"
    env["LAMBDA_TASK_ROOT"] = str(ROOT / "functions" / function)
    if function == "worker":  # the template gives the worker function no scheduler settings
        env.pop("TENURE_SCHEDULER_TARGET_ARN")
        env.pop("TENURE_SCHEDULER_ROLE_ARN")
    if traced:  # deployed with the template's Tracing=Active: the X-Ray SDK is loaded
        env["TENURE_TRACING"] = "on"
    else:  # the template's default (PassThrough)
        env.pop("TENURE_TRACING", None)
    return env


def _imported_from() -> Path:
    """Where a sample finds the tenure package."""
    out = subprocess.run(
        [sys.executable, "-c", "import tenure; print(tenure.__file__)"],
        env=_env(False, "api"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return Path(out.stdout.strip())


KINDS = (
    "bare",
    "api",
    "traced",
    "request",
    "floor",
    "worker",
    "worker_request",
    "worker_floor",
    "worker_core",
)


def run(runs: int = DEFAULT_RUNS) -> dict[str, Any]:
    if runs < MIN_RUNS:
        raise ValueError(f"at least {MIN_RUNS} runs of each kind are needed for steady medians")
    with shipped_service() as layer:
        LAYER[:] = [layer]
        try:
            found = _imported_from()
            if not found.is_relative_to(layer):
                raise RuntimeError(f"the samples would import tenure from {found}, not {layer}")
            return _run(runs)
        finally:
            LAYER.clear()


# What the report says each figure is, in its own words.
HOW = (
    "each sample a fresh interpreter timing its own imports and first DynamoDB "
    "client (interpreter start-up is in neither); tenure imported as the layer ships it, "
    "its bytecode compiled ahead (layers/core/build_layer.py); the API side imports "
    "functions/api/app.py, the deployed entry point, and builds the store, with Lambda's "
    "environment set. `ratio` as the template deploys it by default (Tracing "
    "PassThrough); `ratio_tracing_on` with Tracing=Active (the X-Ray SDK loaded). "
    "`api_import_and_first_request_ms`: the import, then one lease heartbeat through the "
    "handler up to its answer, the service and its client made inside it as in Lambda, "
    "DynamoDB's answer canned (no network; 404 lease_not_found). "
    "`powertools_floor_ms`: boto3's client plus Powertools' logger, metrics and "
    "validating resolver and one pydantic model, what any such function pays. "
    "`ratio_worker`: the API's sample on functions/worker/app.py, the worker function's "
    "entry (the worker routes alone), `worker_within_target` judged on its CPU ratio; "
    "`worker_import_and_first_request_ms` that import, then one worker heartbeat "
    "through its handler, the bearer's row canned (no network; 200, the lease it names "
    "unknown); `worker_floor_ms` the bare client plus Powertools' "
    "logger and metrics (no resolver, no pydantic), `worker_core_ms` that plus the "
    "service's core and store the worker routes call (still no resolver, pydantic or "
    "API models): the worker function's time above it is the resolver's and "
    "validation's. Each "
    "figure is wall-clock milliseconds, `cpu_ms` its CPU time; ratios are to the bare "
    "client's median, `cpu_ratio*` of CPU times. The kinds alternate, medians compared"
)


def _run(runs: int) -> dict[str, Any]:
    handler = ROOT / "functions" / "api" / "app.py"
    worker = ROOT / "functions" / "worker" / "app.py"
    for entry in (handler, worker):
        if not entry.exists():
            raise FileNotFoundError(f"{entry} is missing: run the benches from a Tenure checkout")
    samples: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
    token = _worker_token()

    def one(kind: str) -> tuple[float, float]:
        if kind == "bare":
            return _sample(BARE)
        if kind == "floor":
            return _sample(FLOOR)
        if kind == "worker_floor":
            return _sample(WORKER_FLOOR, function="worker")
        if kind == "worker_core":
            return _sample(WORKER_CORE, function="worker")
        if kind == "request":
            return _sample(REQUEST, str(handler))
        if kind == "worker":  # the same sample as the API's, on the worker function's entry
            return _sample(API, str(worker), function="worker")
        if kind == "worker_request":
            return _sample(WORKER_REQUEST, str(worker), token, function="worker")
        return _sample(API, str(handler), traced=kind == "traced")

    for kind in KINDS:  # the first run of each warms the OS's file cache, like a reused host
        one(kind)
    for _ in range(runs):
        for kind in KINDS:
            samples[kind].append(one(kind))
    wall = {kind: statistics.median(w for w, _ in got) for kind, got in samples.items()}
    cpu = {kind: statistics.median(c for _, c in got) for kind, got in samples.items()}
    b, a, t = wall["bare"], wall["api"], wall["traced"]
    return {
        "bench": "coldstart",
        "runs": runs,
        "bare_boto3_dynamodb_client_ms": _figure(samples["bare"]),
        "api_handler_import_and_first_client_ms": _figure(samples["api"]),
        "ratio": round(a / b, 3),
        "api_tracing_on_ms": _figure(samples["traced"]),
        "ratio_tracing_on": round(t / b, 3),
        "target_ratio": TARGET_RATIO,
        "within_target": a / b <= TARGET_RATIO,
        "api_import_and_first_request_ms": _figure(samples["request"]),
        "ratio_first_request": round(wall["request"] / b, 3),
        "powertools_floor_ms": _figure(samples["floor"]),
        "ratio_floor": round(wall["floor"] / b, 3),
        "worker_handler_import_and_first_client_ms": _figure(samples["worker"]),
        "ratio_worker": round(wall["worker"] / b, 3),
        "worker_target_ratio": WORKER_TARGET_RATIO,
        # Judged on CPU: the wall figure stretches with whatever else the machine runs.
        "worker_within_target": cpu["worker"] / cpu["bare"] <= WORKER_TARGET_RATIO,
        "worker_import_and_first_request_ms": _figure(samples["worker_request"]),
        "ratio_worker_first_request": round(wall["worker_request"] / b, 3),
        "worker_floor_ms": _figure(samples["worker_floor"]),
        "ratio_worker_floor": round(wall["worker_floor"] / b, 3),
        "worker_core_ms": _figure(samples["worker_core"]),
        "ratio_worker_core": round(wall["worker_core"] / b, 3),
        "cpu_ratio": round(cpu["api"] / cpu["bare"], 3),
        "cpu_ratio_worker": round(cpu["worker"] / cpu["bare"], 3),
        "cpu_ratio_worker_first_request": round(cpu["worker_request"] / cpu["bare"], 3),
        "cpu_ratio_tracing_on": round(cpu["traced"] / cpu["bare"], 3),
        "cpu_ratio_first_request": round(cpu["request"] / cpu["bare"], 3),
        "cpu_ratio_floor": round(cpu["floor"] / cpu["bare"], 3),
        "cpu_ratio_worker_floor": round(cpu["worker_floor"] / cpu["bare"], 3),
        "cpu_ratio_worker_core": round(cpu["worker_core"] / cpu["bare"], 3),
        "how": HOW,
    }


def _figure(got: list[tuple[float, float]]) -> dict[str, Any]:
    cpu = sorted(c for _, c in got)
    return {
        "median": round(statistics.median(w for w, _ in got), 1),
        "samples": [round(w, 1) for w, _ in got],
        "cpu_ms": round(statistics.median(cpu), 1),
        # The middle half of the CPU samples: how far the median could move on this machine.
        "cpu_spread_ms": [round(x, 1) for x in statistics.quantiles(cpu, n=4)[::2]],
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
