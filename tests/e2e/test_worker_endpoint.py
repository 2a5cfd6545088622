"""The worker endpoint `tenure local` serves beside the API (stack.json's `worker_api`), as a
worker reaches a function URL: the worker routes, the bearer checked by the function itself."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LocalStack
from tests.e2e.support import World, assert_error
from tests.e2e.worker_support import CLI, clean_env, wait_event


@pytest.fixture
def stack_file(local_stack: LocalStack) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((local_stack.data_dir / "stack.json").read_text())
    return found


@pytest.fixture
def worker_api(stack_file: dict[str, Any]) -> str:
    url: str = stack_file["worker_api"]
    return url


def _client(base: str, token: str | None) -> httpx.Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base, headers=headers, timeout=30)


def test_stack_json_names_the_worker_endpoint_beside_the_api(stack_file: dict[str, Any]) -> None:
    assert stack_file["worker_api"].startswith("http://127.0.0.1:")
    assert stack_file["worker_api"].endswith("/api/v1")
    assert stack_file["worker_api"] != stack_file["api"]


def test_a_worker_claims_heartbeats_and_completes_through_the_worker_endpoint(
    world: World, worker_api: str
) -> None:
    pool = world.pool()["name"]
    filed = world.task(pool=pool, title="through the function URL")
    with _client(worker_api, world.worker_token([pool])) as worker:
        r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "url-1", "wait_seconds": 2})
        assert r.status_code == 200, r.text
        won = r.json()
    lease_id = won["lease"]["id"]
    assert lease_id == filed["lease"]["id"]
    assert won["payload"]["subject"]["title"] == "through the function URL"
    with _client(worker_api, won["token"]) as lease:
        r = lease.post(f"/leases/{lease_id}/heartbeat", json={})
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "running"
        r = lease.post(f"/leases/{lease_id}/complete", json={"details": {"via": "worker_api"}})
        assert r.status_code == 200, r.text
        assert r.json()["lease"]["state"] == "completed"
    # What the operator sees, on the HTTP API.
    r = world.admin.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    seen = r.json()
    assert (seen["state"], seen["outcome"], seen["worker_id"]) == ("completed", "success", "url-1")
    done = wait_event(world.admin, filed["task"]["id"], "lease.completed")
    assert (done["lease_id"], done["data"]["details"]) == (lease_id, {"via": "worker_api"})


def test_the_worker_endpoint_refuses_bad_tokens_and_serves_no_operator_route(
    world: World, worker_api: str
) -> None:
    pool = world.pool()["name"]
    with _client(worker_api, None) as anonymous:
        assert_error(anonymous.post(f"/pools/{pool}/claim", json={}), 401, "unauthenticated")
    with _client(worker_api, "tnr_w_made-up") as made_up:
        assert_error(made_up.post(f"/pools/{pool}/claim", json={}), 401, "unauthenticated")
    with _client(worker_api, world.api.admin_token) as admin:
        assert_error(admin.get(f"/leases?space={world.space}"), 404, "not_found")
        assert_error(admin.post("/spaces", json={"key": "NOPE", "name": "n"}), 404, "not_found")
        assert_error(admin.get("/health"), 404, "not_found")
        r = admin.post(f"/pools/{pool}/claim", json={"worker_id": "op"})
        assert r.status_code == 403, r.text


def test_tenure_worker_run_claims_on_the_worker_endpoint_stack_json_names(
    world: World, local_stack: LocalStack, stack_file: dict[str, Any], tmp_path: Path
) -> None:
    pool = world.pool()["name"]
    filed = world.task(pool=pool)
    env_dump = tmp_path / "env.txt"
    args = [*CLI, "worker", "run", "--data-dir", str(local_stack.data_dir), "--once"]
    args += ["--token", world.worker_token([pool]), "--pool", pool]
    job = f"env > {shlex.quote(str(env_dump))}"
    args += ["--state-dir", str(tmp_path / "state"), "--", "sh", "-c", job]
    # No --api and no TENURE_* variable: the address comes from stack.json alone.
    done = subprocess.run(args, env=clean_env(), cwd=tmp_path, capture_output=True, timeout=90)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    r = world.admin.get(f"/leases/{filed['lease']['id']}")
    assert r.json()["state"] == "completed", r.text
    job = dict(line.split("=", 1) for line in env_dump.read_text().splitlines() if "=" in line)
    # The job reports on the worker endpoint, and files tasks or blocks on the API.
    assert job["TENURE_WORKER_API"] == stack_file["worker_api"]
    assert job["TENURE_API"] == stack_file["api"]
