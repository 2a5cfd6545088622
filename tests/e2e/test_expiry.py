"""Expiry and recovery by the sweeper, with short pool timings (renew 1, grace 3, toleration 4)."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.support import (
    EXPIRY_WAIT,
    SHORT,
    World,
    assert_error,
    wait_for,
    wait_for_activity,
    wait_for_lease_state,
)


def _task_view(world: World, task_id: str) -> dict[str, Any]:
    r = world.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200, r.text
    view: dict[str, Any] = r.json()
    return view


def test_a_silent_lease_is_lost_and_its_task_gets_a_pending_lease_with_the_next_fence(
    world: World,
) -> None:
    pool = world.pool(**SHORT)["name"]
    worker = world.api.client(world.worker_token([pool]))
    held = world.held(pool, worker)
    first = held.won["lease"]

    lost = wait_for_lease_state(world.admin, held.id, {"lost"}, EXPIRY_WAIT)
    assert lost["end_reason"] == "expired" and lost["timing"]["ended_at"] is not None

    view = _task_view(world, held.task["id"])
    successor = view["lease"]
    assert successor is not None and successor["id"] != held.id
    assert successor["state"] == "pending"
    assert successor["fence"] == first["fence"] + 1
    assert successor["attempt"] == first["attempt"]  # an expiry uses no attempt
    assert successor["job_id"] == first["job_id"]
    assert view["task"]["status"] == "queued"

    events = wait_for_activity(world.admin, held.task["id"], ["lease.lost"])
    lost_event = next(ev for ev in events if ev["type"] == "lease.lost")
    assert lost_event["lease_id"] == held.id and lost_event["fence"] == 1
    assert lost_event["data"]["recovery_count"] == 1

    # The new holder works under the new fence; the old one is refused.
    won = world.claim(worker, pool, worker_id="w-2")
    assert won["lease"]["id"] == successor["id"] and won["fence"] == 2
    r = held.lease.post(f"/leases/{held.id}/heartbeat")
    assert_error(r, 409, "stale_lease")
    holder = world.api.client(won["token"])
    r = holder.post(f"/leases/{successor['id']}/complete", json={"outcome": "success"})
    assert r.status_code == 200 and r.json()["lease"]["state"] == "completed", r.text


def test_the_expiry_that_reaches_max_attempts_moves_the_task_to_needs_attention(
    world: World,
) -> None:
    # attempt + recovery_count >= max_attempts exhausts the job (counted before this expiry): with
    # max_attempts 3 the first two expiries requeue and the third one exhausts: three claims.
    pool = world.pool(**SHORT)["name"]
    worker = world.api.client(world.worker_token([pool]))
    held = world.held(pool, worker, max_attempts=3)
    assert held.task["max_attempts"] == 3

    wait_for_lease_state(world.admin, held.id, {"lost"}, EXPIRY_WAIT)
    second = world.claim(worker, pool, worker_id="w-2")
    assert second["fence"] == 2 and second["lease"]["attempt"] == 1

    wait_for_lease_state(world.admin, second["lease"]["id"], {"lost"}, EXPIRY_WAIT)
    third = world.claim(worker, pool, worker_id="w-3")
    assert third["fence"] == 3 and third["lease"]["attempt"] == 1

    lost = wait_for_lease_state(world.admin, third["lease"]["id"], {"lost"}, EXPIRY_WAIT)
    assert lost["end_reason"] == "expired"

    def escalated() -> dict[str, Any] | None:
        view = _task_view(world, held.task["id"])
        return view if view["task"]["status"] == "needs_attention" else None

    view = wait_for(escalated, 10, "the task to need attention")
    assert view["lease"] is None
    events = wait_for_activity(world.admin, held.task["id"], ["task.run.lease_recovery_exhausted"])
    exhausted = next(ev for ev in events if ev["type"] == "task.run.lease_recovery_exhausted")
    assert exhausted["data"]["recovery_count"] == 3
    assert exhausted["data"]["max_attempts"] == 3
    assert [ev["type"] for ev in events].count("lease.lost") == 3

    # No fourth lease was minted, and the task cannot simply be enqueued again.
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-4"})
    assert r.status_code == 204
    r = world.admin.post(f"/tasks/{held.task['id']}/enqueue", json={"pool": pool})
    assert_error(r, 409, "invalid_transition")


def test_with_max_attempts_1_the_first_expiry_exhausts_the_task(world: World) -> None:
    pool = world.pool(**SHORT)["name"]
    worker = world.api.client(world.worker_token([pool]))
    held = world.held(pool, worker, max_attempts=1)

    lost = wait_for_lease_state(world.admin, held.id, {"lost"}, EXPIRY_WAIT)
    assert lost["end_reason"] == "expired"
    events = wait_for_activity(world.admin, held.task["id"], ["task.run.lease_recovery_exhausted"])
    assert [ev["type"] for ev in events].count("lease.lost") == 1
    view = _task_view(world, held.task["id"])
    assert view["task"]["status"] == "needs_attention" and view["lease"] is None
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-2"})
    assert r.status_code == 204


def test_a_pool_that_fails_on_expiry_ends_the_lease_worker_lost_without_a_new_lease(
    world: World,
) -> None:
    pool = world.pool(**SHORT, on_expiry="fail")
    assert pool["on_expiry"] == "fail"
    worker = world.api.client(world.worker_token([pool["name"]]))
    held = world.held(pool["name"], worker)

    lost = wait_for_lease_state(world.admin, held.id, {"lost"}, EXPIRY_WAIT)
    assert lost["end_reason"] == "worker_lost"

    view = _task_view(world, held.task["id"])
    assert view["lease"] is None and view["task"]["status"] == "failed"
    r = world.admin.get("/leases", params={"space": world.space})
    assert r.status_code == 200 and [x["id"] for x in r.json()["leases"]] == [held.id]
    r = worker.post(f"/pools/{pool['name']}/claim", json={"worker_id": "w-2"})
    assert r.status_code == 204
    events = wait_for_activity(world.admin, held.task["id"], ["lease.lost"])
    assert "lease.created" in [ev["type"] for ev in events]
    assert [ev["type"] for ev in events].count("lease.created") == 1
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert_error(r, 409, "stale_lease")


def test_a_lease_that_heartbeats_every_second_is_never_expired(world: World) -> None:
    pool = world.pool(**SHORT)["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    until = time.monotonic() + 8
    while time.monotonic() < until:
        r = held.lease.post(f"/leases/{held.id}/heartbeat")
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "running" and r.json()["revoke"] is None
        time.sleep(1)
    r = world.admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json()["state"] == "running"
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200 and r.json()["lease"]["state"] == "completed", r.text
    assert "lease.lost" not in [
        ev["type"] for ev in wait_for_activity(world.admin, held.task["id"], ["lease.completed"])
    ]
