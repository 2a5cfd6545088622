"""A worker restarted on the same `--state-dir` re-attaches to the jobs it left running (they
run in sessions of their own) and keeps their leases alive; a job that died meanwhile has its
lease failed with `worker_restarted`."""

from __future__ import annotations

import os
import shlex
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from tenure.domain.fencing import DEADLINE_SLACK

from tests.e2e.support import World, wait_for
from tests.e2e.worker_support import (
    Site,
    Workers,
    events,
    lease,
    pid_alive,
    read_lines,
    running_workers,
    tagged_pids,
    wait_event,
    wait_file_lines,
    wait_lease,
)

TOLERATION = 4.0
# The jobs' leases are claimed for 12 s, so a job survives the few seconds a restart takes:
# with the pool's 4 s its shim would fence it 2 s after the last answered heartbeat.
LONG_LEASE_S = 12
LONG_LEASE = ["--lease-seconds", str(LONG_LEASE_S)]
# A heartbeat rewrites the lease (its deadline and its recorded last heartbeat) only once the
# deadline is less than a lease ahead: DEADLINE_SLACK x 12 s (6 s) after the start.
RENEWED_AFTER_S = LONG_LEASE_S * DEADLINE_SLACK


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _job(out: Path, seconds: float) -> str:
    q = shlex.quote(str(out))
    return f"echo $$ > {q}/pid; sleep {seconds}; echo finished > {q}/done"


