"""What the worker function loads when it starts (its cold start is measured, `tenure bench
coldstart`, ratio_worker): the worker routes' own modules, and none of the operators' routes,
the board, MCP or the HTTP API's authorizer; not Powertools' HTTP resolver either, at the start
or on its first requests (it dispatches its routes itself); its use cases composed alone,
without the whole service's (the rules, the scheduler, inspect, the sweeper, the reactor's
reactions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tenure.api.routes import WORKER_ROUTES

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("worker_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure import wiring
wiring.worker_service()  # what its first request composes, too
from tenure.api.worker_logic import PLAIN
compiled = sorted(  # Tenure's dataclasses whose methods `dataclass` compiled: not records
    f"{name}.{cls.__qualname__}"
    for name, mod in list(sys.modules.items())
    if name.startswith("tenure.")
    for cls in vars(mod).values()
    if isinstance(cls, type) and cls.__module__ == name and "__dataclass_fields__" in vars(cls)
    and getattr(cls.__eq__, "__module__", None) != "tenure.records"
)
print(json.dumps({"modules": sorted(sys.modules), "routes": sorted(PLAIN), "compiled": compiled}))
"""

# Today's count of Tenure's dataclasses the worker function's start makes with the standard
# decorator (the mutable ones, and one ordered): every other frozen class is a record
# (records.py), whose methods cost no compiling at import. Move it down when one goes;
# never up: make a new frozen class a record instead.
COMPILED_AT_START = 7

# The first requests, served on the unit rig: a claim, the lease's start and heartbeat, a
# report, and a body the route's model refuses.
FIRST_REQUESTS = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[2])
spec = importlib.util.spec_from_file_location("worker_app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from tenure import wiring
from tenure.api import tokens, worker
from tests.unit.support import ADMIN, POOL, Rig
rig = Rig()
wiring.service, wiring.worker_service = (lambda: rig.svc), (lambda: rig.svc.core)
worker.VERDICTS = tokens.Verdicts(clock=lambda: rig.clock.now_ms() / 1000)
rig.task()
token = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, (POOL,), None)[1]
def send(method, path, bearer, body):
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": "/api/v1" + path,
        "headers": {"authorization": "Bearer " + bearer}, "body": json.dumps(body),
        "isBase64Encoded": False,
        "requestContext": {"http": {"method": method}, "stage": "$default"},
    }
    out = worker.handle(event, None)
    return out["statusCode"], json.loads(out["body"] or "null")
