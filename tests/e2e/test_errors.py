"""Every documented error code this slice can produce, each in the exact envelope."""

from __future__ import annotations

import pytest

from tests.e2e.support import (
    EXPIRY_WAIT,
    SHORT,
    World,
    assert_error,
    suffix,
    wait_for_activity,
    wait_for_lease_state,
)

JSON = {"content-type": "application/json"}


def test_a_body_that_is_not_json_is_invalid_request(world: World) -> None:
    admin = world.admin
    r = admin.post("/spaces", content=b'{"key": "X", "name": ', headers=JSON)
    assert_error(r, 400, "invalid_request")
    r = admin.post("/spaces", content=b"", headers=JSON)
    assert_error(r, 400, "invalid_request")
    r = admin.post("/spaces")
    assert_error(r, 400, "invalid_request")
    r = admin.post("/tasks", content=b"key=X&name=x")  # what `curl -d` sends
    assert_error(r, 400, "invalid_request")

    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    r = worker.post(f"/pools/{pool}/claim", content=b"not json", headers=JSON)
    assert_error(r, 400, "invalid_request")
    r = worker.post(f"/pools/{pool}/claim")
    assert_error(r, 400, "invalid_request")


def test_json_that_is_not_an_object_is_invalid_request(world: World) -> None:
    admin = world.admin
    for raw in (b"[1, 2]", b"[]", b'"a string"', b"7", b"null"):
        r = admin.post("/spaces", content=raw, headers=JSON)
        assert_error(r, 400, "invalid_request")
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    r = worker.post(f"/pools/{pool}/claim", content=b"[]", headers=JSON)
    assert_error(r, 400, "invalid_request")


def test_a_json_array_of_objects_is_invalid_request_and_creates_no_space(world: World) -> None:
    admin = world.admin
    first, second = f"A{suffix()}", f"A{suffix()}"
    raw = f'[{{"key": "{first}", "name": "x"}}, {{"key": "{second}", "name": "y"}}]'
    r = admin.post("/spaces", content=raw.encode(), headers=JSON)
    assert_error(r, 400, "invalid_request")
    # Nothing was created: both keys are still free.
    for key in (first, second):
        r = admin.post("/spaces", json={"key": key, "name": "free"})
        assert r.status_code == 201, r.text


def test_a_claim_whose_body_is_a_json_array_is_refused_and_claims_nothing(world: World) -> None:
    admin = world.admin
    pool = world.pool()["name"]
    world.task(pool=pool)
    worker = world.api.client(world.worker_token([pool]))
    r = worker.post(f"/pools/{pool}/claim", content=b'[{"worker_id": "w-1"}]', headers=JSON)
    assert_error(r, 400, "invalid_request")
    r = admin.get("/leases", params={"space": world.space, "pool": pool})
    assert r.status_code == 200 and [x["state"] for x in r.json()["leases"]] == ["pending"]


