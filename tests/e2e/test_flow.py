"""The whole lease flow over HTTP, as an admin, an operator and a worker see it."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.e2e.support import SHORT, World, sha256_hex, suffix, wait_for_activity

LEASE_KEYS = {
    "id",
    "state",
    "attempt",
    "fence",
    "space",
    "pool",
    "subject_kind",
    "task",
    "workflow",
    "worker_version",
    "queued_condition",
    "timing",
}


def test_whole_flow_from_set_up_to_a_completed_task_and_its_timeline(world: World) -> None:
    api, admin, space = world.api, world.admin, world.space
    slug = f"wf-{suffix().lower()}"
    r = admin.post(
        "/workflows",
        json={"space": space, "slug": slug, "name": "Nightly", "description": "runs nightly"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["slug"] == slug and r.json()["space"] == space
    assert r.json()["description"] == "runs nightly"

    pool_name = f"pool-{suffix().lower()}"
    r = admin.post("/pools", json={"name": pool_name, "space": space, "kind": "command", **SHORT})
    assert r.status_code == 201, r.text
    pool = r.json()
    assert pool["name"] == pool_name and pool["space"] == space and pool["kind"] == "command"
    assert (pool["renew_seconds"], pool["grace_seconds"], pool["toleration_seconds"]) == (1, 3, 4)
    assert pool["on_expiry"] == "requeue"

    r = admin.post(
        "/tokens", json={"name": f"w-{suffix().lower()}", "kind": "worker", "pools": [pool_name]}
    )
    assert r.status_code == 201, r.text
    worker_token = r.json()
    assert worker_token["kind"] == "worker" and worker_token["pools"] == [pool_name]
    assert worker_token["token"].startswith("tnr_w_") and worker_token["id"]

    member = {"name": f"op-{suffix().lower()}", "kind": "operator", "role": "member"}
    r = admin.post("/tokens", json={**member, "spaces": [space]})
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "member" and r.json()["spaces"] == [space]
    operator = api.client(r.json()["token"])
    worker = api.client(worker_token["token"])

    # An operator files a task straight onto the pool: it is enqueued at once.
    r = operator.post(
        "/tasks",
        json={
            "space": space,
            "title": "Rotate the keys",
            "workflow": slug,
            "body": "all of them",
            "properties": {"priority": 2},
            "pool": pool_name,
        },
    )
    assert r.status_code == 201, r.text
    created = r.json()
    assert set(created) == {"task", "lease"}
    task = created["task"]
    assert task["key"].startswith(f"{space}-") and task["status"] == "queued"
    assert task["title"] == "Rotate the keys" and task["properties"] == {"priority": 2}
    assert task["blocked_reasons"] == []
    pending = created["lease"]
    assert set(pending) >= LEASE_KEYS
    assert pending["state"] == "pending" and pending["fence"] == 1 and pending["attempt"] == 1
    assert pending["subject_kind"] == "task" and pending["pool"] == pool_name
    assert pending["task"] == {"id": task["id"], "key": task["key"]}
    assert pending["workflow"] == {"slug": slug}
    assert pending["queued_condition"] == {
        "code": "awaiting_agent",
        "label": "awaiting agent",
        "needs_person": False,
    }

    # A worker claims it.
    r = worker.post(f"/pools/{pool_name}/claim", json={"worker_id": "w-1", "worker_version": "1.2"})
    assert r.status_code == 200, r.text
    won = r.json()
    assert {"lease", "token", "fence", "claim_token_hash"} <= set(won)
    assert won["lease"]["id"] == pending["id"] and won["fence"] == 1
    assert won["lease"]["state"] == "dispatched"
    assert won["lease"]["worker_version"] == "1.2"
    assert won["token"].startswith("tnr_l_")
    assert won["claim_token_hash"] == sha256_hex(won["token"])
    assert won["lease"]["claim_token_hash_truncated"] == won["claim_token_hash"][:8]
    lease_id = pending["id"]
    holder = api.client(won["token"])

    r = holder.post(f"/leases/{lease_id}/start")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "running"
    assert r.json()["lease"]["timing"]["started_at"] is not None

    r = holder.post(f"/leases/{lease_id}/heartbeat", json={})
    assert r.status_code == 200, r.text
    beat = r.json()
    assert set(beat) == {"state", "deadline", "revoke"}
    assert beat["state"] == "running" and beat["revoke"] is None and beat["deadline"]

    r = operator.get(f"/tasks/{task['id']}")
    assert r.status_code == 200, r.text
    assert r.json()["task"]["status"] == "running"
    assert r.json()["lease"]["id"] == lease_id and r.json()["lease"]["state"] == "running"

    # The work bundle (payload), subject kind task.
    r = holder.get(f"/leases/{lease_id}/payload")
    assert r.status_code == 200, r.text
    bundle = r.json()
    assert {"lease", "subject", "kind"} <= set(bundle)
    assert bundle["kind"] == "command" and "trigger" not in bundle
    assert "model" not in bundle and "effort" not in bundle
    assert bundle["lease"]["id"] == lease_id
    subject = bundle["subject"]
    assert set(subject) == {
        "kind",
        "key",
        "title",
        "body",
        "properties",
        "dependencies",
        "prior_attempts",
        "activity",
    }
    assert subject["kind"] == "task" and subject["key"] == task["key"]
    assert subject["title"] == "Rotate the keys" and subject["body"] == "all of them"
    assert subject["properties"] == {"priority": 2}
    assert subject["dependencies"] == [] and subject["prior_attempts"] == []
    assert isinstance(subject["activity"], list)

    # Complete, then the very same report again: the first answer, byte for byte.
    report = {"outcome": "success", "details": {"rotated": 3}, "result": "ok"}
    first = holder.post(f"/leases/{lease_id}/complete", json=report)
    assert first.status_code == 200, first.text
    done = first.json()["lease"]
    assert done["state"] == "completed" and done["outcome"] == "success"
    assert done["end_reason"] == "completed" and done["timing"]["ended_at"] is not None
    again = holder.post(f"/leases/{lease_id}/complete", json=report)
    assert again.status_code == 200, again.text
    assert again.content == first.content

    r = operator.get(f"/tasks/{task['id']}")
    assert r.status_code == 200, r.text
    assert r.json()["task"]["status"] == "completed" and r.json()["lease"] is None

    r = operator.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "completed" and r.json()["worker_version"] == "1.2"

    want = ["lease.created", "lease.claimed", "lease.started", "lease.completed"]
    events = wait_for_activity(operator, task["id"], want)
    assert [ev["type"] for ev in events] == want
    assert all(ev["lease_id"] == lease_id and ev["fence"] == 1 for ev in events)
    assert set(events[0]) == {"type", "at", "lease_id", "fence", "data"}
    stamps = [ev["at"] for ev in events]
    assert stamps == sorted(stamps)
    assert events[-1]["data"]["state"] == "completed"


def test_claim_on_an_empty_pool_answers_204_only_after_the_wait(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))

    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1"})
    assert r.status_code == 204 and r.content == b""

    began = time.monotonic()
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "wait_seconds": 2})
    waited = time.monotonic() - began
    assert r.status_code == 204 and r.content == b""
    assert 1.9 <= waited < 8, waited


def test_a_waiting_claim_answers_200_promptly_when_a_task_is_enqueued(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    answer: dict[str, Any] = {}

    def wait_for_work() -> None:
        began = time.monotonic()
        r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "wait_seconds": 15})
        answer["response"] = r
        answer["at"] = time.monotonic()
        answer["waited"] = answer["at"] - began

    waiter = threading.Thread(target=wait_for_work)
    waiter.start()
    time.sleep(1.5)
    created = world.task(pool=pool)
    enqueued_at = time.monotonic()
    waiter.join(timeout=30)
    assert not waiter.is_alive()

    r: httpx.Response = answer["response"]
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["id"] == created["lease"]["id"]
    assert r.json()["lease"]["state"] == "dispatched"
    # Answered soon after the task arrived, long before the 15 s wait ran out.
    assert answer["at"] - enqueued_at < 3, answer["at"] - enqueued_at
    assert answer["waited"] < 10, answer["waited"]


def test_leases_are_listed_newest_first_and_page_with_a_cursor_to_the_end(world: World) -> None:
    pool = world.pool()["name"]
    made = [world.task(pool=pool)["lease"]["id"] for _ in range(5)]

    r = world.admin.get("/leases", params={"space": world.space})
    assert r.status_code == 200, r.text
    everything = r.json()
    assert set(everything) == {"leases", "next_cursor"} and everything["next_cursor"] is None
    ids = [lease["id"] for lease in everything["leases"]]
    assert ids == list(reversed(made))
    created = [lease["timing"]["created_at"] for lease in everything["leases"]]
    assert created == sorted(created, reverse=True)

    paged: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"space": world.space, "limit": 2}
        if cursor:
            params["cursor"] = cursor
        r = world.admin.get("/leases", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["leases"]) <= 2
        paged += [lease["id"] for lease in page["leases"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert isinstance(cursor, str) and pages < 10
    assert paged == ids and pages == 3

    r = world.admin.get("/leases", params={"space": world.space, "state": "pending", "pool": pool})
    assert r.status_code == 200, r.text
    assert [lease["id"] for lease in r.json()["leases"]] == ids


def test_worker_heartbeat_renews_all_its_leases_and_marks_a_wrong_fence_stale(
    world: World,
) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    tasks = [world.task(pool=pool) for _ in range(3)]
    leases = [world.claim(worker, pool, worker_id="w-many")["lease"] for _ in tasks]
    assert all(lease["state"] == "dispatched" for lease in leases)

    body = {"leases": [{"id": lease["id"], "fence": lease["fence"]} for lease in leases]}
    body["leases"].append({"id": leases[0]["id"], "fence": leases[0]["fence"] + 7})
    r = worker.post("/workers/w-many/heartbeat", json=body)
    assert r.status_code == 200, r.text
    rows = r.json()["leases"]
    assert len(rows) == 4
    for row, lease in zip(rows[:3], leases, strict=True):
        assert row["id"] == lease["id"] and row["fence"] == lease["fence"]
        assert row["state"] == "running" and row["revoke"] is None and row["deadline"]
        assert "error" not in row
    assert rows[3]["id"] == leases[0]["id"] and rows[3]["fence"] == leases[0]["fence"] + 7
    assert rows[3]["error"]["code"] == "stale_lease"
    assert "state" not in rows[3]

    for lease in leases:
        r = world.admin.get(f"/leases/{lease['id']}")
        assert r.status_code == 200, r.text
        assert r.json()["state"] == "running"
        assert r.json()["timing"]["last_heartbeat_at"] is not None

    # The stale row is on the timeline of its lease's task (claims spread over the queue, so
    # that need not be the first task created).
    assert {lease["task"]["id"] for lease in leases} == {t["task"]["id"] for t in tasks}
    events = wait_for_activity(world.admin, leases[0]["task"]["id"], ["lease.stale_report"])
    stale = [ev for ev in events if ev["type"] == "lease.stale_report"]
    assert [ev["lease_id"] for ev in stale] == [leases[0]["id"]]
    assert stale[0]["data"]["fence"] == leases[0]["fence"] + 7


def test_a_report_that_claims_renews_the_workers_other_leases_in_the_same_call(
    world: World,
) -> None:
    """The worker heartbeat rides on a final report sent with the worker token: the same
    per-lease rows as the worker heartbeat's; the reported lease's own item refused; a lease
    token may not carry it."""
    pool = world.pool()["name"]
    token = world.worker_token([pool])
    worker = world.api.client(token)
    for _ in range(4):
        world.task(pool=pool)
    done, other = (world.claim(worker, pool, worker_id="w-ride")["lease"] for _ in range(2))
    beats = [{"id": x["id"], "fence": x["fence"]} for x in (done, other)]
    beats.append({"id": other["id"], "fence": other["fence"] + 7})

    third = world.claim(worker, pool, worker_id="w-ride")
    job = world.api.client(third["token"])  # the job's lease token
    r = job.post(f"/leases/{third['lease']['id']}/complete", json={"heartbeat": beats[1:2]})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "lease_token_mismatch"

    body = {"next": {"worker_id": "w-ride", "claim_id": f"ride-{suffix()}"}, "heartbeat": beats}
    r = worker.post(f"/leases/{done['id']}/complete", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["lease"]["state"] == "completed" and answer["next"] is not None
    ended, renewed, stale = answer["heartbeat"]
    assert ended["id"] == done["id"] and ended["error"]["code"] == "invalid_transition"
    assert renewed["id"] == other["id"] and renewed["state"] == "running"
    assert renewed["deadline"] and "error" not in renewed
    assert stale["error"]["code"] == "stale_lease" and "state" not in stale
    r = world.admin.get(f"/leases/{other['id']}")
    assert r.status_code == 200 and r.json()["state"] == "running", r.text
    assert r.json()["timing"]["last_heartbeat_at"] is not None