def test_a_restarted_worker_reattaches_keeps_the_lease_alive_and_reports_the_job(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task()
    out, state = tmp_path / "job", tmp_path / "state"
    out.mkdir()
    # It runs on well past the re-attached worker's first renewal, even on a loaded machine
    # where the restart takes seconds: a job that ended first would leave no renewal to see.
    job_s = RENEWED_AFTER_S + 8
    job = _job(out, job_s)
    first = workers.start(
        site.world.api.base, site.token, site.pool, job, state_dir=state, extra=LONG_LEASE
    )
    job_pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    held = wait_lease(site.admin, lease_id, {"running"})
    [saved] = wait_for(first.state_files, 5, "the worker's state file")
    assert saved["lease_id"] == lease_id and saved["fence"] == held["fence"]
    shim_pid = saved["pid"]
    time.sleep(1.0)  # a worker heartbeat or so

    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    killed_at = time.monotonic()
    beat_before = _stamp(lease(site.admin, lease_id)["timing"]["last_heartbeat_at"])
    assert pid_alive(job_pid), "the job died with its worker"
    assert pid_alive(shim_pid), "the job's shim died with its worker"
    # The shim's own session, not the worker's; the job in a process group of its own under
    # the shim, so that a pause (SIGSTOP to that group) never stops the shim.
    assert os.getsid(job_pid) == shim_pid and os.getpgid(job_pid) == job_pid
    time.sleep(1.0)
    assert pid_alive(job_pid)
    assert lease(site.admin, lease_id)["state"] == "running"

    second = workers.start(site.world.api.base, site.token, site.pool, job, state_dir=state)
    second.wait_for_log("re-attached", 10)
    assert f"lease={lease_id}" in second.stderr() and f"pid={shim_pid}" in second.stderr()
    # The re-attached worker heartbeats the lease: its last heartbeat moves past the restart
    # (recorded with the first renewal, RENEWED_AFTER_S after the start).
    wait_for(
        lambda: (
            _stamp(lease(site.admin, lease_id)["timing"]["last_heartbeat_at"]) > beat_before + 1.5
        ),
        RENEWED_AFTER_S + 6,
        "a heartbeat from the re-attached worker",
    )
    assert pid_alive(job_pid)
    assert second.wait(20) == 0, second.stderr()
    ended_at = time.monotonic()

    assert read_lines(out / "done") == ["finished"]
    assert not pid_alive(job_pid)
    ended = lease(site.admin, lease_id)
    assert ended["state"] == "completed" and ended["outcome"] == "success", ended
    assert ended["fence"] == held["fence"] and ended["worker_id"] == held["worker_id"], ended
    # More than toleration passed between the dead worker's last heartbeat and the report.
    span = _stamp(ended["timing"]["ended_at"]) - beat_before
    assert span > TOLERATION, f"only {span:.1f}s: too short to prove the lease was kept"
    assert ended_at - killed_at > 2.0
    done = wait_event(site.admin, task_id, "lease.completed")
    assert done["data"]["details"] == {"exit_status": 0}, done
    types = [ev["type"] for ev in events(site.admin, task_id)]
    assert "lease.lost" not in types and "lease.failed" not in types, types
    # Only one job ran: the second worker did not claim (it had the lease to finish).
    assert types.count("lease.claimed") == 1, types
    assert second.state_files() == []
    assert tagged_pids(workers.tag) == []


def test_a_restarted_worker_fails_the_lease_of_a_job_that_died_meanwhile(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task()
    out, state = tmp_path / "job", tmp_path / "state"
    out.mkdir()
    first = workers.start(
        site.world.api.base, site.token, site.pool, _job(out, 30), state_dir=state, extra=LONG_LEASE
    )
    job_pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    wait_lease(site.admin, lease_id, {"running"})
    [saved] = wait_for(first.state_files, 5, "the worker's state file")

    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    os.kill(saved["pid"], signal.SIGKILL)  # the shim
    os.killpg(job_pid, signal.SIGKILL)  # and the job's process group
    wait_for(lambda: not pid_alive(job_pid), 5, "the job to die")
    wait_for(lambda: not pid_alive(saved["pid"]), 5, "the job's shim to die")

    second = workers.start(
        site.world.api.base, site.token, site.pool, _job(out, 30), state_dir=state
    )
    assert second.wait(20) == 0, second.stderr()
    assert "job gone after a restart" in second.stderr(), second.stderr()
    ended = lease(site.admin, lease_id)
    assert ended["state"] == "failed" and ended["end_reason"] == "failed", ended
    failed = wait_event(site.admin, task_id, "lease.failed")
    assert failed["lease_id"] == lease_id
    assert failed["data"]["error"] == "worker_restarted", failed
    assert not (out / "done").exists()
    # --once: the lease it failed was its one lease; it claimed nothing else.
    types = [ev["type"] for ev in events(site.admin, task_id)]
    assert types.count("lease.claimed") == 1, types
    assert second.state_files() == []


def test_a_job_that_ended_while_its_worker_was_away_is_reported_on_restart(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task()
    out, state = tmp_path / "job", tmp_path / "state"
    out.mkdir()
    q = shlex.quote(str(out))
    script = f"echo $$ > {q}/pid; sleep 1.5; echo 'gave up: no input' >&2; exit 4"
    first = workers.start(
        site.world.api.base, site.token, site.pool, script, state_dir=state, extra=LONG_LEASE
    )
    job_pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    wait_lease(site.admin, lease_id, {"running"})
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    wait_for(lambda: not pid_alive(job_pid), 10, "the job to end on its own")
    assert lease(site.admin, lease_id)["state"] == "running"  # nobody reported it yet

    second = workers.start(site.world.api.base, site.token, site.pool, script, state_dir=state)
    assert second.wait(20) == 1, second.stderr()  # --once: its job failed
    assert "job ended while the worker was away" in second.stderr(), second.stderr()
    ended = lease(site.admin, lease_id)
    assert ended["state"] == "failed", ended
    failed = wait_event(site.admin, task_id, "lease.failed")
    assert failed["data"]["error"] == "exit status 4: gave up: no input", failed
    assert "gave up: no input" in failed["data"]["metadata"]["stderr_tail"], failed
    assert second.state_files() == []


def test_a_job_resumed_while_its_worker_was_away_runs_on_after_the_reattach(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    """Paused (SIGSTOP) under the first worker, resumed by the operator while no worker was
    there: the re-attached worker must continue the job (SIGCONT), not leave it stopped."""
    _, lease_id, _ = site.task()
    out, state = tmp_path / "job", tmp_path / "state"
    out.mkdir()
    q = shlex.quote(str(out))
    script = f"echo $$ > {q}/pid; while :; do echo x >> {q}/count; sleep 0.2; done"
    first = workers.start(
        site.world.api.base, site.token, site.pool, script, state_dir=state, extra=LONG_LEASE
    )
    job_pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    wait_lease(site.admin, lease_id, {"running"})
    operator = site.operator()
    r = operator.post(f"/leases/{lease_id}/pause")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "paused", r.text
    wait_for(lambda: _stopped(job_pid), 5, "the job to be stopped (SIGSTOP)")

    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    r = operator.post(f"/leases/{lease_id}/resume")
    assert r.status_code == 200 and r.json()["lease"]["state"] == "running", r.text
    frozen = len(read_lines(out / "count"))

    second = workers.start(site.world.api.base, site.token, site.pool, script, state_dir=state)
    second.wait_for_log("re-attached", 10)
    give_up = time.monotonic() + 5.0
    while len(read_lines(out / "count")) < frozen + 3 and time.monotonic() < give_up:
        time.sleep(0.2)
    grew = len(read_lines(out / "count")) - frozen
    assert grew >= 3, (
        f"the job, resumed while its worker was away, is still stopped 5 s after the "
        f"re-attach (state {'T' if _stopped(job_pid) else '?'}; lease "
        f"{lease(site.admin, lease_id)['state']}). Worker log:\n{second.stderr()}"
    )
    assert lease(site.admin, lease_id)["state"] == "running"


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def test_a_job_whose_worker_never_returns_stops_itself_before_its_lease_can_expire(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    """The shim holds the fence: with no worker left to stop it, the job still stops two
    heartbeats before its lease could expire, so the requeued job never runs twice."""
    task_id, lease_id, _ = site.task()
    out = tmp_path / "job"
    out.mkdir()
    ticks = out / "ticks"
    q = shlex.quote(str(out))
    script = f"echo $$ > {q}/pid; while true; do date +%s.%N >> {ticks}; sleep 0.1; done"
    first = workers.start(site.world.api.base, site.token, site.pool, script)
    job_pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    wait_lease(site.admin, lease_id, {"running"})
    time.sleep(1.5)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    # Nobody heartbeats it now: the lease cannot expire before this deadline, at least a
    # toleration after its last heartbeat. (The recorded last heartbeat is no bound: the
    # service writes a heartbeat only with a new deadline, once per DEADLINE_SLACK of the
    # toleration, so it may lag the last answered one by up to 2 s here.)
    deadline = _stamp(lease(site.admin, lease_id)["timing"]["deadline"])

    wait_for(lambda: not pid_alive(job_pid), 10, "the orphaned job to stop itself")
    last_tick = float(read_lines(ticks)[-1])
    # Fenced two heartbeats (2 s) after its last answered heartbeat, before the deadline.
    assert last_tick < deadline, (last_tick - deadline, "the job outlived its lease")
    # The session stack sweeps every 2 s; on a busy machine a pass that comes later than
    # the pool's grace counts as the sweeper's own absence and pushes deadlines out instead
    # of expiring them, so the expiry may take several tolerations.
    lost = wait_lease(site.admin, lease_id, {"lost"}, timeout=60)
    assert lost["end_reason"] == "expired"
    assert wait_event(site.admin, task_id, "lease.lost")["lease_id"] == lease_id