def test_no_token_or_an_unknown_token_is_unauthenticated(world: World) -> None:
    api = world.api
    r = api.client().get("/leases", params={"space": world.space})
    assert_error(r, 401, "unauthenticated")
    r = api.client().post("/spaces", json={"key": f"N{suffix()}", "name": "n"})
    assert_error(r, 401, "unauthenticated")
    r = api.client("tnr_o_" + suffix()).get("/leases", params={"space": world.space})
    assert_error(r, 401, "unauthenticated")
    r = api.client("not-a-tenure-token").get(f"/tasks/task_{suffix()}")
    assert_error(r, 401, "unauthenticated")
    r = api.client(f"tnr_l_lease_{suffix().lower()}.{suffix()}").post("/leases/x/heartbeat")
    assert_error(r, 401, "unauthenticated")
    r = api.client().get(
        "/leases", params={"space": world.space}, headers={"authorization": "Basic x"}
    )
    assert_error(r, 401, "unauthenticated")
    # Health needs no token.
    r = api.client().get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_a_lease_token_on_an_operator_route_or_another_lease_is_a_mismatch(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    a = world.held(pool, worker)
    b = world.held(pool, worker)

    r = a.lease.get(f"/leases/{a.id}")
    assert_error(r, 403, "lease_token_mismatch")
    r = a.lease.get("/leases", params={"space": world.space})
    assert_error(r, 403, "lease_token_mismatch")
    r = a.lease.post(f"/leases/{a.id}/cancel")
    assert_error(r, 403, "lease_token_mismatch")
    for route in ("heartbeat", "start", "complete", "release"):
        r = a.lease.post(f"/leases/{b.id}/{route}", json={})
        assert_error(r, 403, "lease_token_mismatch")
    r = a.lease.get(f"/leases/{b.id}/payload")
    assert_error(r, 403, "lease_token_mismatch")

    # B was not touched by A's attempts.
    r = world.admin.get(f"/leases/{b.id}")
    assert r.status_code == 200 and r.json()["state"] == "dispatched"


def test_a_lease_token_is_refused_before_its_request_is_judged(world: World) -> None:
    pool = world.pool()["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    lease = held.lease
    r = lease.get("/leases")  # no space: still the token's fault first
    assert_error(r, 403, "lease_token_mismatch")
    r = lease.get("/leases", params={"space": world.space, "limit": "many"})
    assert_error(r, 403, "lease_token_mismatch")
    r = lease.post("/spaces", content=b"{not json", headers=JSON)
    assert_error(r, 403, "lease_token_mismatch")
    r = lease.post(f"/tasks/{held.task['id']}/enqueue", json={"pool": 7})
    assert_error(r, 403, "lease_token_mismatch")
    r = lease.post(f"/pools/{pool}/claim", json={"wait_seconds": "soon"})
    assert_error(r, 403, "lease_token_mismatch")
    r = lease.get("/workers")
    assert_error(r, 403, "lease_token_mismatch")

    # Its own lease's routes judge the body as usual, and a report may come without one.
    r = lease.post(f"/leases/{held.id}/heartbeat", json={"lease_seconds": "60"})
    assert_error(r, 422, "validation_failed", mentions="lease_seconds")
    r = lease.post(f"/leases/{held.id}/heartbeat", json={"lease_seconds": 60.0})
    assert r.status_code == 200, r.text
    r = lease.post(f"/leases/{held.id}/complete")
    assert r.status_code == 200, r.text
    assert (r.json()["lease"]["state"], r.json()["lease"]["outcome"]) == ("completed", "success")


def test_a_valid_token_lacking_the_role_or_the_scope_is_forbidden(world: World) -> None:
    api, space = world.api, world.space
    pool = world.pool()["name"]
    reader = api.client(world.operator_token("read"))
    r = reader.post("/tasks", json={"space": space, "title": "no"})
    assert_error(r, 403, "forbidden")
    r = reader.get("/leases", params={"space": space})
    assert r.status_code == 200 and r.json()["leases"] == []

    member = api.client(world.operator_token("member"))
    r = member.post("/spaces", json={"key": f"M{suffix()}", "name": "m"})
    assert_error(r, 403, "forbidden")
    r = member.post("/pools", json={"name": f"p-{suffix()}", "space": space, "kind": "command"})
    assert_error(r, 403, "forbidden")

    worker = api.client(world.worker_token([pool]))
    r = worker.get("/leases", params={"space": space})
    assert_error(r, 403, "forbidden")
    r = worker.post("/tasks", json={"space": space, "title": "no"})
    assert_error(r, 403, "forbidden")
    held = world.held(pool, api.client(world.worker_token([pool])))
    r = worker.post(f"/leases/{held.id}/cancel")
    assert_error(r, 403, "forbidden")
    r = worker.post(f"/leases/{held.id}/heartbeat")
    assert_error(r, 403, "forbidden")

    other_pool = world.pool()["name"]
    r = worker.post(f"/pools/{other_pool}/claim", json={"worker_id": "w-1"})
    assert_error(r, 403, "forbidden")
    r = reader.post(f"/pools/{pool}/claim", json={"worker_id": "w-1"})
    assert_error(r, 403, "forbidden")

    other = f"B{suffix()}"
    r = world.admin.post("/spaces", json={"key": other, "name": "b"})
    assert r.status_code == 201, r.text
    limited = api.client(world.operator_token("member", spaces=[space]))
    r = limited.get("/leases", params={"space": other})
    assert_error(r, 403, "forbidden")
    r = limited.post("/tasks", json={"space": other, "title": "no"})
    assert_error(r, 403, "forbidden")
    r = limited.get("/leases", params={"space": space})
    assert r.status_code == 200, r.text
    assert [lease["id"] for lease in r.json()["leases"]] == [held.id]
    r = limited.get(f"/tasks/{held.task['id']}")
    assert r.status_code == 200 and r.json()["task"]["id"] == held.task["id"]


def test_unknown_ids_and_routes_are_not_found(world: World) -> None:
    admin = world.admin
    r = admin.get(f"/leases/lease_{suffix().lower()}")
    assert_error(r, 404, "lease_not_found")
    r = admin.post(f"/leases/lease_{suffix().lower()}/cancel")
    assert_error(r, 404, "lease_not_found")
    r = admin.get(f"/tasks/task_{suffix().lower()}")
    assert_error(r, 404, "task_not_found")
    r = admin.get(f"/tasks/task_{suffix().lower()}/activity")
    assert_error(r, 404, "task_not_found")
    r = admin.post(f"/tasks/task_{suffix().lower()}/enqueue", json={"pool": "p"})
    assert_error(r, 404, "task_not_found")
    r = admin.get("/no-such-route")
    assert_error(r, 404, "not_found")
    r = admin.get(world.api.base.replace("/api/v1", "/api/v9") + "/health")
    assert_error(r, 404, "not_found")

    everywhere = world.api.client(world.worker_token(None))
    r = everywhere.post(f"/pools/pool-{suffix().lower()}/claim", json={"worker_id": "w-1"})
    assert_error(r, 404, "not_found")
    r = admin.post(
        "/pools", json={"name": f"p-{suffix()}", "space": f"Z{suffix()}", "kind": "agent"}
    )
    assert_error(r, 404, "not_found")
    r = admin.post("/tasks", json={"space": world.space, "title": "t", "workflow": "nope"})
    assert_error(r, 404, "not_found")


def test_a_report_after_release_is_a_stale_lease(world: World) -> None:
    pool = world.pool()["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    r = held.lease.post(f"/leases/{held.id}/release", json={"reason": "shutting down"})
    assert r.status_code == 200, r.text
    released = r.json()["lease"]
    assert released["state"] == "cancelled" and released["end_reason"] == "released"

    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert_error(r, 409, "stale_lease")
    r = held.lease.post(f"/leases/{held.id}/heartbeat")
    assert_error(r, 409, "stale_lease")
    r = held.lease.post(f"/leases/{held.id}/fail", json={"error": "late"})
    assert_error(r, 409, "stale_lease")

    r = world.admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json() == released
    events = wait_for_activity(world.admin, held.task["id"], ["lease.stale_report"])
    stale = [ev for ev in events if ev["type"] == "lease.stale_report"]
    assert {ev["lease_id"] for ev in stale} == {held.id}


def test_a_report_after_expiry_is_a_stale_lease_recorded_on_the_timeline(world: World) -> None:
    pool = world.pool(**SHORT)["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    r = held.lease.post(f"/leases/{held.id}/start")
    assert r.status_code == 200, r.text

    lost = wait_for_lease_state(world.admin, held.id, {"lost"}, EXPIRY_WAIT)
    assert lost["end_reason"] == "expired"

    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert_error(r, 409, "stale_lease")
    r = held.lease.post(f"/leases/{held.id}/heartbeat")
    assert_error(r, 409, "stale_lease")

    events = wait_for_activity(world.admin, held.task["id"], ["lease.lost", "lease.stale_report"])
    stale = [ev for ev in events if ev["type"] == "lease.stale_report"]
    assert len(stale) >= 2 and all(ev["lease_id"] == held.id for ev in stale)
    assert all(ev["fence"] == 1 for ev in stale)
    r = world.admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json()["state"] == "lost"


def test_a_different_report_on_an_ended_lease_or_a_second_run_is_an_invalid_transition(
    world: World,
) -> None:
    pool = world.pool()["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "success"})
    assert r.status_code == 200, r.text
    completed = r.json()["lease"]

    r = held.lease.post(f"/leases/{held.id}/fail", json={"error": "changed my mind"})
    assert_error(r, 409, "invalid_transition")
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "failure"})
    assert_error(r, 409, "invalid_transition")
    r = world.admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json() == completed

    queued = world.task(pool=pool)
    r = world.admin.post(f"/tasks/{queued['task']['id']}/enqueue", json={"pool": pool})
    assert_error(r, 409, "invalid_transition")
    r = world.admin.get(f"/tasks/{queued['task']['id']}")
    assert r.status_code == 200 and r.json()["lease"]["id"] == queued["lease"]["id"]

    # Pausing a lease that is not running is refused the same way.
    r = world.admin.post(f"/leases/{queued['lease']['id']}/pause")
    assert_error(r, 409, "invalid_transition")


def test_creating_a_name_that_exists_is_already_exists(world: World) -> None:
    admin, space = world.admin, world.space
    r = admin.post("/spaces", json={"key": space, "name": "again"})
    assert_error(r, 409, "already_exists")

    slug = f"wf-{suffix().lower()}"
    r = admin.post("/workflows", json={"space": space, "slug": slug, "name": "one"})
    assert r.status_code == 201, r.text
    r = admin.post("/workflows", json={"space": space, "slug": slug, "name": "two"})
    assert_error(r, 409, "already_exists")

    pool = world.pool()
    agents = {"name": pool["name"], "space": space, "kind": "agent", "agent": {"model": "m-1"}}
    r = admin.post("/pools", json=agents)
    assert_error(r, 409, "already_exists")

    name = f"tok-{suffix().lower()}"
    r = admin.post("/tokens", json={"name": name, "kind": "operator"})
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "read"
    first = r.json()["token"]
    r = admin.post("/tokens", json={"name": name, "kind": "worker"})
    assert_error(r, 409, "already_exists")

    # The first of each still stands: the read token reads, the pool takes work.
    reader = world.api.client(first)
    r = reader.get("/leases", params={"space": space})
    assert r.status_code == 200 and r.json()["leases"] == []
    created = world.task(pool=pool["name"])
    assert created["lease"]["pool"] == pool["name"]
    r = reader.post("/tasks", json={"space": space, "title": "no"})
    assert_error(r, 403, "forbidden")


def test_listing_leases_without_a_space_is_missing_scope(world: World) -> None:
    r = world.admin.get("/leases")
    assert_error(r, 422, "missing_scope")
    r = world.admin.get("/leases", params={"space": ""})
    assert_error(r, 422, "missing_scope")
    r = world.admin.get("/leases", params={"state": "pending"})
    assert_error(r, 422, "missing_scope")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/spaces", {"key": "OK", "name": "n", "colour": "red"}, "colour"),
        ("/spaces", {"key": "lower", "name": "n"}, "key"),
        ("/spaces", {"name": "n"}, "key"),
        ("/spaces", {"key": "OK", "name": 7}, "name"),
        ("/pools", {"name": "p", "space": "S", "kind": "robot"}, "kind"),
        (
            "/pools",
            {"name": "p", "space": "S", "kind": "command", "renew_seconds": 5, "grace_seconds": 3},
            "grace_seconds",
        ),
        ("/tokens", {"name": "t", "kind": "worker", "role": "admin"}, "role"),
        ("/tasks", {"space": "S", "title": "t", "max_attempts": 0}, "max_attempts"),
    ],
)
def test_a_json_object_that_breaks_the_schema_is_validation_failed_naming_the_field(
    world: World, path: str, body: dict[str, object], field: str
) -> None:
    r = world.admin.post(path, json=body)
    assert_error(r, 422, "validation_failed", mentions=field)


def test_validation_failed_names_the_field_on_lists_claims_and_heartbeats(world: World) -> None:
    admin, space = world.admin, world.space
    r = admin.get("/leases", params={"space": space, "limit": 101})
    assert_error(r, 422, "validation_failed", mentions="limit")
    r = admin.get("/leases", params={"space": space, "limit": 0})
    assert_error(r, 422, "validation_failed", mentions="limit")
    r = admin.get("/leases", params={"space": space, "state": "sleeping"})
    assert_error(r, 422, "validation_failed", mentions="state")

    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "wait_seconds": 21})
    assert_error(r, 422, "validation_failed", mentions="wait_seconds")
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "lease_seconds": 4})
    assert_error(r, 422, "validation_failed", mentions="lease_seconds")
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "lease_seconds": 43201})
    assert_error(r, 422, "validation_failed", mentions="lease_seconds")
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-1", "extra": True})
    assert_error(r, 422, "validation_failed", mentions="extra")
    r = worker.post(f"/pools/{pool}/claim", json={})
    assert_error(r, 422, "validation_failed", mentions="worker_id")

    held = world.held(pool, worker)
    r = held.lease.post(f"/leases/{held.id}/heartbeat", json={"lease_seconds": 4})
    assert_error(r, 422, "validation_failed", mentions="lease_seconds")
    r = held.lease.post(f"/leases/{held.id}/complete", json={"outcome": "maybe"})
    assert_error(r, 422, "validation_failed", mentions="outcome")
    r = held.lease.post(f"/leases/{held.id}/fail", json={"error": ""})
    assert_error(r, 422, "validation_failed", mentions="error")
    r = worker.post("/workers/w-1/heartbeat", json={"leases": [{"id": held.id}]})
    assert_error(r, 422, "validation_failed", mentions="fence")

    # None of the refused requests changed the lease.
    r = admin.get(f"/leases/{held.id}")
    assert r.status_code == 200 and r.json()["state"] == "dispatched"
