"""GET /api/v1/tasks over HTTP against the local stack: a space's tasks newest first, each with
its lease, paged by an opaque cursor; the status filter; the refusals in the API's error
envelope."""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.e2e.support import World, assert_error
from tests.e2e.worker_support import run_cli, service_url


def _pages(world: World, **query: Any) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(20):
        params = {"space": world.space, **query, **({"cursor": cursor} if cursor else {})}
        r = world.admin.get("/tasks", params=params)
        assert r.status_code == 200, r.text
        pages.append(r.json())
        cursor = pages[-1]["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("the task list never handed back a null cursor")


def test_tasks_page_newest_first_with_their_leases_and_filter_by_status(world: World) -> None:
    pool = world.pool(display_name="Build farm")["name"]
    ready = world.task()["task"]
    queued = world.task(pool=pool)
    blocker = world.task()["task"]
    blocked = world.task(depends_on=[blocker["id"]])["task"]
    newest = world.task()["task"]
    filed = [ready["id"], queued["task"]["id"], blocker["id"], blocked["id"], newest["id"]]

    pages = _pages(world, limit=2)

    assert [len(p["tasks"]) for p in pages] == [2, 2, 1]
    listed = [entry for page in pages for entry in page["tasks"]]
    assert [entry["task"]["id"] for entry in listed] == filed[::-1]
    by_id = {entry["task"]["id"]: entry for entry in listed}
    assert by_id[ready["id"]]["lease"] is None
    assert by_id[ready["id"]]["task"]["status"] == "ready"
    # The task as GET /tasks/{id} shows it, the lease as GET /leases/{id} shows it.
    for task_id in (queued["task"]["id"], blocked["id"]):
        single = world.admin.get(f"/tasks/{task_id}").json()
        assert by_id[task_id]["task"] == single["task"]
    lease = by_id[queued["task"]["id"]]["lease"]
    assert lease == world.admin.get(f"/leases/{lease['id']}").json()
    assert lease["queued_condition"]["code"] == "awaiting_agent"
    assert by_id[blocked["id"]]["task"]["blocked_reasons"] == [
        {"source": "dependency", "depends_on_task_ids": [blocker["id"]]}
    ]

    # The CLI reads the same page.
    out = run_cli(
        *("tasks", "list", "--space", world.space, "--status", "blocked", "-o", "json"),
        *("--api", service_url(world.api.base), "--token", world.api.admin_token),
    )
    assert out.returncode == 0, out.stderr
    # The records `tasks get` prints ({task, lease}), and the page's cursor.
    page = json.loads(out.stdout)
    assert [row["task"]["id"] for row in page["tasks"]] == [blocked["id"]]
    assert page["next_cursor"] is None

    only_blocked = _pages(world, status="blocked")
    assert [e["task"]["id"] for p in only_blocked for e in p["tasks"]] == [blocked["id"]]
    only_ready = _pages(world, status="ready", limit=1)
    assert [e["task"]["id"] for p in only_ready for e in p["tasks"]] == [
        newest["id"],
        blocker["id"],
        ready["id"],
    ]


def test_the_task_list_refuses_what_it_cannot_answer(world: World) -> None:
    world.task()
    forged = base64.urlsafe_b64encode(json.dumps({"k": "not a position"}).encode()).decode()
    lease_cursor = base64.urlsafe_b64encode(
        json.dumps({"p": "0000000000001#lease_1"}).encode()
    ).decode()
    for cursor in (forged, lease_cursor, "garbage!"):
        r = world.admin.get("/tasks", params={"space": world.space, "cursor": cursor})
        assert_error(r, 422, "validation_failed", "cursor")
    assert_error(world.admin.get("/tasks"), 422, "missing_scope")
    assert_error(world.admin.get("/tasks?space="), 422, "missing_scope")
    r = world.admin.get("/tasks", params={"space": world.space, "limit": 101})
    assert_error(r, 422, "validation_failed", "limit")
    r = world.admin.get("/tasks", params={"space": world.space, "status": "sleeping"})
    assert_error(r, 422, "validation_failed", "status")
    other_space = "X" + world.space
    r = world.admin.post("/spaces", json={"key": other_space, "name": "Elsewhere"})
    assert r.status_code == 201, r.text
    elsewhere = world.operator_token("read", spaces=[other_space])
    with world.api.client(elsewhere) as other:
        assert_error(other.get("/tasks", params={"space": world.space}), 403, "forbidden")
