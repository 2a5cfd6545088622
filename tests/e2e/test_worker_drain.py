"""`tenure worker run` stopped by a signal drains: it claims no more, lets running jobs finish
for up to --drain-seconds, then stops those still running and releases their leases (back to
the queue, no attempt used); a second signal stops it at once, its jobs left running."""

from __future__ import annotations

import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import World, wait_for
from tests.e2e.worker_support import (
    Site,
    Workers,
    lease,
    pid_alive,
    running_workers,
    wait_file_lines,
    wait_lease,
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


def _current_lease(site: Site, task_id: str) -> dict[str, object]:
    r = site.admin.get(f"/tasks/{task_id}")
    assert r.status_code == 200, r.text
    found: dict[str, object] = r.json()["lease"] or {}
    return found


def test_a_job_that_finishes_during_the_drain_completes_and_nothing_more_is_claimed(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    _, lease_id, _ = site.task("short job")
    started = tmp_path / "started"
    script = f"echo go > {shlex.quote(str(started))}; sleep 2; echo done"
    run = workers.start(
        site.world.api.base,
        site.token,
        site.pool,
        script,
        once=False,
        extra=["--drain-seconds", "20"],
    )
    wait_file_lines(started, 1, 30)
    _, waiting, _ = site.task("queued behind it")  # must stay queued: a draining worker claims none
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.stderr()
    assert wait_lease(site.admin, lease_id, {"completed"}, timeout=5)["state"] == "completed"
    assert lease(site.admin, waiting)["state"] == "pending", run.stderr()
    err = run.stderr()
    assert "stopping: claiming no more" in err and "stopped: nothing left running" in err, err
    assert "drain time is up" not in err, err


def test_a_job_still_running_when_the_drain_ends_is_stopped_and_its_lease_released(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task("long job")
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {shlex.quote(str(pid_file))}; sleep 300"
    run = workers.start(
        site.world.api.base,
        site.token,
        site.pool,
        script,
        once=False,
        kill_grace=2,
        extra=["--drain-seconds", "1"],
    )
    job_pid = int(wait_file_lines(pid_file, 1, 30)[0])
    held = wait_lease(site.admin, lease_id, {"running"})
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.stderr()
    assert not pid_alive(job_pid), "the drained job was stopped before its lease was released"
    ended = lease(site.admin, lease_id)
    assert (ended["state"], ended["end_reason"]) == ("cancelled", "released"), ended
    # Back in the queue at once, under a new lease, with no attempt used.
    again = wait_for(lambda: _current_lease(site, task_id), 10, "the task's next lease")
    assert again["id"] != lease_id and again["state"] == "pending", again
    assert again["attempt"] == held["attempt"], (again, held)
    err = run.stderr()
    assert "drain time is up: stopping the job to release its lease" in err, err
    assert "report=release state=cancelled" in err, err


def test_a_second_signal_stops_at_once_and_leaves_the_job_running(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    _, lease_id, _ = site.task("long job")
    pid_file = tmp_path / "pid"
    script = f"echo $$ > {shlex.quote(str(pid_file))}; sleep 300"
    run = workers.start(
        site.world.api.base,
        site.token,
        site.pool,
        script,
        once=False,
        extra=["--drain-seconds", "60"],
    )
    job_pid = int(wait_file_lines(pid_file, 1, 30)[0])
    wait_lease(site.admin, lease_id, {"running"})
    run.proc.send_signal(signal.SIGTERM)
    run.wait_for_log("stopping: claiming no more", 10)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(15) == 0, run.stderr()
    assert "stopping now; running jobs keep their sessions" in run.stderr(), run.stderr()
    assert pid_alive(job_pid), "a second signal leaves the job in its own session"
    assert lease(site.admin, lease_id)["state"] == "running"
