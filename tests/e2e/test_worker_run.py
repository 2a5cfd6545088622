"""`tenure worker run --once`: a job's exit status becomes its lease's report; a job may also
report for itself with `tenure worker complete|fail|heartbeat|payload`."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import World, sha256_hex
from tests.e2e.worker_support import (
    Site,
    Workers,
    events,
    lease,
    running_workers,
    service_url,
    wait_event,
    wait_lease,
)

TERMINAL = {"completed", "failed", "cancelled", "lost", "killed"}
ENDINGS = {"lease.completed", "lease.failed", "lease.cancelled", "lease.killed", "lease.lost"}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


def _env_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    return env


def test_a_job_exiting_0_completes_its_lease_and_sees_only_its_lease_token(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task("tidy the attic")
    out = tmp_path / "job"
    out.mkdir()
    q = shlex.quote(str(out))
    script = (
        f'env > {q}/env.txt; cp "$TENURE_PAYLOAD_FILE" {q}/payload.json; '
        f'test -s "$TENURE_PAYLOAD_FILE" && echo present > {q}/payload-present; '
        f"echo $$ > {q}/pid; echo working"
    )
    # The worker's token also sits in its environment: the job must not inherit it.
    run = workers.start(site.world.api.base, site.token, site.pool, script, token_in_env=True)
    assert run.wait(30) == 0, run.stderr()

    ended = wait_lease(site.admin, lease_id, TERMINAL, timeout=5)
    assert ended["state"] == "completed", ended
    assert ended["end_reason"] == "completed" and ended["outcome"] == "success"
    assert ended["worker_id"] and ended["worker_version"]
    assert ended["fence"] == 1 and ended["attempt"] == 1
    assert ended["timing"]["started_at"] is not None and ended["timing"]["ended_at"] is not None

    env = _env_file(out / "env.txt")
    assert env["TENURE_API"] == service_url(site.world.api.base)
    assert env["TENURE_LEASE_ID"] == lease_id
    lease_token = env["TENURE_LEASE_TOKEN"]
    assert lease_token.startswith("tnr_l_") and lease_token != site.token
    # It is the very token the claim minted: the lease shows its hash's first 8 characters.
    assert ended["claim_token_hash_truncated"] == sha256_hex(lease_token)[:8]
    assert (out / "payload-present").exists()
    assert "TENURE_TOKEN" not in env
    leaked = [k for k, v in env.items() if site.token in v]
    assert leaked == [], f"the worker's own token reached the job via {leaked}"

    payload = json.loads((out / "payload.json").read_text())
    assert payload["lease"]["id"] == lease_id
    assert payload["kind"] == "command"
    subject = payload["subject"]
    assert subject["kind"] == "task" and subject["title"] == "tidy the attic"
    assert {"key", "body", "properties", "dependencies", "prior_attempts", "activity"} <= set(
        subject
    )

    done = wait_event(site.admin, task_id, "lease.completed")
    assert done["lease_id"] == lease_id
    assert done["data"]["details"] == {"exit_status": 0}
    # The worker forgets a lease once it is reported: no state is left for a re-attach.
    assert run.state_files() == []
    r = site.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200 and r.json()["lease"] is None, r.text
    assert r.json()["task"]["status"] == "completed", r.text


def test_a_job_exiting_3_fails_its_lease_with_the_status_and_its_stderr_tail(
    site: Site, workers: Workers
) -> None:
    task_id, lease_id, _ = site.task()
    script = "echo 'about to go wrong' ; echo 'boom: the disk is on fire' >&2; exit 3"
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(30) == 1, run.stderr()  # --once: its job failed

    ended = wait_lease(site.admin, lease_id, TERMINAL, timeout=5)
    assert ended["state"] == "failed" and ended["end_reason"] == "failed", ended
    # The lease itself says why (what `tenure leases get` shows), not only its timeline.
    assert ended["error"] == "exit status 3: boom: the disk is on fire", ended
    failed = wait_event(site.admin, task_id, "lease.failed")
    assert failed["lease_id"] == lease_id
    data = failed["data"]
    assert data["error"] == "exit status 3: boom: the disk is on fire", data
    assert data["metadata"]["exit_status"] == 3, data
    assert "boom: the disk is on fire" in data["metadata"]["stderr_tail"], data
    assert "about to go wrong" not in data["metadata"]["stderr_tail"], "stdout is not stderr"
    assert "report=fail state=failed exit_status=3" in run.stderr(), run.stderr()
    r = site.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200 and r.json()["lease"] is None, r.text


def test_a_job_that_reports_itself_is_not_reported_again_by_the_worker(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, title = site.task("report from inside")
    out = tmp_path / "job"
    out.mkdir()
    q = shlex.quote(str(out))
    script = (
        f"tenure worker payload > {q}/payload.out && "
        f"tenure worker heartbeat > {q}/beat.json && "
        "tenure worker complete --outcome success --details '{\"k\":1}' "
        f"> {q}/complete.json; echo $? > {q}/rc; sleep 0.5"
    )
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(30) == 0, run.stderr()

    assert (out / "rc").read_text().strip() == "0", run.stderr()
    payload = json.loads((out / "payload.out").read_text())
    assert payload["lease"]["id"] == lease_id and payload["subject"]["title"] == title
    beat = json.loads((out / "beat.json").read_text())
    assert beat["state"] == "running" and beat["revoke"] is None, beat
    assert beat["deadline"]
    answer = json.loads((out / "complete.json").read_text())
    assert answer["state"] == "completed", answer  # `worker complete` prints the lease itself

    ended = lease(site.admin, lease_id)
    assert ended["state"] == "completed" and ended["outcome"] == "success", ended
    log = run.stderr()
    assert "job reported itself" in log, log
    assert "report refused" not in log, log
    assert "[tenure worker] reported " not in log, log

    done = wait_event(site.admin, task_id, "lease.completed")
    assert done["data"]["details"] == {"k": 1}, done
    timeline = events(site.admin, task_id)
    endings = [ev["type"] for ev in timeline if ev["type"] in ENDINGS]
    assert endings == ["lease.completed"], timeline
    assert "lease.stale_report" not in [ev["type"] for ev in timeline], timeline


def test_a_job_that_reports_failure_and_exits_0_stays_failed(site: Site, workers: Workers) -> None:
    task_id, lease_id, _ = site.task()
    script = 'tenure worker complete --outcome failure --details \'{"why":"bad input"}\''
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(30) == 0, run.stderr()

    ended = lease(site.admin, lease_id)
    assert ended["state"] == "failed" and ended["outcome"] == "failure", ended
    failed = wait_event(site.admin, task_id, "lease.failed")
    assert failed["data"]["details"] == {"why": "bad input"}, failed
    assert "job reported itself" in run.stderr(), run.stderr()
    assert "report refused" not in run.stderr(), run.stderr()


def test_once_runs_a_single_lease_and_leaves_the_rest_queued(site: Site, workers: Workers) -> None:
    leases = {site.task()[1], site.task()[1]}
    run = workers.start(site.world.api.base, site.token, site.pool, "exit 0")
    assert run.wait(30) == 0, run.stderr()
    states = sorted(lease(site.admin, lease_id)["state"] for lease_id in leases)
    assert states == ["completed", "pending"], states
    assert run.stderr().count("lease claimed") == 1, run.stderr()


def test_worker_up_is_said_after_the_service_answered_and_names_where(
    site: Site, workers: Workers
) -> None:
    # A pool the token may not claim from (a typo): refused, and never said to be up.
    typo = workers.start(site.world.api.base, site.token, f"{site.pool}x", "true")
    assert typo.wait(30) == 1, typo.stderr()
    assert "forbidden" in typo.stderr() and "worker up" not in typo.stderr(), typo.stderr()

    _, lease_id, _ = site.task()
    run = workers.start(site.world.api.base, site.token, site.pool, "true")
    assert run.wait(30) == 0, run.stderr()
    up = [line for line in run.stderr().splitlines() if "worker up" in line]
    assert len(up) == 1 and f"api={site.world.api.base}" in up[0], run.stderr()
    assert f"pool={site.pool}" in up[0], up
    assert lease(site.admin, lease_id)["state"] == "completed"