status, won = send("POST", "/pools/" + POOL + "/claim", token, {"worker_id": "w1"})
lease, own = won["lease"]["id"], won["token"]
answers = [status]
answers.append(send("POST", "/leases/" + lease + "/start", own, {})[0])
answers.append(send("POST", "/leases/" + lease + "/heartbeat", own, {"lease_seconds": 1})[0])
answers.append(send("POST", "/leases/" + lease + "/complete", own, {"outcome": "success"})[0])
print(json.dumps({"modules": sorted(sys.modules), "answers": answers}))
"""

# Each of these serves routes or clients the worker routes never use.
NOT_LOADED = (
    "aws_lambda_powertools.event_handler",  # the HTTP resolver: its own dispatch serves them
    "mcp",  # the MCP SDK
    "tenure.api.mcp",
    "tenure.api.board",
    "tenure.api.app",  # the HTTP API's entry: every route module
    "tenure.api.authorizer",  # the HTTP API's authorizer and its event classes
    "aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event",
    "aws_lambda_powertools.event_handler.openapi.models",  # the OpenAPI document
    "aws_xray_sdk",  # tracing is opt-in
    # The API's models of the operators' resources: the worker routes read the leases' and
    # the artifacts' alone.
    *(f"tenure.api.models.{name}" for name in ("blocks", "pools", "tasks", "scheduler", "setup")),
    # The whole service's composition and what only it builds: the worker's use cases are
    # composed alone (app/worker_tenure.py).
    "tenure.app.tenure",
    "tenure.app.rules.rules",
    "tenure.app.rules.firings",
    "tenure.app.rules.subjects",
    "tenure.app.rules.addresses",
    "tenure.app.inspect",
    "tenure.app.sweep",
    "tenure.app.figures",
    "tenure.app.reactions",
    "tenure.app.tasks.listing",
    "tenure.app.setup.spaces",
    "tenure.app.autonomy.wake",
    "tenure.app.autonomy.breaker",
    "tenure.app.leases.recovery",
    "tenure.store.schedules",  # the rules' schedules adapter
    # What the worker's requests never run, or seldom: the data's migrations (a request reads
    # the schema versions alone, app/schema_versions.py), filing's task view (loaded by the
    # first read of a task: a payload's inputs), the operators' force and the instance's
    # and pools' setup it reads.
    "tenure.app.migrations",
    "tenure.app.tasks.filing",
    "tenure.app.leases.force",
    "tenure.app.setup.instance",
    "tenure.app.setup.pools",
    "tenure.app.setup.pool_gates",
    "tenure.domain.rules",  # the rules themselves: the store's rules port is built on first use
    "tenure.store.dynamo.rules",
    *(
        f"tenure.api.endpoints.{name}"
        for name in (
            "setup",
            "tasks",
            "operator_leases",
            "operator_workers",
            "rules",
            "pools",
            "graph",
            "scheduler",
            "mcp",
            "board",
            "blocks",
        )
    ),
)


@pytest.fixture(scope="module")
def started() -> dict[str, Any]:
    env = {**os.environ, "AWS_REGION": "us-east-1", "AWS_LAMBDA_FUNCTION_NAME": "tenure-worker"}
    env.pop("TENURE_TRACING", None)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "functions" / "worker" / "app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def test_the_worker_function_loads_none_of_the_operator_routes_the_board_or_mcp(
    started: dict[str, Any],
) -> None:
    assert "tenure.api.worker" in started["modules"]  # the probe did import the entry
    loaded = [
        name
        for name in NOT_LOADED
        if any(m == name or m.startswith(name + ".") for m in started["modules"])
    ]
    assert loaded == []


def test_the_worker_function_s_frozen_classes_are_records(started: dict[str, Any]) -> None:
    assert any(name.startswith("tenure.") for name in started["modules"])
    assert len(started["compiled"]) <= COMPILED_AT_START, started["compiled"]


def test_the_worker_function_serves_every_worker_route_and_no_other(
    started: dict[str, Any],
) -> None:
    assert {tuple(key) for key in started["routes"]} == WORKER_ROUTES


def test_the_worker_function_s_first_requests_load_no_http_resolver() -> None:
    env = {**os.environ, "AWS_REGION": "us-east-1", "AWS_LAMBDA_FUNCTION_NAME": "tenure-worker"}
    env.pop("TENURE_TRACING", None)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            FIRST_REQUESTS,
            str(ROOT / "functions" / "worker" / "app.py"),
            str(ROOT),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # Served (a claim, its start, a heartbeat the model refuses, the report), not refused early.
    assert got["answers"] == [200, 200, 422, 200]
    loaded = [m for m in got["modules"] if m.startswith("aws_lambda_powertools.event_handler")]
    assert loaded == []


def test_the_cold_start_bench_times_the_worker_entry_in_lambda_s_environment() -> None:
    from tenure_cli.bench import coldstart

    # The sample prints what it timed; one that imported another entry would fail its check.
    probe = coldstart.API.replace(
        "print((time.perf_counter()",
        "assert 'tenure.api.worker' in sys.modules and 'tenure.api.app' not in sys.modules\n"
        "print((time.perf_counter()",
    )
    wall, cpu = coldstart._sample(
        probe, str(ROOT / "functions" / "worker" / "app.py"), function="worker"
    )
    assert wall > 0 and cpu > 0
    assert "worker" in coldstart.KINDS and coldstart.WORKER_TARGET_RATIO == 1.5


def test_the_bench_s_worker_core_rung_runs_without_the_resolver_or_pydantic() -> None:
    from tenure_cli.bench import coldstart

    # The rung asserts in its own process that neither is loaded, so its figure is the core's.
    for code in (coldstart.WORKER_FLOOR, coldstart.WORKER_CORE):
        wall, cpu = coldstart._sample(code, function="worker")
        assert wall > 0 and cpu > 0
    assert {"worker_floor", "worker_core"} <= set(coldstart.KINDS) and coldstart.MIN_RUNS >= 7


def test_the_bench_s_worker_first_request_sample_answers_a_worker_heartbeat() -> None:
    from tenure_cli.bench import coldstart

    # The sample checks its own answer (200, the named lease unknown): a heartbeat that
    # failed, or never reached the route, exits non-zero here.
    entry = str(ROOT / "functions" / "worker" / "app.py")
    wall, cpu = coldstart._sample(
        coldstart.WORKER_REQUEST, entry, coldstart._worker_token(), function="worker"
    )
    assert wall > 0 and cpu > 0
    assert "worker_request" in coldstart.KINDS


def test_the_bench_judges_the_worker_s_target_on_cpu_not_wall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenure_cli.bench import coldstart

    def timed(worker: tuple[float, float]) -> Any:
        """Every sample 100 ms of wall and CPU, but the worker entry's import: `worker`."""

        def sample(code: str, *args: str, traced: bool = False, function: str = "api") -> Any:
            return worker if (code, function) == (coldstart.API, "worker") else (100.0, 100.0)

        return sample

    monkeypatch.setattr(coldstart, "_worker_token", lambda: "[]")
    # Wall time stretched threefold by a busy machine, CPU time within the bound: within it.
    monkeypatch.setattr(coldstart, "_sample", timed((300.0, 140.0)))
    got = coldstart._run(coldstart.MIN_RUNS)
    assert (got["ratio_worker"], got["cpu_ratio_worker"]) == (3.0, 1.4)
    assert got["worker_within_target"] is True
    # And the other way round: a wall figure that looks fine does not hide the CPU's.
    monkeypatch.setattr(coldstart, "_sample", timed((100.0, 160.0)))
    assert coldstart._run(coldstart.MIN_RUNS)["worker_within_target"] is False
    assert coldstart.DEFAULT_RUNS >= 11
