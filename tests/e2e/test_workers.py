"""GET /workers?pool=: who staffs a pool, when each was last heard from, and what it holds."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from tests.e2e.support import SHORT, World, assert_error, suffix


def _workers(world: World, pool: str) -> dict[str, dict[str, Any]]:
    r = world.admin.get("/workers", params={"pool": pool})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"workers", "next_cursor"}
    return {w["worker_id"]: w for w in body["workers"]}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_workers_of_a_pool_are_reachable_until_silent_past_the_pool_grace(world: World) -> None:
    pool = world.pool(**SHORT)["name"]  # grace 3 s
    worker = world.api.client(world.worker_token([pool]))
    busy = world.task(pool=pool)
    quiet = world.task(pool=pool)
    a = world.claim(worker, pool, worker_id="w-busy", worker_version="2.0")
    b = world.claim(worker, pool, worker_id="w-quiet", worker_version="1.0")
    assert {a["lease"]["id"], b["lease"]["id"]} == {busy["lease"]["id"], quiet["lease"]["id"]}
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-idle"})
    assert r.status_code == 204  # a claim is a sign of life, even an empty one

    seen = _workers(world, pool)
    assert set(seen) == {"w-busy", "w-quiet", "w-idle"}
    for w in seen.values():
        assert {"worker_id", "worker_version", "last_seen", "status", "leases"} <= set(w)
        assert w["status"] == "reachable"
        assert abs(_stamp(w["last_seen"]) - time.time()) < 30
    assert seen["w-busy"]["worker_version"] == "2.0"
    assert [x["id"] for x in seen["w-busy"]["leases"]] == [a["lease"]["id"]]
    assert [x["id"] for x in seen["w-quiet"]["leases"]] == [b["lease"]["id"]]
    assert seen["w-idle"]["leases"] == []

    # Only w-busy keeps beating (the per-worker heartbeat); the others fall silent.
    until = time.monotonic() + 4.5
    while time.monotonic() < until:
        r = worker.post(
            "/workers/w-busy/heartbeat",
            json={"leases": [{"id": a["lease"]["id"], "fence": a["fence"]}]},
        )
        assert r.status_code == 200 and r.json()["leases"][0]["state"] == "running", r.text
        time.sleep(1)

    seen = _workers(world, pool)
    assert seen["w-busy"]["status"] == "reachable"
    assert seen["w-quiet"]["status"] == "unreachable"
    assert seen["w-idle"]["status"] == "unreachable"
    assert [x["id"] for x in seen["w-busy"]["leases"]] == [a["lease"]["id"]]
    assert _stamp(seen["w-busy"]["last_seen"]) > _stamp(seen["w-quiet"]["last_seen"])


def test_listing_workers_needs_a_known_pool_and_a_reader_of_its_space(world: World) -> None:
    pool = world.pool()["name"]
    assert _workers(world, pool) == {}
    r = world.admin.get("/workers", params={"pool": f"pool-{suffix().lower()}"})
    assert_error(r, 404, "not_found")
    r = world.api.client().get("/workers", params={"pool": pool})
    assert_error(r, 401, "unauthenticated")
    r = world.api.client(world.worker_token([pool])).get("/workers", params={"pool": pool})
    assert_error(r, 403, "forbidden")
    other = f"W{suffix()}"
    assert world.admin.post("/spaces", json={"key": other, "name": "w"}).status_code == 201
    outsider = world.api.client(world.operator_token("read", spaces=[other]))
    r = outsider.get("/workers", params={"pool": pool})
    assert_error(r, 403, "forbidden")
    reader = world.api.client(world.operator_token("read", spaces=[world.space]))
    r = reader.get("/workers", params={"pool": pool})
    assert r.status_code == 200 and r.json() == {"workers": [], "next_cursor": None}
