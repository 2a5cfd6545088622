"""The job's shim, run as the worker runs it: whatever stops the job (the worker's stop, its
own fence, the job's own exit), nothing the job started is left once the grace is up; no
failed write keeps it from stopping the job; and a paused job's shim still fences it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tenure_worker import jobs, runner
from tenure_worker.client import Claim

from tests.unit.test_worker_client import FakeTransport, worker

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

GRACE = "0.5"
# A job with helpers of every kind: one in its process group that ignores SIGTERM, one that
# left the group with setsid, one orphaned by a double fork; each writes its pid to `pids`.
# The one that ignores SIGTERM writes its own, once its trap is set: under load a stop could
# otherwise reach it before the trap and end it, and the test would prove nothing.
STUBBORN = (
    "sh -c 'trap \"\" TERM; echo $$ >> pids; exec sleep 30' & "
    "setsid sleep 31 & echo $! >> pids; "
    "sh -c 'sleep 32 & echo $! >> pids' & "
    "echo $$ >> pids; "
    "while [ $(wc -l < pids) -lt 4 ]; do sleep 0.05; done; "
)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait(what: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not what():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Run:
    def __init__(self, tmp_path: Path, script: str, stderr: object = None) -> None:
        self.dir = tmp_path
        self.exit_file = tmp_path / "job.exit"
        self.fence_file = tmp_path / "job.fence"
        self.pids_file = tmp_path / "pids"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tenure_worker.shim",
                str(self.exit_file),
                str(self.fence_file),
                GRACE,
                GRACE,
                "--",
                "sh",
                "-c",
                script,
            ],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=stderr,  # type: ignore[arg-type]
            start_new_session=True,
        )

    def pids(self, count: int) -> list[int]:
        def enough() -> bool:
            return self.pids_file.exists() and len(self.pids_file.read_text().split()) >= count

        _wait(enough, 5)
        return [int(p) for p in self.pids_file.read_text().split()]

    def fence_now(self) -> None:
        self.fence_file.write_text(f"{time.time() - 1:.3f}")

    def held(self) -> jobs.Held:
        return jobs.Held(
            lease_id="L1",
            fence=1,
            token="tnr_l_x",
            renew_seconds=1.0,
            lease_seconds=10.0,
            pid=self.proc.pid,
            started=jobs.start_time(self.proc.pid),
            exit_file=str(self.exit_file),
            err_file="",
            payload_file="",
            marker_file="",
            relays=True,
        )


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[list[Run]]:
    started: list[Run] = []
    yield started
    for run in started:  # whatever a failed test left
        pids = run.pids_file.read_text().split() if run.pids_file.exists() else []
        for pid in [run.proc.pid, *map(int, pids)]:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        run.proc.wait(5)


def _start(runs: list[Run], tmp_path: Path, script: str, stderr: object = None) -> Run:
    run = Run(tmp_path, script, stderr)
    runs.append(run)
    return run


def test_a_stopped_job_leaves_nothing_behind_after_the_grace(
    tmp_path: Path, runs: list[Run]
) -> None:
    run = _start(runs, tmp_path, STUBBORN + "sleep 30")
    pids = run.pids(4)
    assert os.getpgid(pids[-1]) != os.getpgid(run.proc.pid)  # the shim is not in its group
    started = time.monotonic()
    jobs.signal_job(run.held(), signal.SIGTERM)
    assert run.proc.wait(5) == 128 + signal.SIGTERM  # the job itself took SIGTERM
    assert time.monotonic() - started < 0.5 + 1.0 + 1.5  # the grace, the backstop, slack
    assert [pid for pid in pids if not _gone(pid)] == []
    assert run.exit_file.read_text() == str(-signal.SIGTERM)


def test_the_worker_kills_a_stopped_job_when_its_grace_is_up(
    tmp_path: Path, runs: list[Run]
) -> None:
    run = _start(runs, tmp_path, "trap '' TERM; " + STUBBORN + "sleep 30; sleep 30")
    pids = run.pids(4)
    jobs.signal_job(run.held(), signal.SIGTERM)
    time.sleep(0.3)
    assert run.proc.poll() is None and not _gone(pids[-1])  # SIGTERM ignored, still in grace
    jobs.signal_job(run.held(), signal.SIGKILL)
    assert run.proc.wait(3) == 128 + signal.SIGKILL
    assert [pid for pid in pids if not _gone(pid)] == []


def test_the_fence_stops_the_job_and_every_helper(tmp_path: Path, runs: list[Run]) -> None:
    run = _start(runs, tmp_path, STUBBORN + "sleep 30")
    pids = run.pids(4)
    run.fence_now()
    run.proc.wait(4)
    assert [pid for pid in pids if not _gone(pid)] == []


def test_a_job_that_exits_on_its_own_leaves_nothing_behind(tmp_path: Path, runs: list[Run]) -> None:
    run = _start(runs, tmp_path, STUBBORN + "exit 3")
    pids = run.pids(4)
    assert run.proc.wait(4) == 3
    assert run.exit_file.read_text() == "3"
    assert [pid for pid in pids if not _gone(pid)] == []


def test_the_fence_stops_the_job_even_when_stderr_cannot_be_written(
    tmp_path: Path, runs: list[Run]
) -> None:
    with open("/dev/full", "w") as full:
        run = _start(runs, tmp_path, "echo $$ >> pids; sleep 30", stderr=full)
    [pid] = run.pids(1)
    run.fence_now()
    run.proc.wait(4)
    assert _gone(pid)
    assert run.exit_file.read_text() == str(-signal.SIGTERM)


def test_a_paused_job_is_still_fenced_by_its_shim(tmp_path: Path, runs: list[Run]) -> None:
    run = _start(runs, tmp_path, "echo $$ >> pids; while :; do sleep 0.1; done")
    [pid] = run.pids(1)
    jobs.signal_job(run.held(), signal.SIGSTOP)

    def stopped() -> bool:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"

    _wait(stopped, 3)
    run.fence_now()  # the worker is gone: no one resumes or stops the job but its shim
    run.proc.wait(4)
    assert _gone(pid)


def _worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[runner.Worker, list[int]]:
    w = worker(tmp_path, FakeTransport())
    w.opts.kill_grace = 0.5
    finished: list[int] = []
    monkeypatch.setattr(w, "_finish", lambda held, status: finished.append(status))
    return w, finished


def test_the_worker_reports_a_stopped_job_only_once_nothing_of_it_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w, finished = _worker(tmp_path, monkeypatch)
    job = tmp_path / "job"
    job.mkdir()
    w.opts.command = ["sh", "-c", f"cd {job}; trap '' TERM; " + STUBBORN + "sleep 30"]
    claim = Claim(
        lease={"id": "L1"},
        token="tnr_l_x",
        fence=1,
        renew_seconds=10.0,
        lease_seconds=300.0,
        payload={"lease": {"id": "L1"}, "subject": {}, "kind": "command"},
    )
    w._launch(claim, time.monotonic())
    held = w.held["L1"]
    assert json.loads((w.state_dir / "L1.json").read_text())["relays"] is True
    try:
        _wait(lambda: (job / "pids").exists() and len((job / "pids").read_text().split()) >= 4, 5)
        pids = [int(p) for p in (job / "pids").read_text().split()]
        w._begin_stop(held, "cancel")
        stopped = time.monotonic()
        while not finished:
            assert time.monotonic() - stopped < 5
            w._tend(held)
            time.sleep(0.05)
        assert time.monotonic() - stopped >= 0.5  # the job itself ignored SIGTERM
        assert finished == [-signal.SIGKILL]
        assert [pid for pid in pids if not _gone(pid)] == []
    finally:  # whatever a failed test left
        left = (job / "pids").read_text().split() if (job / "pids").exists() else []
        for pid in [held.pid, *map(int, left)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        assert held.proc is not None
        held.proc.wait()


def test_a_job_of_the_older_layout_is_reported_once_its_group_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shim of an older release led the job's group and left when the job's own process
    exited: the worker kills the rest of that group when the grace is up, then reports."""
    w, finished = _worker(tmp_path, monkeypatch)
    leader = subprocess.Popen(
        ["sh", "-c", "sh -c 'trap \"\" TERM; echo $$ > pid; exec sleep 30' & sleep 30"],
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        _wait(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(), 5)
        helper = int((tmp_path / "pid").read_text())
        (tmp_path / "L1.exit").write_text("-15")
        held = jobs.Held(
            lease_id="L1",
            fence=1,
            token="tnr_l_x",
            renew_seconds=10.0,
            lease_seconds=300.0,
            pid=leader.pid,
            started=jobs.start_time(leader.pid),
            exit_file=str(tmp_path / "L1.exit"),
            err_file=str(tmp_path / "L1.err"),
            payload_file="",
            marker_file=str(tmp_path / "L1.reported"),
            last_ok=time.monotonic(),
        )
        w.held["L1"] = held
        w._begin_stop(held, "cancel")
        leader.wait(3)  # the shell took SIGTERM; its helper did not
        w._tend(held)
        assert finished == [] and not _gone(helper)
        _wait(lambda: w._tend(held) or finished, 3)
        assert finished == [-15]
        _wait(lambda: _gone(helper), 2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
