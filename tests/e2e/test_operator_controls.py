"""Operator controls (cancel, kill, pause, resume) as the worker learns of them by heartbeat."""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.support import Held, World, wait_for_activity


def _running(world: World) -> tuple[Held, httpx.Client]:
    """A running lease on a pool of its own, and a member operator of the test's space."""
    pool = world.pool()["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    r = held.lease.post(f"/leases/{held.id}/start")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "running", r.text
    return held, world.api.client(world.operator_token("member", spaces=[world.space]))


def _beat(held: Held) -> dict[str, Any]:
    r = held.lease.post(f"/leases/{held.id}/heartbeat")
    assert r.status_code == 200, r.text
    beat: dict[str, Any] = r.json()
    return beat


def _lease(world: World, lease_id: str) -> dict[str, Any]:
    r = world.admin.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    lease: dict[str, Any] = r.json()
    return lease


def test_cancelling_a_pending_lease_ends_it_at_once(world: World) -> None:
    pool = world.pool()["name"]
    created = world.task(pool=pool)
    lease_id = created["lease"]["id"]
    operator = world.api.client(world.operator_token("member", spaces=[world.space]))

    r = operator.post(f"/leases/{lease_id}/cancel")
    assert r.status_code == 200, r.text
    cancelled = r.json()["lease"]
    assert cancelled["id"] == lease_id
    assert cancelled["state"] == "cancelled" and cancelled["end_reason"] == "cancelled"
    assert cancelled["timing"]["ended_at"] is not None
    assert _lease(world, lease_id) == cancelled

    # Nothing is left to claim.
    worker = world.api.client(world.worker_token([pool]))
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1"})
    assert r.status_code == 204
    r = world.admin.get(f"/tasks/{created['task']['id']}")
    assert r.status_code == 200 and r.json()["lease"] is None
    assert r.json()["task"]["status"] == "cancelled"
    wait_for_activity(world.admin, created["task"]["id"], ["lease.cancelled"])


def test_cancelling_a_running_lease_revokes_it_and_the_report_ends_it_cancelled(
    world: World,
) -> None:
    held, operator = _running(world)
    r = operator.post(f"/leases/{held.id}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "cancelling"
    assert r.json()["lease"]["revoke"] == "cancel"

    beat = _beat(held)
    assert beat["state"] == "cancelling" and beat["revoke"] == "cancel"
    assert _beat(held)["revoke"] == "cancel"  # each heartbeat answers afresh

    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200, r.text
    ended = r.json()["lease"]
    assert ended["state"] == "cancelled" and ended["end_reason"] == "cancelled"
    assert _lease(world, held.id)["state"] == "cancelled"
    r = world.admin.get(f"/tasks/{held.task['id']}")
    assert r.status_code == 200
    assert r.json()["task"]["status"] == "cancelled" and r.json()["lease"] is None
    wait_for_activity(world.admin, held.task["id"], ["lease.cancelling", "lease.cancelled"])


def test_killing_a_running_lease_revokes_it_and_the_report_ends_it_killed(world: World) -> None:
    held, operator = _running(world)
    r = operator.post(f"/leases/{held.id}/kill")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["revoke"] == "kill"

    beat = _beat(held)
    assert beat["revoke"] == "kill"

    r = held.lease.post(f"/leases/{held.id}/fail", json={"error": "stopped on request"})
    assert r.status_code == 200, r.text
    ended = r.json()["lease"]
    assert ended["state"] == "killed" and ended["end_reason"] == "killed"
    assert _lease(world, held.id)["state"] == "killed"
    wait_for_activity(world.admin, held.task["id"], ["lease.killed"])


def test_kill_after_cancel_turns_the_revoke_signal_into_kill(world: World) -> None:
    held, operator = _running(world)
    assert operator.post(f"/leases/{held.id}/cancel").status_code == 200
    assert _beat(held)["revoke"] == "cancel"
    r = operator.post(f"/leases/{held.id}/kill")
    assert r.status_code == 200, r.text
    assert _beat(held)["revoke"] == "kill"
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200 and r.json()["lease"]["state"] == "killed", r.text


def test_pausing_and_resuming_a_running_lease(world: World) -> None:
    held, operator = _running(world)
    r = operator.post(f"/leases/{held.id}/pause")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "paused" and r.json()["lease"]["revoke"] == "pause"
    beat = _beat(held)
    assert beat["state"] == "paused" and beat["revoke"] == "pause"
    assert _lease(world, held.id)["state"] == "paused"
    r = world.admin.get(f"/tasks/{held.task['id']}")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "paused"

    r = operator.post(f"/leases/{held.id}/resume")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "running" and r.json()["lease"]["revoke"] is None
    beat = _beat(held)
    assert beat["state"] == "running" and beat["revoke"] is None

    # A paused lease still reports normally once resumed.
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200 and r.json()["lease"]["state"] == "completed", r.text
    wait_for_activity(world.admin, held.task["id"], ["lease.paused", "lease.resumed"])


def test_cancelling_or_killing_a_terminal_lease_answers_200_and_changes_nothing(
    world: World,
) -> None:
    held, operator = _running(world)
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200, r.text
    before = _lease(world, held.id)
    assert before["state"] == "completed"

    r = operator.post(f"/leases/{held.id}/cancel")
    assert r.status_code == 200, r.text
    assert r.json() == {"lease": before}
    r = operator.post(f"/leases/{held.id}/kill")
    assert r.status_code == 200, r.text
    assert r.json() == {"lease": before}
    assert _lease(world, held.id) == before


def test_release_ends_the_lease_and_requeues_the_task_with_the_next_fence(world: World) -> None:
    held, _ = _running(world)
    r = held.lease.post(f"/leases/{held.id}/release", json={"reason": "draining"})
    assert r.status_code == 200, r.text
    released = r.json()["lease"]
    assert released["state"] == "cancelled" and released["end_reason"] == "released"
    assert _lease(world, held.id) == released

    r = world.admin.get(f"/tasks/{held.task['id']}")
    assert r.status_code == 200, r.text
    successor = r.json()["lease"]
    assert successor["id"] != held.id and successor["state"] == "pending"
    assert successor["fence"] == held.won["fence"] + 1
    assert successor["attempt"] == held.won["lease"]["attempt"]
    assert successor["job_id"] == held.won["lease"]["job_id"]
    assert r.json()["task"]["status"] == "queued"

    events = wait_for_activity(world.admin, held.task["id"], ["lease.released"])
    released_event = next(ev for ev in events if ev["type"] == "lease.released")
    assert released_event["lease_id"] == held.id and released_event["fence"] == 1
    assert released_event["data"]["end_reason"] == "released"
    # The same release sent again is its first answer; the requeued lease can be claimed.
    again = held.lease.post(f"/leases/{held.id}/release", json={"reason": "draining"})
    assert again.status_code == 200 and again.json() == {"lease": released}
    worker = world.api.client(world.worker_token([successor["pool"]]))
    won = world.claim(worker, successor["pool"], worker_id="w-2")
    assert won["lease"]["id"] == successor["id"] and won["fence"] == successor["fence"]
