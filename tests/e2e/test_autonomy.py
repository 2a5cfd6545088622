"""Autonomy over HTTP against the local stack: blocks and their release, the
breaker and recover, delegation with the claim gate, wake-creator events read from the wake
queue the template's rule fills on moto, usage summed on the task; the operator CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from tests.conftest import LocalStack
from tests.e2e.support import (
    TIMELINE_WAIT,
    World,
    activity_types,
    assert_error,
    wait_for,
)
from tests.e2e.worker_support import clean_env, run_cli, service_url


def _view(world: World, task_id: str) -> dict[str, Any]:
    r = world.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def test_a_worker_blocks_its_running_task_and_a_clear_makes_it_claimable(world: World) -> None:
    pool = world.pool()["name"]
    with world.api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
        task_id = held.task["id"]
        r = held.lease.post(
            f"/tasks/{task_id}/blocks", json={"kind": "needs_input", "reason": "which branch?"}
        )
        assert r.status_code == 201, r.text
        block = r.json()["block"]
        seen = _view(world, task_id)
        assert seen["task"]["status"] == "blocked"
        assert seen["task"]["blocked_reasons"] == [
            {
                "source": "block",
                "block_id": block["id"],
                "kind": "needs_input",
                "reason": "which branch?",
            }
        ]
        released = world.admin.get(f"/leases/{held.id}").json()
        assert (released["state"], released["end_reason"]) == ("cancelled", "released")
        parked = seen["lease"]
        assert parked["state"] == "pending" and parked["attempt"] == held.won["lease"]["attempt"]
        r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1"})
        assert r.status_code == 204, r.text
        r = world.admin.post(f"/tasks/{task_id}/blocks/{block['id']}/clear", json={"note": "main"})
        assert r.status_code == 200 and r.json()["block"]["state"] == "cleared"
        won = world.claim(worker, pool)
        assert won["lease"]["id"] == parked["id"]
        usage = {
            "input_tokens": 1200,
            "output_tokens": 300,
            "cost": {"amount": 0.02, "currency": "USD", "status": "actual", "source": "api"},
        }
        with world.api.client(won["token"]) as lease:
            r = lease.post(f"/leases/{won['lease']['id']}/complete", json={"usage": usage})
            assert r.status_code == 200, r.text
    assert world.admin.get(f"/leases/{won['lease']['id']}").json()["usage"]["input_tokens"] == 1200
    summed = _view(world, task_id)["task"]["usage"]
    assert (summed["input_tokens"], summed["total_cost"], summed["cost_currency"]) == (
        1200,
        0.02,
        "USD",
    )
    types = wait_for(
        lambda: (t := activity_types(world.admin, task_id)) and "task.block_cleared" in t and t,
        TIMELINE_WAIT,
        "task.block_cleared",
    )
    assert "task.run_released" in types


def test_the_second_block_of_a_kind_escalates_and_recover_resumes(world: World) -> None:
    task = world.task()["task"]
    r = world.admin.post(f"/tasks/{task['id']}/recover", json={"note": "nothing to recover"})
    assert_error(r, 409, "invalid_transition")
    first = world.admin.post(
        f"/tasks/{task['id']}/blocks", json={"kind": "error", "reason": "flaky"}
    ).json()["block"]
    world.admin.post(f"/tasks/{task['id']}/blocks/{first['id']}/clear", json={})
    r = world.admin.post(f"/tasks/{task['id']}/blocks", json={"kind": "error", "reason": "again"})
    assert r.status_code == 201, r.text
    assert _view(world, task["id"])["task"]["status"] == "needs_attention"
    r = world.admin.post(f"/tasks/{task['id']}/recover", json={"note": "fixed"})
    assert r.status_code == 200, r.text
    assert r.json()["task"]["status"] == "ready"
    every = world.admin.get(f"/tasks/{task['id']}/blocks?all=true").json()["blocks"]
    assert [b["closed_by"] for b in every] == ["clear", "recover"]


def _wake_queue(local_stack: LocalStack) -> tuple[Any, str]:
    return local_stack.aws("sqs"), local_stack.info()["aws"]["resources"]["wake_queue_url"]


def _wakes_for(sqs: Any, url: str, child_id: str) -> list[dict[str, Any]]:
    found = []
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    for message in got.get("Messages", []):
        event = json.loads(message["Body"])
        if event["detail"]["child_task_id"] == child_id:
            found.append(event)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def test_a_delegated_task_wakes_its_creator_through_the_wake_queue(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    sqs, url = _wake_queue(local_stack)
    with world.api.client(world.worker_token([pool])) as worker:
        creator = world.held(pool, worker)
        r = creator.lease.post("/tasks", json={"space": world.space, "title": "sub", "pool": pool})
        assert r.status_code == 201, r.text
        child = r.json()["task"]
        assert (child["created_by_lease_id"], child["wake_creator"]) == (creator.id, True)
        # The claim gate: a task it did not file is refused, the lease left for a retry.
        other = world.task()["task"]
        r = creator.lease.post(
            f"/leases/{creator.id}/complete", json={"created_task_ids": [child["id"], other["id"]]}
        )
        assert_error(r, 422, "unverified_created_tasks", other["id"])
        assert world.admin.get(f"/leases/{creator.id}").json()["state"] == "dispatched"
        won = world.claim(worker, pool, worker_id="w-2")
        assert won["lease"]["task"]["id"] == child["id"]
        with world.api.client(won["token"]) as lease:
            r = lease.post(f"/leases/{won['lease']['id']}/complete", json={})
            assert r.status_code == 200, r.text
    seen: list[dict[str, Any]] = []

    def woken() -> list[dict[str, Any]] | None:
        seen.extend(_wakes_for(sqs, url, child["id"]))
        return seen or None

    events = wait_for(woken, TIMELINE_WAIT, "the wake event on the wake queue")
    event = events[0]
    assert (event["source"], event["detail-type"]) == ("tenure", "task.wake_creator")
    detail = event["detail"]
    assert (detail["creator_lease_id"], detail["child_status"]) == (creator.id, "completed")
    assert "token" not in json.dumps(event).lower().replace("task.wake_creator", "")
    types = activity_types(world.admin, creator.task["id"])
    assert "task.completion.hallucination_blocked" in types
    assert "task.wake_creator" in types
    r = creator.lease.post(
        f"/leases/{creator.id}/complete", json={"created_task_ids": [child["id"]]}
    )
    assert r.status_code == 200, r.text
    # Once per transition: nothing more arrives for the child.
    assert _wakes_for(sqs, url, child["id"]) == []
    assert len(seen) == 1


def test_operators_block_list_and_unblock_from_the_cli(world: World) -> None:
    task = world.task()["task"]
    env = clean_env(TENURE_API=service_url(world.api.base), TENURE_TOKEN=world.api.admin_token)
    made = run_cli(
        "tasks", "block", task["id"], "--kind", "transient", "--reason", "rate limited",
        "--expires-in", "5m", "-o", "json", env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    block = json.loads(made.stdout)  # the block itself, as `tasks blocks` lists it
    placed, expires = (datetime.fromisoformat(block[k]) for k in ("created_at", "expires_at"))
    assert expires - placed == timedelta(minutes=5)  # ISO 8601, like every API time
    listed = run_cli("tasks", "blocks", task["id"], "-o", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"blocks": [block], "next_cursor": None}
    cleared = run_cli("tasks", "unblock", task["id"], block["id"], "-o", "json", env=env)
    assert cleared.returncode == 0, cleared.stderr
    assert _view(world, task["id"])["task"]["status"] == "ready"
    refused = run_cli("tasks", "recover", task["id"], "--note", "why", env=env)
    assert refused.returncode == 1 and "invalid_transition" in refused.stderr
