"""The worker SDK and the CLI of a lease's detail against `tenure local`: a job's output reaches its
lease's logs (the tail too, after an exit or a kill), `tenure worker attach` from inside a job,
and `tenure leases logs|attachments|download|exec-target` for the operator."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.e2e.support import World, wait_for
from tests.e2e.worker_support import (
    Site,
    Workers,
    clean_env,
    run_cli,
    running_workers,
    service_url,
    wait_lease,
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


def _messages(client: httpx.Client, lease_id: str) -> list[tuple[str, str]]:
    r = client.get(f"/leases/{lease_id}/logs")
    assert r.status_code == 200, r.text
    return [(e["stream"], e["message"]) for e in r.json()["events"]]


def _operator_cli(site: Site, *args: str) -> str:
    token = site.world.operator_token("read", [site.world.space])
    env = clean_env(TENURE_API=service_url(site.world.api.base), TENURE_TOKEN=token)
    done = run_cli(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_jobs_output_and_files_reach_its_lease(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    _, lease_id, _ = site.task("produce things")
    small = tmp_path / "summary.txt"
    small.write_text("all good\n")
    big = tmp_path / "trace.bin"
    big.write_bytes(bytes(range(256)) * 5000)  # 1.2 MiB: goes by presigned PUT
    script = (
        "echo out-1; echo err-1 >&2; "
        f"tenure worker attach {shlex.quote(str(small))} --kind report; "
        f"tenure worker attach {shlex.quote(str(big))}; "
        "printf 'last words without a newline'"
    )
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(60) == 0, run.stderr()
    wait_lease(site.admin, lease_id, {"completed"}, timeout=30)
    got = _messages(site.admin, lease_id)
    assert ("stdout", "out-1") in got and ("stderr", "err-1") in got
    assert ("stdout", "last words without a newline") in got
    listed = json.loads(_operator_cli(site, "leases", "attachments", lease_id, "-o", "json"))
    by_name = {a["filename"]: a for a in listed["attachments"]}
    assert set(by_name) == {"summary.txt", "trace.bin"}
    assert by_name["summary.txt"]["kind"] == "report"
    assert by_name["trace.bin"]["byte_size"] == big.stat().st_size
    for name, source in (("summary.txt", small), ("trace.bin", big)):
        target = tmp_path / f"fetched-{name}"
        _operator_cli(
            site, "leases", "download", lease_id, by_name[name]["id"], "--to", str(target)
        )
        assert target.read_bytes() == source.read_bytes()
    printed = _operator_cli(site, "leases", "logs", lease_id)
    assert "out-1" in printed and "err-1" in printed
    assert '"host"' in _operator_cli(site, "leases", "exec-target", lease_id, "-o", "json")


def test_a_killed_job_still_ships_what_it_printed(site: Site, workers: Workers) -> None:
    _, lease_id, _ = site.task("long job")
    script = "echo before-the-kill; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
    run = workers.start(site.world.api.base, site.token, site.pool, script, kill_grace=1)
    wait_for(
        lambda: ("stdout", "before-the-kill") in _messages(site.admin, lease_id),
        30,
        "the job's first line in its lease's logs (shipped on the renew beat)",
    )
    r = site.operator().post(f"/leases/{lease_id}/kill")
    assert r.status_code == 200, r.text
    wait_lease(site.admin, lease_id, {"killed"}, timeout=60)
    assert run.wait(60) == 0
    assert ("stdout", "before-the-kill") in _messages(site.admin, lease_id)


def test_follow_prints_lines_as_they_come_and_ends_with_the_lease(
    site: Site, workers: Workers
) -> None:
    _, lease_id, _ = site.task("chatty job")
    script = "for i in 1 2 3; do echo tick-$i; sleep 1; done"
    workers.start(site.world.api.base, site.token, site.pool, script)
    wait_lease(site.admin, lease_id, {"running", "completed"}, timeout=30)
    printed = _operator_cli(site, "leases", "logs", lease_id, "--follow")
    assert [x for x in ("tick-1", "tick-2", "tick-3") if x in printed] == [
        "tick-1",
        "tick-2",
        "tick-3",
    ]
    assert printed.count("tick-1") == 1


def test_each_line_is_stamped_when_the_job_printed_it_not_on_the_renew_beat(
    site: Site, workers: Workers
) -> None:
    # A renew period far longer than the gaps between the lines: stamped on the beat, all
    # three would carry the same time.
    pool = site.world.pool(renew_seconds=8, grace_seconds=8, toleration_seconds=24)["name"]
    token = site.world.worker_token([pool])
    lease_id = site.world.task(pool=pool, title="slow printer")["lease"]["id"]
    script = "echo step-1; sleep 1; echo step-2; sleep 1; echo step-3"
    run = workers.start(site.world.api.base, token, pool, script)
    assert run.wait(60) == 0, run.stderr()
    wait_lease(site.admin, lease_id, {"completed"}, timeout=30)
    r = site.admin.get(f"/leases/{lease_id}/logs")
    assert r.status_code == 200, r.text
    at = {e["message"]: datetime.fromisoformat(e["timestamp"]) for e in r.json()["events"]}
    gaps = [(at[f"step-{n + 1}"] - at[f"step-{n}"]).total_seconds() for n in (1, 2)]
    assert all(0.6 <= gap <= 1.8 for gap in gaps), (gaps, r.json()["events"])
