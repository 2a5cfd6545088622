"""Pools, spaces and the instance over HTTP: management routes, every queued
condition produced and cleared through the API, pinned versions in payloads, a classifier
worker's answers rendered into its task, and the CLI's condition column."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import World, assert_error, suffix, wait_for, wait_for_activity
from tests.e2e.worker_support import Workers, clean_env, run_cli, running_workers, service_url

ROOT = Path(__file__).resolve().parents[2]
CLASSIFY_JOB = ROOT / "samplesources" / "workers" / "classify-job.py"
REFUSING = {"state": "refusing", "reason": "the container runtime is down"}
UNREACHABLE = {"state": "unreachable", "reason": "the credential source is sealed"}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


def condition(world: World, lease_id: str, pool: str | None = None) -> dict[str, Any] | None:
    """The lease's queued condition, which must read the same in the list and the single read."""
    r = world.admin.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    single: dict[str, Any] | None = r.json()["queued_condition"]
    query: dict[str, Any] = {"space": world.space, "limit": 100}
    if pool:
        query["pool"] = pool
    listed = world.admin.get("/leases", params=query)
    assert listed.status_code == 200, listed.text
    [row] = [x for x in listed.json()["leases"] if x["id"] == lease_id]
    assert row["queued_condition"] == single
    return single


def code(world: World, lease_id: str) -> str | None:
    found = condition(world, lease_id)
    return found["code"] if found else None


def queued(world: World, pool: str) -> str:
    lease_id: str = world.task(pool=pool)["lease"]["id"]
    return lease_id


def no_claim(worker: httpx.Client, pool: str, wait: float = 0.6) -> None:
    r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-x", "wait_seconds": wait})
    assert r.status_code == 204, r.text


# --------------------------------------------------------------------- management routes


def test_pools_are_listed_read_and_patched(world: World) -> None:
    pool = world.pool(display_name="Builds", max_active=2)["name"]
    world.pool()
    r = world.admin.get("/pools", params={"space": world.space})
    assert r.status_code == 200, r.text
    rows = {p["name"]: p for p in r.json()["pools"]}
    assert len(rows) == 2 and rows[pool]["display_name"] == "Builds"
    assert rows[pool]["version"] == 1 and rows[pool]["active"] == 0
    r = world.admin.patch(f"/pools/{pool}", json={"max_active": None, "toleration_seconds": 600})
    assert r.status_code == 200, r.text
    got = r.json()["pool"]
    assert (got["max_active"], got["toleration_seconds"], got["version"]) == (None, 600, 1)
    assert world.admin.get(f"/pools/{pool}").json()["pool"] == got
    r = world.admin.patch(f"/pools/{pool}", json={"display_name": None})
    assert r.json()["pool"]["display_name"] == pool  # defaults to the name


def test_pool_routes_refuse_bad_input_with_stable_codes(world: World) -> None:
    pool = world.pool()["name"]
    assert_error(world.admin.get("/pools"), 422, "missing_scope", "space")
    assert_error(world.admin.get("/pools/no-such-pool"), 404, "not_found")
    assert_error(world.admin.patch(f"/pools/{pool}", json={"colour": 1}), 422, "validation_failed")
    bad = {"agent": {"model": "m-1"}}
    assert_error(world.admin.patch(f"/pools/{pool}", json=bad), 422, "validation_failed", "agent")
    assert_error(
        world.admin.patch(f"/pools/{pool}", json={"grace_seconds": 5000}),
        422,
        "validation_failed",
        "toleration_seconds",
    )
    classifier = world.pool(kind="classifier", classifier={"input": {}})["name"]
    broken = {"classifier": {"input": {}, "output": {"checks": {"ok": "a ||"}}}}
    assert_error(
        world.admin.patch(f"/pools/{classifier}", json=broken),
        422,
        "validation_failed",
        "classifier.output.checks.ok",
    )
    member = world.api.client(world.operator_token("member"))
    assert_error(member.post(f"/pools/{pool}/pause"), 403, "forbidden")
    assert_error(member.post(f"/spaces/{world.space}/archive"), 403, "forbidden")
    assert_error(member.get("/instance"), 403, "forbidden")
    assert_error(world.admin.post("/spaces/NOPE_X/archive"), 404, "not_found")


