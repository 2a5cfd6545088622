"""Operator revokes reach a running job through the worker's heartbeat: cancel → SIGTERM (then
SIGKILL after `--kill-grace`), kill, pause → SIGSTOP, resume → SIGCONT."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import SHORT_LOST_BY, World, wait_for
from tests.e2e.worker_support import (
    Site,
    Workers,
    pid_alive,
    read_lines,
    running_workers,
    tagged_pids,
    wait_event,
    wait_file_lines,
    wait_lease,
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


# A revoke reaches the job on the worker's next heartbeat (renew 1 s): its toleration plays no
# part. With SHORT's 4 s the worker stops its own job after 2 s without an answer, which a
# machine starved of CPU can bring about before the revoke arrives; a long toleration leaves
# the revoke the only way the job ends.
PATIENT = 30


@pytest.fixture
def patient(world: World) -> Site:
    return Site.make(world, toleration_seconds=PATIENT)


def _ticking(out: Path, trap: str = "") -> str:
    """A job that writes its pid, then a wall-clock timestamp every 0.1 s, forever."""
    q = shlex.quote(str(out))
    return f"{trap} echo $$ > {q}/pid; while :; do date +%s.%N >> {q}/ticks; sleep 0.1; done"


def _pid(out: Path) -> int:
    return int(wait_file_lines(out / "pid", 1, 10)[0])


def _still(path: Path, quiet: float) -> list[str]:
    """Wait until `path` stops growing for `quiet` seconds; return its lines."""
    before = read_lines(path)
    while True:
        time.sleep(quiet)
        now = read_lines(path)
        if now == before:
            return now
        before = now


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_cancel_sends_sigterm_to_the_job_and_the_lease_ends_cancelled(
    patient: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = patient.task()
    q = shlex.quote(str(tmp_path))
    trap = f"trap 'echo term >> {q}/term; exit 7' TERM;"
    run = workers.start(
        patient.world.api.base, patient.token, patient.pool, _ticking(tmp_path, trap)
    )
    pid = _pid(tmp_path)
    wait_lease(patient.admin, lease_id, {"running"})
    wait_file_lines(tmp_path / "ticks", 3, 10)

    asked = time.time()
    r = patient.operator().post(f"/leases/{lease_id}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "cancelling"

    wait_file_lines(tmp_path / "term", 1, 10)  # the job's own TERM trap ran
    assert run.wait(15) == 0, run.stderr()
    ended = wait_lease(patient.admin, lease_id, {"cancelled", "killed", "failed", "lost"}, 5)
    assert ended["state"] == "cancelled" and ended["end_reason"] == "cancelled", ended
    assert not pid_alive(pid)
    ticks = _still(tmp_path / "ticks", 0.5)
    # One heartbeat (renew 1 s) carries the revoke; the job stops soon after.
    assert float(ticks[-1]) - asked < 3.0, (ticks[-1], asked)
    assert read_lines(tmp_path / "term") == ["term"]
    assert "revoked" in run.stderr() and "revoke=cancel" in run.stderr(), run.stderr()

    cancelled = wait_event(patient.admin, task_id, "lease.cancelled")
    assert cancelled["data"]["error"] == "revoked: cancel", cancelled
    assert cancelled["data"]["metadata"]["exit_status"] == 7, cancelled
    wait_event(patient.admin, task_id, "lease.cancelling")
    assert tagged_pids(workers.tag) == []


def test_a_job_ignoring_sigterm_is_killed_after_the_kill_grace_and_still_ends_cancelled(
    patient: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = patient.task()
    run = workers.start(
        patient.world.api.base,
        patient.token,
        patient.pool,
        _ticking(tmp_path, "trap '' TERM;"),
        kill_grace=1,
    )
    pid = _pid(tmp_path)
    wait_lease(patient.admin, lease_id, {"running"})
    wait_file_lines(tmp_path / "ticks", 3, 10)

    asked = time.time()
    r = patient.operator().post(f"/leases/{lease_id}/cancel")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "cancelling", r.text
    assert run.wait(15) == 0, run.stderr()
    ended = wait_lease(patient.admin, lease_id, {"cancelled", "killed", "failed", "lost"}, 5)
    assert ended["state"] == "cancelled" and ended["end_reason"] == "cancelled", ended

    assert not pid_alive(pid)
    ticks = _still(tmp_path / "ticks", 0.5)
    ran_on = float(ticks[-1]) - asked
    # It outlived SIGTERM by the kill grace (1 s), and no longer: SIGKILL came.
    assert 0.8 <= ran_on < 4.0, ran_on
    log = run.stderr()
    assert "job ignored SIGTERM: killing it" in log, log
    cancelled = wait_event(patient.admin, task_id, "lease.cancelled")
    assert cancelled["data"]["error"] == "revoked: cancel", cancelled
    assert cancelled["data"]["metadata"]["exit_status"] == -9, cancelled
    assert tagged_pids(workers.tag) == []


def test_kill_stops_the_job_and_the_lease_ends_killed(
    patient: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = patient.task()
    run = workers.start(patient.world.api.base, patient.token, patient.pool, _ticking(tmp_path))
    pid = _pid(tmp_path)
    wait_lease(patient.admin, lease_id, {"running"})
    wait_file_lines(tmp_path / "ticks", 3, 10)

    r = patient.operator().post(f"/leases/{lease_id}/kill")
    assert r.status_code == 200, r.text
    assert r.json()["lease"]["state"] == "cancelling" and r.json()["lease"]["revoke"] == "kill"
    assert run.wait(15) == 0, run.stderr()
    ended = wait_lease(patient.admin, lease_id, {"cancelled", "killed", "failed", "lost"}, 5)
    assert ended["state"] == "killed" and ended["end_reason"] == "killed", ended
    assert not pid_alive(pid)
    _still(tmp_path / "ticks", 0.5)
    assert "revoke=kill" in run.stderr(), run.stderr()
    killed = wait_event(patient.admin, task_id, "lease.killed")
    assert killed["data"]["error"] == "revoked: kill", killed
    wait_event(patient.admin, task_id, "lease.killing")


def test_pause_stops_the_job_and_resume_continues_it(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task()
    q = shlex.quote(str(tmp_path))
    script = (
        f"echo $$ > {q}/pid; i=0; while :; do i=$((i+1)); echo $i >> {q}/count; sleep 0.2; done"
    )
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    pid = _pid(tmp_path)
    wait_lease(site.admin, lease_id, {"running"})
    wait_file_lines(tmp_path / "count", 3, 10)
    operator = site.operator()

    r = operator.post(f"/leases/{lease_id}/pause")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "paused", r.text
    wait_for(lambda: _proc_state(pid) == "T", 5, "the job to be stopped (SIGSTOP)")
    frozen = read_lines(tmp_path / "count")
    time.sleep(1.5)
    assert read_lines(tmp_path / "count") == frozen, "the paused job kept counting"
    assert pid_alive(pid) and _proc_state(pid) == "T"
    # Paused is still held: the worker keeps the lease alive past the latest a silent lease
    # would be lost (SHORT_LOST_BY, 7 s), not only past its 4 s toleration.
    time.sleep(SHORT_LOST_BY)
    assert read_lines(tmp_path / "count") == frozen
    assert wait_lease(site.admin, lease_id, {"paused"}, 1)["state"] == "paused"
    assert "paused" in run.stderr(), run.stderr()

    r = operator.post(f"/leases/{lease_id}/resume")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "running", r.text
    wait_for(
        lambda: len(read_lines(tmp_path / "count")) >= len(frozen) + 3,
        5,
        "the resumed job to count again (SIGCONT)",
    )
    assert _proc_state(pid) != "T"
    assert "resumed" in run.stderr(), run.stderr()

    # Cancel to end it; a job stopped and continued ends like any other.
    r = operator.post(f"/leases/{lease_id}/cancel")
    assert r.status_code == 200, r.text
    assert run.wait(15) == 0, run.stderr()
    ended = wait_lease(site.admin, lease_id, {"cancelled", "killed", "failed", "lost"}, 5)
    assert ended["state"] == "cancelled", ended
    wait_event(site.admin, task_id, "lease.resumed")
    wait_event(site.admin, task_id, "lease.paused")
