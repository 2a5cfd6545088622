"""A job's process is known by its pid and its start time together. After a restart the runner
reads both from its state directory: a pid the system has since given to another process (its
start time differs) is a job that ended, never waited on or signalled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tenure_worker import jobs, runner
from tenure_worker.client import Claim

from tests.unit.test_worker_client import FakeTransport, worker
from tests.unit.worker_support import held_record


@pytest.fixture
def other() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is not the job: what a reused pid points at."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    yield proc
    proc.kill()
    proc.wait()


def _signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: sent.append((pid, sig)))
    return sent


def test_a_process_is_alive_only_with_the_start_time_it_was_seen_with(
    other: subprocess.Popen[bytes],
) -> None:
    started = jobs.start_time(other.pid)
    assert started, "this system tells when a process started"
    assert jobs.start_time(other.pid) == started  # the same process, the same answer
    assert jobs.alive(other.pid, started)
    assert not jobs.alive(other.pid, "stat:1")  # the pid, now another process's
    other.kill()
    other.wait()
    assert not jobs.alive(other.pid, started)
    assert jobs.start_time(other.pid) == ""


def test_without_proc_the_start_time_comes_from_ps(
    other: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    started = jobs.start_time(other.pid, proc=tmp_path / "no-proc")
    assert started.startswith("ps:") and started != "ps:"
    assert jobs.alive(other.pid, started, proc=tmp_path / "no-proc")
    assert not jobs.alive(other.pid, jobs.start_time(other.pid), proc=tmp_path / "no")


def test_a_launched_job_is_recorded_with_its_start_time(tmp_path: Path) -> None:
    w = worker(tmp_path, FakeTransport())
    w.opts.command = [sys.executable, "-c", "import time; time.sleep(60)"]
    claim = Claim(
        lease={"id": "L1"},
        token="tnr_l_x",
        fence=1,
        renew_seconds=10.0,
        lease_seconds=300.0,
        payload={"lease": {"id": "L1"}, "subject": {}, "kind": "command"},
    )
    w._launch(claim, 0.0)
    held = w.held["L1"]
    try:
        assert held.pid > 0 and held.started == jobs.start_time(held.pid) != ""
        saved = json.loads((w.state_dir / "L1.json").read_text())
        assert (saved["pid"], saved["started"]) == (held.pid, held.started)
    finally:
        jobs.signal_job(held, signal.SIGKILL)  # its shim kills the job, then exits
        assert held.proc is not None
        held.proc.wait()


def _state_file(w: runner.Worker, pid: int, started: str) -> None:
    record = held_record(w.state_dir, pid=pid, started=started, acked_at=0.0)
    (w.state_dir / "L1.json").write_text(json.dumps(record.persisted()))


def test_a_restarted_worker_does_not_take_a_reused_pid_for_its_job(
    tmp_path: Path, other: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = _signals(monkeypatch)
    w = worker(tmp_path, FakeTransport())
    _state_file(w, other.pid, "stat:1")  # the job's pid, now another process's
    w._reattach()
    assert "L1" not in w.held, "not re-attached to a process that is not the job"
    assert w.unreported["L1"][1:3] == ("fail", {"error": "worker_restarted"})
    assert sent == [] and other.poll() is None


def test_a_restarted_worker_reattaches_to_its_own_job(
    tmp_path: Path, other: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = _signals(monkeypatch)
    w = worker(tmp_path, FakeTransport())
    _state_file(w, other.pid, jobs.start_time(other.pid))
    w._reattach()
    held = w.held["L1"]
    jobs.signal_job(held, signal.SIGTERM)
    assert sent == [(other.pid, signal.SIGTERM)]


def test_a_job_whose_identity_does_not_match_is_never_signalled(
    tmp_path: Path, other: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = _signals(monkeypatch)
    w = worker(tmp_path, FakeTransport())
    _state_file(w, other.pid, jobs.start_time(other.pid))
    w._reattach()
    held = w.held["L1"]
    held.started = "stat:1"  # the job ended and its pid went to `other` meanwhile
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT):
        jobs.signal_job(held, sig)
    assert sent == []
    assert w._exit_status(held) == -1  # ended, with no status written
