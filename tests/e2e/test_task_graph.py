"""The task graph, the scheduler and operator recovery over HTTP against the local stack:
the stack's own stream pump runs the reactions; the CLI forces and inspects."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx

from tests.e2e.support import TIMELINE_WAIT, Api, World, activity_types, wait_for
from tests.e2e.worker_support import run_cli, service_url


def _task(world: World, **body: Any) -> dict[str, Any]:
    created: dict[str, Any] = world.task(**body)["task"]
    return created


def _status(world: World, task_id: str) -> str:
    r = world.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200, r.text
    return str(r.json()["task"]["status"])


def _complete(world: World, worker: httpx.Client, pool: str) -> dict[str, Any]:
    won = world.claim(worker, pool)
    with world.api.client(won["token"]) as lease:
        r = lease.post(f"/leases/{won['lease']['id']}/complete", json={})
        assert r.status_code == 200, r.text
    lease_view: dict[str, Any] = won["lease"]
    return lease_view


def test_a_tree_rolls_up_and_a_dependent_is_enqueued_from_the_stream(world: World) -> None:
    pool = world.pool()["name"]
    parent = _task(world)
    first = _task(world, parent_id=parent["id"], pool=pool)
    second = _task(
        world,
        parent_id=parent["id"],
        pool=pool,
        depends_on=[first["id"]],
        auto_enqueue_on_ready=True,
    )
    assert second["status"] == "blocked"
    with world.api.client(world.worker_token([pool])) as worker:
        _complete(world, worker, pool)

        def enqueued() -> dict[str, Any] | None:
            lease: dict[str, Any] | None = world.admin.get(f"/tasks/{second['id']}").json()["lease"]
            return lease

        wait_for(enqueued, TIMELINE_WAIT, "the dependent's auto-enqueued lease")
        assert _status(world, parent["id"]) != "completed"
        _complete(world, worker, pool)
    wait_for(
        lambda: _status(world, parent["id"]) == "completed", TIMELINE_WAIT, "the parent's rollup"
    )
    types = wait_for(
        lambda: (
            (t := activity_types(world.admin, parent["id"])) and "task.rollup_completed" in t and t
        ),
        TIMELINE_WAIT,
        "task.rollup_completed",
    )
    assert types.count("task.rollup_completed") == 1


def test_a_paused_subtree_gets_no_claims_until_it_resumes(world: World) -> None:
    pool = world.pool()["name"]
    parent = _task(world)
    child = _task(world, parent_id=parent["id"], pool=pool)
    r = world.admin.post(f"/tasks/{parent['id']}/pause")
    assert r.status_code == 200 and r.json()["task"]["effective_paused"] is True
    got = world.admin.get(f"/tasks/{child['id']}").json()["task"]
    assert (got["effective_paused"], got["paused_by_task_id"]) == (True, parent["id"])
    backlog = world.admin.get(f"/scheduler/backlog?space={world.space}").json()
    assert backlog["leases"] == []
    shown = world.admin.get(f"/scheduler/backlog?space={world.space}&include_paused=true").json()
    assert [x["paused_by_task_id"] for x in shown["leases"]] == [parent["id"]]
    with world.api.client(world.worker_token([pool])) as worker:
        assert worker.post(f"/pools/{pool}/claim", json={"worker_id": "w"}).status_code == 204
        assert world.admin.post(f"/tasks/{parent['id']}/resume").status_code == 200
        won = world.claim(worker, pool)
    assert won["lease"]["task"]["id"] == child["id"]
    assert "task.paused" in activity_types(world.admin, parent["id"])


def test_scheduler_pause_drain_and_resume(api: Api, world: World) -> None:
    pool = world.pool()["name"]
    world.task(pool=pool)
    try:
        r = world.admin.post("/scheduler/drain", json={"timeout_seconds": 0.5})
        assert r.status_code == 200, r.text
        assert r.json()["drained"] is False and r.json()["active"] >= 1  # the ballast fleet
        status = world.admin.get("/scheduler").json()
        assert status["paused"] is True and status["queued_run_count"] >= 1
        with world.api.client(world.worker_token([pool])) as worker:
            assert worker.post(f"/pools/{pool}/claim", json={"worker_id": "w"}).status_code == 204
    finally:
        assert world.admin.post("/scheduler/resume").json()["paused"] is False


def _cli(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, "--api", service_url(api.base), "--token", api.admin_token)


def test_the_cli_forces_retries_and_inspects(api: Api, world: World) -> None:
    pool = world.pool()["name"]
    with world.api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
        done = _cli(api, "leases", "fail", held.id, "lease_nope", "--reason", "revoked")
        assert done.returncode == 1, done.stderr  # one row failed
        lines = done.stdout.splitlines()
        assert lines[0].split()[:3] == ["LEASE_ID", "OK", "CODE"]
        assert lines[1].split()[:2] == [held.id, "True"]
        assert lines[2].split()[:3] == ["lease_nope", "False", "lease_not_found"]
        r = held.lease.post(f"/leases/{held.id}/heartbeat", json={})
        assert r.status_code == 409
        retried = json.loads(_cli(api, "leases", "retry", held.id, "-o", "json").stdout)
        assert retried["attempt"] == 2  # the new run's lease itself
        shot = json.loads(_cli(api, "inspect", held.task["id"], "-o", "json").stdout)
        assert shot["next_action"] == "claim_available"
        assert shot["current_lease"]["id"] == retried["id"]
        types = activity_types(world.admin, held.task["id"])
        assert "lease.force_failed" in types
        released = _cli(api, "leases", "release", retried["id"], "--reason", "x")
        assert released.returncode == 1 and "invalid_transition" in released.stdout