def test_instance_settings_read_and_patch(world: World) -> None:
    r = world.admin.get("/instance")
    assert r.status_code == 200, r.text
    assert set(r.json()) == {
        "max_active",
        "block_recurrence_limit",
        "allow_agent_force",
        "retry_chain_cap",
        "event_ttl_seconds",
        "active",
    }
    before = r.json()
    try:
        r = world.admin.patch("/instance", json={"retry_chain_cap": 7})
        assert r.status_code == 200 and r.json()["retry_chain_cap"] == 7, r.text
        assert_error(
            world.admin.patch("/instance", json={"retry_chain_cap": 0}),
            422,
            "validation_failed",
            "retry_chain_cap",
        )
    finally:
        world.admin.patch("/instance", json={"retry_chain_cap": before["retry_chain_cap"]})


# -------------------------------------------------------------- every queued condition


def test_awaiting_agent_then_starting_then_none(world: World) -> None:
    pool = world.pool()["name"]
    lease_id = queued(world, pool)
    assert condition(world, lease_id) == {
        "code": "awaiting_agent",
        "label": "awaiting agent",
        "needs_person": False,
    }
    worker = world.api.client(world.worker_token([pool]))
    won = world.claim(worker, pool)
    assert code(world, lease_id) == "starting"
    r = world.api.client(won["token"]).post(f"/leases/{lease_id}/start")
    assert r.status_code == 200, r.text
    assert condition(world, lease_id) is None


def test_pool_paused_holds_claims_and_clears_on_resume(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    lease_id = queued(world, pool)
    r = world.admin.post(f"/pools/{pool}/pause")
    assert r.status_code == 200 and r.json()["pool"]["paused"] is True, r.text
    assert condition(world, lease_id) == {
        "code": "pool_paused",
        "label": "pool paused",
        "needs_person": True,
    }
    no_claim(worker, pool)
    assert world.admin.post(f"/pools/{pool}/resume").json()["pool"]["paused"] is False
    assert code(world, lease_id) == "awaiting_agent"
    assert world.claim(worker, pool)["lease"]["id"] == lease_id


def test_space_archived_refuses_tasks_and_clears_on_unarchive(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    lease_id = queued(world, pool)
    rule = {
        "space": world.space,
        "name": f"arc-{suffix()}",
        "pool": pool,
        "subject": {"kind": "task", "title": "from a rule"},
        "trigger": {"topic": "arc.test"},
    }
    made = world.admin.post("/rules", json=rule)
    assert made.status_code == 201, made.text
    r = world.admin.post(f"/spaces/{world.space}/archive")
    assert r.status_code == 200 and r.json()["space"]["archived"] is True, r.text
    assert code(world, lease_id) == "space_archived"
    no_claim(worker, pool)
    refused = world.admin.post("/tasks", json={"space": world.space, "title": "more"})
    assert_error(refused, 409, "invalid_transition", "archived")
    fired = world.admin.post(f"/rules/{made.json()['rule']['id']}/fire")
    assert_error(fired, 409, "invalid_transition", "archived")
    event = {"space": world.space, "topic": "arc.test", "data": {}}
    posted = world.admin.post("/events", json=event)
    assert posted.status_code == 202 and posted.json()["leases"] == [], posted.text
    assert world.admin.post(f"/spaces/{world.space}/unarchive").json()["space"]["archived"] is False
    assert code(world, lease_id) == "awaiting_agent"
    assert world.claim(worker, pool)["lease"]["id"] == lease_id


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ({"runtime": REFUSING}, "runtime_refusing"),
        ({"credentials": UNREACHABLE}, "token_pool_unreachable"),
    ],
)
def test_worker_state_conditions_follow_the_worker_heartbeat(
    world: World, said: dict[str, Any], expected: str
) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))
    lease_id = queued(world, pool)

    def beat(worker_id: str, **state: Any) -> None:
        body = {"leases": [], "pool": pool, **state}
        r = worker.post(f"/workers/{worker_id}/heartbeat", json=body)
        assert r.status_code == 200, r.text

    beat("w-1", **said)
    found = condition(world, lease_id)
    assert found is not None and (found["code"], found["needs_person"]) == (expected, True)
    beat("w-2")  # a second reachable worker that says nothing: not every worker says so
    assert code(world, lease_id) == "awaiting_agent"
    beat("w-2", **said)
    assert code(world, lease_id) == expected
    listed = world.admin.get("/workers", params={"pool": pool}).json()["workers"]
    assert {w["worker_id"] for w in listed} == {"w-1", "w-2"}
    ok = {name: {"state": "ok"} for name in said}
    beat("w-1", **ok)
    assert code(world, lease_id) == "awaiting_agent"


