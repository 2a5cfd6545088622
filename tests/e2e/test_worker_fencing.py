"""Self-fencing: a worker that hears nothing back from the service
stops its job two heartbeats before the lease could expire, so the job never runs on after
its lease could have been handed to someone else. The test needs a stack it may stop."""

from __future__ import annotations

import shlex
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.e2e.support import World, descendants, reap, suffix, wait_for
from tests.e2e.worker_support import (
    Blackhole,
    Site,
    Workers,
    lease,
    pid_alive,
    read_lines,
    running_workers,
    wait_file_lines,
    wait_lease,
)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@dataclass
class OwnStack:
    """A stack of this test's own (it is stopped and started again), always stopped at the end."""

    data_dir: Path
    admin_token: str
    current: LocalStack | None = None
    children: dict[int, str] = field(default_factory=dict)

    def start(self) -> LocalStack:
        self.current = start_stack(self.data_dir, self.admin_token)
        self.children.update(descendants(self.current.proc.pid))
        return self.current


@pytest.fixture
def own_stack(local_stack: LocalStack, tmp_path: Path) -> Iterator[OwnStack]:
    # `local_stack` only vouches that the engines can start; this test stops its own stack.
    own = OwnStack(tmp_path / "data", "tnr_o_fence-" + uuid.uuid4().hex)
    try:
        yield own
    finally:
        if own.current is not None and own.current.proc.poll() is None:
            stop_stack(own.current)
        reap(own.children)  # engines a stopped stack may have left behind


# Toleration 6 s, not SHORT's 4: the fence falls at the last answered heartbeat + 4 s, so a
# heartbeat answered slowly on a loaded machine does not stop the job before the service does.
TIMING = {"renew_seconds": 1, "grace_seconds": 3, "toleration_seconds": 6}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_the_worker_stops_its_job_before_the_lease_could_expire_when_the_service_is_gone(
    own_stack: OwnStack, workers: Workers, tmp_path: Path
) -> None:
    stack = own_stack.start()
    admin = stack.admin()
    space = f"F{suffix()}"
    assert admin.post("/spaces", json={"key": space, "name": "fence"}).status_code == 201
    pool = f"pool-{suffix().lower()}"
    r = admin.post("/pools", json={"name": pool, "space": space, "kind": "command", **TIMING})
    assert r.status_code == 201, r.text
    r = admin.post("/tokens", json={"name": f"w-{suffix()}", "kind": "worker", "pools": [pool]})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    r = admin.post("/tasks", json={"space": space, "title": "fenced", "pool": pool})
    assert r.status_code == 201, r.text
    lease_id = r.json()["lease"]["id"]

    out = tmp_path / "job"
    out.mkdir()
    q = shlex.quote(str(out))
    script = f"echo $$ > {q}/pid; while :; do date +%s.%N >> {q}/ticks; sleep 0.1; done"
    run = workers.start(stack.base, token, pool, script)
    pid = int(wait_file_lines(out / "pid", 1, 15)[0])
    held = wait_lease(admin, lease_id, {"running"}, 15)
    assert held["timing"]["lease_seconds"] == 6 and held["timing"]["renew_seconds"] == 1
    wait_file_lines(out / "ticks", 5, 10)
    time.sleep(2.5)  # a few worker heartbeats answered
    before = wait_lease(admin, lease_id, {"running"}, 1)
    assert before["state"] == "running"
    assert pid_alive(pid)
    # The lease cannot expire before this deadline (a heartbeat answered after this read only
    # moves it later). The recorded last heartbeat is no bound: the service writes a heartbeat
    # only with a new deadline, once per DEADLINE_SLACK of the toleration (3 s here).
    deadline = _stamp(before["timing"]["deadline"])

    stopping = time.time()
    stop_stack(stack)
    stopped = time.time()

    wait_for(lambda: not pid_alive(pid), 15, "the job to be stopped by its own worker")
    time.sleep(0.5)
    ticks = read_lines(out / "ticks")
    last = float(ticks[-1])
    after_stop = last - stopping
    print(
        f"\nservice stop took {stopped - stopping:.2f}s; the job's last tick came "
        f"{after_stop:.2f}s after the stop began, {last - stopped:.2f}s after it ended"
    )
    # It ran on while the lease was still safely held...
    assert last > stopping, "the job stopped before the service went away"
    # ...and was stopped two heartbeats (2 x renew 1 s) before the 6 s toleration ran out,
    # counted from the last answered heartbeat (at most one renew before the stop).
    assert after_stop <= 5.5, f"the job ran {after_stop:.2f}s after the service went away"
    assert after_stop >= 2.8, f"the job was stopped only {after_stop:.2f}s after the service"

    log = run.stderr()
    assert "no word from the service: stopping the job" in log, log
    assert run.wait(30) == 0, run.stderr()
    assert "report not delivered" in run.stderr(), run.stderr()
    assert read_lines(out / "ticks") == ticks  # nothing ran after the worker gave up

    # The service, back, still shows the lease held by that worker (it could report nothing),
    # and the job's last tick came well before the lease could expire.
    back = own_stack.start()
    seen = wait_lease(back.admin(), lease_id, {"running", "lost"}, 5)
    assert seen["state"] == "running", seen
    margin = deadline - last
    print(f"the job stopped {margin:.2f}s before the lease's deadline")
    assert margin >= 0.5, (before["timing"], last)


def test_the_worker_stops_its_job_in_time_when_the_service_hangs_without_answering(
    world: World, workers: Workers, tmp_path: Path
) -> None:
    """A service that stops answering (connections accepted, nothing said) is no word from it
    either: the job must still be stopped two heartbeats before its lease could expire."""
    site = Site.make(world)
    _, lease_id, _ = site.task()
    relay = Blackhole(world.api.base)
    try:
        out = tmp_path / "job"
        out.mkdir()
        q = shlex.quote(str(out))
        script = f"echo $$ > {q}/pid; while :; do date +%s.%N >> {q}/ticks; sleep 0.1; done"
        run = workers.start(relay.base, site.token, site.pool, script)
        pid = int(wait_file_lines(out / "pid", 1, 15)[0])
        wait_lease(site.admin, lease_id, {"running"}, 15)
        time.sleep(2.5)  # a few worker heartbeats answered through the relay
        assert wait_lease(site.admin, lease_id, {"running"}, 1)["state"] == "running"

        silent_at = time.time()
        relay.silent.set()
        give_up = time.monotonic() + 8.0
        while pid_alive(pid) and time.monotonic() < give_up:
            time.sleep(0.1)
        still_running = pid_alive(pid)
        seen = lease(site.admin, lease_id)  # read past the relay, straight from the service
        r = site.admin.get(f"/tasks/{seen['task']['id']}")
        successor = (r.json().get("lease") or {}) if r.status_code == 200 else {}
        last = float(read_lines(out / "ticks")[-1])
        print(f"\nhung service: last tick {last - silent_at:.2f}s after it fell silent")
        assert not still_running, (
            f"the job still ran {time.time() - silent_at:.1f}s after the service fell silent "
            f"(toleration 4 s); its lease is now {seen['state']!r} and the task's open lease "
            f"is {successor.get('id')} ({successor.get('state')}, fence {successor.get('fence')})"
            f", free for another worker to claim. Worker log:\n{run.stderr()}"
        )
        assert last - silent_at <= 3.5, last - silent_at
        assert "no word from the service" in run.stderr(), run.stderr()
    finally:
        relay.close()
