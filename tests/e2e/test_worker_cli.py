"""The operator side of the `tenure` CLI against the local stack: set up a space, a pool, tokens
and a task, watch and cancel leases, and get errors as `error: <code>: <message>`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tenure_cli.local.engines import free_port

from tests.e2e.support import Api, suffix
from tests.e2e.worker_support import clean_env, run_cli, service_url
from tests.e2e.worker_support import lease as read_lease


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(_ok(done))


def _refused(done: subprocess.CompletedProcess[str], code: str) -> str:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), done.stderr
    assert lines[0].removeprefix(f"error: {code}: ").strip(), "the message is empty"
    return lines[0]


@pytest.fixture
def admin_args(api: Api) -> list[str]:
    return ["--api", service_url(api.base), "--token", api.admin_token]


def test_an_operator_sets_up_work_and_watches_and_cancels_leases_with_the_cli(
    api: Api, admin_args: list[str]
) -> None:
    space = f"C{suffix()}"
    made = _json(
        run_cli("spaces", "create", *admin_args, "--key", space, "--name", "cli", "-o", "json")
    )
    assert made["key"] == space and made["name"] == "cli" and made["archived"] is False

    pool = f"pool-{suffix().lower()}"
    made = _json(
        run_cli(
            "pools", "create", *admin_args, "--name", pool, "--space", space,
            "--renew-seconds", "2", "--grace-seconds", "30", "--toleration-seconds", "120",
            "-o", "json",
        )
    )  # fmt: skip
    assert made["name"] == pool and made["space"] == space and made["kind"] == "command"
    # Long enough that the lease claimed below is still held when it is cancelled, however
    # slowly a loaded machine runs the commands in between (4 s let it expire first).
    timings = (made["renew_seconds"], made["grace_seconds"], made["toleration_seconds"])
    assert timings == (2, 30, 120)

    worker = _json(
        run_cli(
            "tokens", "create", *admin_args, "--name", f"w-{suffix()}", "--kind", "worker",
            "--pools", pool, "-o", "json",
        )
    )  # fmt: skip
    assert worker["token"].startswith("tnr_w_") and worker["id"]
    # The table form shows the token once, and says so.
    shown = _ok(
        run_cli(
            "tokens", "create", *admin_args, "--name", f"m-{suffix()}", "--kind", "operator",
            "--role", "member", "--spaces", space,
        )
    )  # fmt: skip
    [line] = [ln for ln in shown.splitlines() if "shown once" in ln]
    member = line.split()[1]
    assert line.startswith("token ") and member.startswith("tnr_o_"), shown
    assert re.search(r"^role\s+member$", shown, re.M), shown

    created = _json(
        run_cli(
            "tasks", "create", *admin_args, "--space", space, "--title", "from the cli",
            "--pool", pool, "--properties", '{"size": 3}', "-o", "json",
        )
    )  # fmt: skip
    task, lease = created["task"], created["lease"]
    assert task["title"] == "from the cli" and task["properties"] == {"size": 3}
    assert lease["state"] == "pending" and lease["pool"] == pool
    got = _json(run_cli("tasks", "get", *admin_args, task["id"], "-o", "json"))
    assert got["task"]["id"] == task["id"] and got["lease"]["id"] == lease["id"]

    # A second lease, claimed, so the listing shows two states.
    other = _json(
        run_cli("tasks", "create", *admin_args, "--space", space, "--title", "t2", "--pool", pool,
                "-o", "json")
    )["lease"]  # fmt: skip
    with api.client(worker["token"]) as w:
        r = w.post(f"/pools/{pool}/claim", json={"worker_id": "cli-w"})
        assert r.status_code == 200, r.text
        claimed = r.json()["lease"]["id"]
    assert claimed in (lease["id"], other["id"])

    table = _ok(run_cli("leases", "list", *admin_args, "--space", space)).splitlines()
    header = table[0].split()
    assert header[:3] == ["ID", "STATE", "ATTEMPT"] and "POOL" in header, table
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert set(rows) == {lease["id"], other["id"]}, table
    assert rows[claimed][1] == "dispatched"
    assert "cli-w" in rows[claimed]
    unclaimed = other["id"] if claimed == lease["id"] else lease["id"]
    assert rows[unclaimed][1] == "pending"

    listed = _json(run_cli("leases", "list", *admin_args, "--space", space, "-o", "json"))
    assert listed["next_cursor"] is None
    leases = listed["leases"]
    assert {x["id"]: x["state"] for x in leases} == {claimed: "dispatched", unclaimed: "pending"}
    pending_only = _json(
        run_cli("leases", "list", *admin_args, "--space", space, "--state", "pending", "-o", "json")
    )
    assert [x["id"] for x in pending_only["leases"]] == [unclaimed]
    got = _json(run_cli("leases", "get", *admin_args, claimed, "-o", "json"))
    assert got["id"] == claimed and got["state"] == "dispatched" and got["worker_id"] == "cli-w"

    # The member token, given through TENURE_API / TENURE_TOKEN, cancels.
    env = clean_env(TENURE_API=service_url(api.base), TENURE_TOKEN=member)
    first = run_cli("leases", "cancel", unclaimed, "-o", "json", env=env)
    done = _json(first)
    assert done["state"] == "cancelled"
    assert "already ended" not in first.stderr, first.stderr
    # Again, now that it has ended: the same lease, exit 0, and a word on stderr that it had.
    again = run_cli("leases", "cancel", unclaimed, "-o", "json", env=env)
    assert _json(again) == done
    assert f"lease {unclaimed} had already ended (cancelled)" in again.stderr, again.stderr
    done = _json(run_cli("leases", "cancel", claimed, "-o", "json", env=env))
    assert done["state"] == "cancelling" and done["revoke"] == "cancel"
    # A lease reads the same whether got, listed or acted on: one record, the same fields.
    assert set(done) == set(got) == {key for x in leases for key in x}
    with api.admin() as admin:
        assert read_lease(admin, unclaimed)["state"] == "cancelled"
        assert read_lease(admin, claimed)["state"] == "cancelling"


def test_list_commands_page_with_limit_and_cursor_and_all_reads_every_page(
    api: Api, admin_args: list[str]
) -> None:
    space = f"C{suffix()}"
    _ok(run_cli("spaces", "create", *admin_args, "--key", space, "--name", "pages"))
    pool = f"pool-{suffix().lower()}"
    _ok(run_cli("pools", "create", *admin_args, "--name", pool, "--space", space))
    for n in range(3):
        _ok(run_cli("tasks", "create", *admin_args, "--space", space, "--title", f"t{n}",
                    "--pool", pool))  # fmt: skip
    for noun in ("leases", "tasks"):
        listing = [noun, "list", *admin_args, "--space", space, "-o", "json"]
        whole = _json(run_cli(*listing))
        assert len(whole[noun]) == 3 and whole["next_cursor"] is None
        first = _json(run_cli(*listing, "--limit", "2"))
        assert len(first[noun]) == 2 and first["next_cursor"]
        rest = _json(run_cli(*listing, "--limit", "2", "--cursor", first["next_cursor"]))
        assert len(rest[noun]) == 1 and rest["next_cursor"] is None
        every = _json(run_cli(*listing, "--limit", "1", "--all"))
        assert every == {noun: first[noun] + rest[noun], "next_cursor": None}
        assert every[noun] == whole[noun]
        # In a table, a page with more after it says so, and how to get the rest.
        table = run_cli(noun, "list", *admin_args, "--space", space, "--limit", "2")
        assert table.returncode == 0 and len(table.stdout.splitlines()) == 3, table
        assert "2 shown, more exist: --all for every page, or --cursor " in table.stderr


def test_a_task_a_pool_and_a_token_read_the_same_from_every_command(
    api: Api, admin_args: list[str]
) -> None:
    space = f"C{suffix()}"
    _ok(run_cli("spaces", "create", *admin_args, "--key", space, "--name", "shapes"))
    pool = f"pool-{suffix().lower()}"
    made_pool = _json(
        run_cli("pools", "create", *admin_args, "--name", pool, "--space", space, "-o", "json")
    )
    j = ["-o", "json"]
    shown_pool = _json(run_cli("pools", "show", *admin_args, pool, *j))
    (listed_pool,) = _json(run_cli("pools", "list", *admin_args, "--space", space, *j))["pools"]
    paused_pool = _json(run_cli("pools", "pause", *admin_args, pool, *j))
    assert set(made_pool) == set(shown_pool) == set(listed_pool) == set(paused_pool)
    assert listed_pool["name"] == pool and paused_pool["paused"] is True

    made = _json(run_cli("tasks", "create", *admin_args, "--space", space, "--title", "t",
                         "--pool", pool, *j))  # fmt: skip
    got = _json(run_cli("tasks", "get", *admin_args, made["task"]["id"], *j))
    (listed,) = _json(run_cli("tasks", "list", *admin_args, "--space", space, *j))["tasks"]
    held = _json(run_cli("tasks", "pause", *admin_args, made["task"]["id"], *j))
    for record in (made, got, listed, held):
        assert set(record) == {"task", "lease"}, record
        assert set(record["task"]) == set(got["task"]), record
        assert set(record["lease"]) == set(got["lease"]), record
    assert held["task"]["effective_paused"] is True

    name = f"t-{suffix().lower()}"
    token = _json(run_cli("tokens", "create", *admin_args, "--name", name, "--kind", "operator",
                          *j))  # fmt: skip
    every = _json(run_cli("tokens", "list", *admin_args, "--all", *j))["tokens"]
    (listed_token,) = [t for t in every if t["id"] == token["id"]]
    assert set(token) - {"token"} == set(listed_token)
    assert token["last_used_at"] is None and token["revoked_at"] is None


def test_leases_get_in_table_form_shows_the_lease_itself(api: Api, admin_args: list[str]) -> None:
    space = f"C{suffix()}"
    _ok(run_cli("spaces", "create", *admin_args, "--key", space, "--name", "get"))
    pool = f"pool-{suffix().lower()}"
    _ok(run_cli("pools", "create", *admin_args, "--name", pool, "--space", space))
    created = _json(
        run_cli("tasks", "create", *admin_args, "--space", space, "--title", "shown",
                "--pool", pool, "-o", "json")
    )  # fmt: skip
    lease_id = created["lease"]["id"]

    shown = _ok(run_cli("leases", "get", *admin_args, lease_id))
    # A lease subject to a task carries `task: {id, key}`; the table must still be the lease's.
    assert re.search(rf"^id\s+{lease_id}$", shown, re.M), shown
    assert re.search(r"^state\s+pending$", shown, re.M), shown
    assert re.search(rf"^pool\s+{pool}$", shown, re.M), shown


def test_cli_errors_are_one_line_with_the_code_and_a_non_zero_exit(
    api: Api, admin_args: list[str]
) -> None:
    space = f"C{suffix()}"
    _ok(run_cli("spaces", "create", *admin_args, "--key", space, "--name", "first"))
    again = run_cli("spaces", "create", *admin_args, "--key", space, "--name", "second")
    assert again.returncode == 1
    assert space in _refused(again, "already_exists")

    missing = run_cli("leases", "get", *admin_args, "lease_does_not_exist")
    _refused(missing, "lease_not_found")

    bad = run_cli("spaces", "create", "--api", service_url(api.base), "--token", "nope",
                  "--key", f"C{suffix()}", "--name", "x")  # fmt: skip
    _refused(bad, "unauthenticated")

    pool = f"pool-{suffix().lower()}"
    _ok(run_cli("pools", "create", *admin_args, "--name", pool, "--space", space))
    worker = _json(
        run_cli("tokens", "create", *admin_args, "--name", f"w-{suffix()}", "--kind", "worker",
                "--pools", pool, "-o", "json")
    )["token"]  # fmt: skip
    forbidden = run_cli("leases", "list", "--api", service_url(api.base), "--token", worker,
                        "--space", space)  # fmt: skip
    _refused(forbidden, "forbidden")


def test_cli_usage_errors_are_clear_not_tracebacks(api: Api, tmp_path: Path) -> None:
    env = clean_env()  # no TENURE_API, no TENURE_TOKEN
    for args in (
        ["leases", "list", "--space", "OPS", "--token", api.admin_token],
        ["tasks", "create", "--space", "OPS", "--title", "t", "--token", api.admin_token],
        ["worker", "run", "--pool", "p", "--token", "t", "--once", "--", "true"],
    ):
        # In a directory no `tenure local` runs from: a developer's own stack in the checkout
        # would be the worker's address.
        done = run_cli(*args, env=env, cwd=tmp_path)
        assert done.returncode != 0, (args, done.stdout)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and "TENURE_API" in done.stderr, done.stderr

    # A record a killed `tenure local` left in the data dir: refused at once, by name, not
    # followed to its closed port and retried there for as long as the worker runs.
    ended = subprocess.Popen(["true"])
    ended.wait()
    (tmp_path / ".tenure").mkdir()
    (tmp_path / ".tenure" / "stack.json").write_text(
        json.dumps({"worker_api": api.base, "api": api.base, "pid": ended.pid})
    )
    done = run_cli(
        "worker", "run", "--pool", "p", "--token", "t", "--once", "--", "true",
        env=env, cwd=tmp_path, timeout=20,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and f"({ended.pid}) has ended" in done.stderr

    done = run_cli("leases", "list", "--space", "OPS", "--api", service_url(api.base), env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "TENURE_TOKEN" in done.stderr, done.stderr

    # No service at that address: one line, after the client's retries.
    done = run_cli(
        "leases", "get", "lease_x", "--api", f"http://127.0.0.1:{free_port()}", "--token", "t",
        env=env,
    )  # fmt: skip
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: unreachable: "), done.stderr

    # The in-job commands outside a job say what is missing.
    done = run_cli("worker", "complete", env=clean_env(TENURE_API=service_url(api.base)))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "TENURE_LEASE_ID" in done.stderr, done.stderr

    # A command with nothing to run.
    done = run_cli(
        "worker", "run", "--api", service_url(api.base), "--token", "t", "--pool", "p", env=env
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: "), done.stderr

    # Invalid JSON in an option is a usage error too.
    done = run_cli(
        "tasks", "create", "--api", service_url(api.base), "--token", api.admin_token,
        "--space", "OPS", "--title", "t", "--properties", "{nope", env=env,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "--properties" in done.stderr, done.stderr


def test_a_worker_claims_one_named_lease_with_the_cli_and_not_one_held(
    api: Api, admin_args: list[str]
) -> None:
    space = f"X{suffix()}"
    _ok(run_cli("spaces", "create", *admin_args, "--key", space, "--name", "exact"))
    pool = f"pool-{suffix().lower()}"
    _ok(run_cli("pools", "create", *admin_args, "--name", pool, "--space", space))
    worker = _json(
        run_cli(
            "tokens", "create", *admin_args, "--name", f"w-{suffix()}", "--kind", "worker",
            "--pools", pool, "-o", "json",
        )
    )  # fmt: skip
    made = []
    for n in range(2):
        args = ["--space", space, "--title", f"t{n}", "--pool", pool, "-o", "json"]
        made.append(_json(run_cli("tasks", "create", *admin_args, *args)))
    second = made[1]["lease"]["id"]
    me = ["--api", service_url(api.base), "--token", worker["token"]]
    won = _json(run_cli("worker", "claim", *me, "--pool", pool, "--lease", second, "-o", "json"))
    assert won["lease"]["id"] == second and won["fence"] == 1
    assert won["token"].startswith("tnr_l_")
    with api.admin() as admin:
        assert read_lease(admin, made[0]["lease"]["id"])["state"] == "pending"  # the head stayed
    again = run_cli("worker", "claim", *me, "--pool", pool, "--lease", second, "-o", "json")
    _refused(again, "invalid_transition")