def test_pool_full_clears_when_the_held_lease_completes(world: World) -> None:
    pool = world.pool(max_active=1)["name"]
    worker = world.api.client(world.worker_token([pool]))
    held = world.held(pool, worker)
    lease_id = queued(world, pool)
    assert condition(world, lease_id) == {
        "code": "pool_full",
        "label": "pool full",
        "needs_person": False,
    }
    no_claim(worker, pool)
    assert held.lease.post(f"/leases/{held.id}/complete", json={}).status_code == 200
    assert code(world, lease_id) == "awaiting_agent"


def test_key_full_holds_one_key_back_while_other_keys_are_claimed(world: World) -> None:
    pool = world.pool(max_active_per_key=1)["name"]
    worker = world.api.client(world.worker_token([pool]))
    held = world.held(pool, worker, concurrency_key="tenant-7")
    waiting = world.task(pool=pool, concurrency_key="tenant-7")["lease"]["id"]
    other = world.task(pool=pool, concurrency_key="tenant-8")["lease"]["id"]
    assert condition(world, waiting) == {
        "code": "key_full",
        "label": "waiting for tenant-7",
        "needs_person": False,
    }
    assert world.claim(worker, pool)["lease"]["id"] == other  # a full key is not a full pool
    no_claim(worker, pool)
    assert held.lease.post(f"/leases/{held.id}/complete", json={}).status_code == 200
    assert code(world, waiting) == "awaiting_agent"
    assert world.claim(worker, pool)["lease"]["id"] == waiting


def test_rate_limited_once_the_minutes_claims_are_used_up(world: World) -> None:
    pool = world.pool(max_claims_per_minute=1)["name"]
    worker = world.api.client(world.worker_token([pool]))
    first = world.task(pool=pool)["lease"]["id"]
    second = world.task(pool=pool)["lease"]["id"]
    won = world.claim(worker, pool)["lease"]["id"]
    waiting = second if won == first else first
    # A minute's boundary between the claim and the read clears it: only then may it differ.
    found = condition(world, waiting)
    assert found is not None and found["code"] in ("rate_limited", "awaiting_agent")
    if found["code"] == "rate_limited":
        assert found == {"code": "rate_limited", "label": "rate limited", "needs_person": False}
    r = world.admin.patch(f"/pools/{pool}", json={"max_claims_per_minute": 0})
    assert_error(r, 422, "validation_failed")


def test_space_full_clears_when_the_held_lease_is_released(world: World) -> None:
    key = f"F{suffix()}"
    r = world.admin.post("/spaces", json={"key": key, "name": "tight", "max_active": 1})
    assert r.status_code == 201, r.text
    tight = World(world.api, world.admin, key)
    pools = [tight.pool()["name"], tight.pool()["name"]]
    worker = world.api.client(tight.worker_token(pools))
    held = tight.held(pools[0], worker)
    lease_id = queued(tight, pools[1])
    assert code(tight, lease_id) == "space_full"
    no_claim(worker, pools[1])
    assert held.lease.post(f"/leases/{held.id}/release", json={}).status_code == 200
    assert code(tight, lease_id) == "awaiting_agent"


def test_instance_full_clears_when_the_held_lease_is_killed(world: World) -> None:
    pool = world.pool()["name"]
    worker = world.api.client(world.worker_token([pool]))

    def active() -> int:
        count: int = world.admin.get("/instance").json()["active"]
        return count

    try:
        # Setting a ceiling counts every lease already held (other tests' too); lowering it
        # then leaves room for exactly one more. The session stack's sweeper may end another
        # test's held lease meanwhile, which frees a slot: such a try proves nothing (though
        # the ceiling must still hold) and is made again.
        r = world.admin.patch("/instance", json={"max_active": 100_000})
        assert r.status_code == 200, r.text
        for _ in range(5):
            counted = active()
            r = world.admin.patch("/instance", json={"max_active": counted + 1})
            assert r.status_code == 200, r.text
            held = world.held(pool, worker)
            lease_id = queued(world, pool)
            judged = code(world, lease_id)
            r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "w-x", "wait_seconds": 0.6})
            assert r.status_code in (200, 204), r.text
            assert active() <= counted + 1  # never past the ceiling
            if r.status_code == 204 and judged == "instance_full" and active() == counted + 1:
                break
            for ended in (held.id, *([r.json()["lease"]["id"]] if r.status_code == 200 else [])):
                world.admin.post(f"/leases/{ended}/kill")
            if r.status_code == 200:
                world.api.client(r.json()["token"]).post(f"/leases/{lease_id}/complete", json={})
            held.lease.post(f"/leases/{held.id}/complete", json={})
        else:
            pytest.fail("other tests' leases kept ending during every try")
        assert world.admin.post(f"/leases/{held.id}/kill").status_code == 200
        assert held.lease.post(f"/leases/{held.id}/complete", json={}).json()["lease"]["state"] == (
            "killed"
        )
        assert code(world, lease_id) == "awaiting_agent"
        assert active() <= counted
    finally:
        world.admin.patch("/instance", json={"max_active": None})


