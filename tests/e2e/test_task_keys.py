"""A task's key on the local stack, through its front door and the CLI: `tenure tasks get
KEY` and `tenure inspect KEY` answer what they answer for the id, and a token limited to
another space hears 404 `task_not_found` for the key of a task that exists."""

from __future__ import annotations

import json

import pytest
from tenure_cli.main import main

from tests.e2e.support import Api, World, assert_error, suffix
from tests.e2e.worker_support import service_url


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    capsys.readouterr()
    assert main([*argv, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_key_is_the_id_over_http_and_the_cli_and_hidden_from_other_spaces(
    api: Api, world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made = world.task(pool=world.pool()["name"])["task"]
    key, task_id = made["key"], made["id"]
    by_id = world.admin.get(f"/tasks/{task_id}")
    by_key = world.admin.get(f"/tasks/{key}")
    assert by_id.status_code == 200 and by_key.json() == by_id.json()
    assert world.admin.get(f"/tasks/{key}/activity").json() == (
        world.admin.get(f"/tasks/{task_id}/activity").json()
    )

    monkeypatch.setenv("TENURE_API", service_url(api.base))
    monkeypatch.setenv("TENURE_TOKEN", api.admin_token)
    assert cli_json(capsys, "tasks", "get", key) == cli_json(capsys, "tasks", "get", task_id)
    inspected = cli_json(capsys, "inspect", key)
    assert isinstance(inspected, dict) and task_id in json.dumps(inspected)

    other = f"E{suffix()}"
    assert world.admin.post("/spaces", json={"key": other, "name": "o"}).status_code == 201
    r = world.admin.post(
        "/tokens",
        json={"name": f"o-{suffix().lower()}", "kind": "operator", "spaces": [other]},
    )
    with api.client(r.json()["token"]) as elsewhere:
        assert_error(elsewhere.get(f"/tasks/{key}"), 404, "task_not_found")
        missing = key.rsplit("-", 1)[0] + "-999999"
        assert_error(world.admin.get(f"/tasks/{missing}"), 404, "task_not_found")


def test_keys_in_bodies_are_stored_as_ids_and_another_spaces_key_is_an_unknown_id(
    api: Api, world: World
) -> None:
    parent, blocker = world.task()["task"], world.task()["task"]
    child = world.task(parent_id=parent["key"], depends_on=[blocker["key"]])["task"]
    assert (child["parent_id"], child["depends_on"]) == (parent["id"], [blocker["id"]])
    stored = world.admin.get(f"/tasks/{child['id']}").json()["task"]
    assert (stored["parent_id"], stored["depends_on"]) == (parent["id"], [blocker["id"]])
    other = world.task()["task"]
    patched = world.admin.patch(f"/tasks/{child['key']}", json={"depends_on": [other["key"]]})
    assert patched.status_code == 200 and patched.json()["task"]["depends_on"] == [other["id"]]

    # A key of another space (that task exists) answers what an unknown id answers.
    elsewhere = f"E{suffix()}"
    assert world.admin.post("/spaces", json={"key": elsewhere, "name": "o"}).status_code == 201
    theirs = world.admin.post("/tasks", json={"space": elsewhere, "title": "theirs"}).json()
    key = theirs["task"]["key"]
    for field, value in (("parent_id", key), ("depends_on", [key])):
        body = {"space": world.space, "title": "t", field: value}
        seen = assert_error(world.admin.post("/tasks", json=body), 422, "validation_failed")
        unknown = {**body, field: "task_0nope" if field == "parent_id" else ["task_0nope"]}
        missing = assert_error(world.admin.post("/tasks", json=unknown), 422, "validation_failed")
        assert seen.replace(key, "?") == missing.replace("task_0nope", "?")

    # A lease token's completion names the tasks it filed by key; the report keeps the ids.
    pool = world.pool()["name"]
    with api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
    with held.lease as lease:
        filed = lease.post("/tasks", json={"title": "delegated"}).json()["task"]
        refused = lease.post(f"/leases/{held.id}/complete", json={"created_task_ids": [key]})
        elsewhere = f"{key} (is not a task of this lease's space)"
        assert_error(refused, 422, "unverified_created_tasks", elsewhere)
        done = lease.post(f"/leases/{held.id}/complete", json={"created_task_ids": [filed["key"]]})
        assert done.status_code == 200, done.text
        again = lease.post(f"/leases/{held.id}/complete", json={"created_task_ids": [filed["key"]]})
        assert again.status_code == 200 and again.json() == done.json()