# ---------------------------------------------------------------------------- versions


def test_agent_payloads_carry_the_pinned_version_and_effort_only_when_set(world: World) -> None:
    pool = world.pool(kind="agent", agent={"model": "m-1", "effort": "high"})["name"]
    first = queued(world, pool)
    r = world.admin.patch(f"/pools/{pool}", json={"agent": {"model": "m-2"}})
    assert r.status_code == 200 and r.json()["pool"]["version"] == 2, r.text
    second = queued(world, pool)
    worker = world.api.client(world.worker_token([pool]))
    bundles = {}
    for _ in range(2):
        won = world.claim(worker, pool)
        lease = world.api.client(won["token"])
        bundles[won["lease"]["id"]] = lease.get(f"/leases/{won['lease']['id']}/payload").json()
    assert bundles[first]["kind"] == "agent"
    assert (bundles[first]["model"], bundles[first]["effort"]) == ("m-1", "high")
    assert bundles[second]["model"] == "m-2" and "effort" not in bundles[second]
    assert "input" not in bundles[second]


def test_a_classifier_worker_answers_and_its_task_gets_checks_and_properties(
    world: World, workers: Workers
) -> None:
    settings = {
        "input": {
            "attachments": [{"name": "scan.pdf"}],
            "questions": [{"id": "q1", "contains": "invoice"}, {"id": "q2", "contains": "refund"}],
        },
        "output": {
            "checks": {"is_invoice": "answers.q1 == 'yes'", "bad": "length(words) > `1`"},
            "properties": {"score": "score", "words": "words"},
        },
    }
    pool = world.pool(kind="classifier", classifier=settings, **{"toleration_seconds": 600})
    name = pool["name"]
    task = world.task(pool=name, body="Invoice 42 for March")["task"]
    token = world.worker_token([name])
    script = f"{shlex.quote(sys.executable)} {shlex.quote(str(CLASSIFY_JOB))}"
    run = workers.start(world.api.base, token, name, script)
    assert run.wait(60) == 0, run.stderr()

    def classified() -> dict[str, Any] | None:
        got: dict[str, Any] = world.admin.get(f"/tasks/{task['id']}").json()["task"]
        return got if got["status"] == "completed" else None

    got = wait_for(classified, 20, "the classifier's task to complete")
    assert got["checks"] == {"is_invoice": True}
    assert got["properties"] == {"score": 0.5, "words": 4}
    events = wait_for_activity(world.admin, task["id"], ["classifier.output_failed"])
    [failed] = [e for e in events if e["type"] == "classifier.output_failed"]
    assert failed["data"]["failed"][0]["field"] == "checks.bad"


# ---------------------------------------------------------------------------------- CLI


def test_the_cli_manages_pools_and_lists_conditions_as_the_board_reads_them(
    world: World,
) -> None:
    pool = world.pool(display_name="Builds", max_active=1)["name"]
    worker = world.api.client(world.worker_token([pool]))
    world.held(pool, worker)
    queued(world, pool)
    env = clean_env(TENURE_API=service_url(world.api.base), TENURE_TOKEN=world.api.admin_token)
    out = run_cli("leases", "list", "--space", world.space, env=env)
    assert out.returncode == 0, out.stderr
    assert "CONDITION" in out.stdout and "Builds (pool full)" in out.stdout
    out = run_cli("pools", "pause", pool, env=env)
    assert out.returncode == 0, out.stderr
    assert (
        "Builds (pool paused)" in run_cli("leases", "list", "--space", world.space, env=env).stdout
    )
    assert run_cli("pools", "resume", pool, env=env).returncode == 0
    out = run_cli("pools", "update", pool, "--display-name", "Nightly", "-o", "json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["display_name"] == "Nightly", out.stderr
    listed = run_cli("pools", "list", "--space", world.space, env=env)
    assert pool in listed.stdout and "Nightly" in listed.stdout
    shown = run_cli("pools", "show", pool, "-o", "json", env=env)
    assert json.loads(shown.stdout)["name"] == pool
    out = run_cli("spaces", "archive", world.space, "-o", "json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["archived"] is True, out.stderr
    assert run_cli("spaces", "unarchive", world.space, env=env).returncode == 0
    bad = run_cli("pools", "update", pool, "--model", "m", env=env)
    assert bad.returncode == 1 and "validation_failed" in bad.stderr
