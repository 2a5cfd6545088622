"""Runs one job, fences it, and records its exit status, even when its worker is gone.

`python -m tenure_worker.shim EXIT_FILE FENCE_FILE GRACE -- CMD [ARG...]`, started in a session
of its own, so signals the worker sends to the session's process group reach the job. The
shim ignores SIGTERM/SIGINT/SIGHUP itself: it must outlive the job to write the exit status.

FENCE_FILE holds the wall-clock time by which the job must be stopped unless the worker hears
from the service again (it rewrites the file on every answered heartbeat). If that time
passes — the worker died, or lost the service, or was stopped — the shim stops the job itself
(SIGTERM, then SIGKILL after GRACE seconds), so a job can never run on past its lease.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.2
FENCED = -9


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print(
            "usage: python -m tenure_worker.shim EXIT_FILE FENCE_FILE GRACE -- CMD [ARG...]",
            file=sys.stderr,
        )
        return 2
    exit_file, fence_file, grace, command = argv[0], argv[1], float(argv[2]), argv[4:]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        job = subprocess.Popen(command, preexec_fn=_default_signals)
    except OSError as err:
        print(f"tenure worker: cannot run {command[0]!r}: {err}", file=sys.stderr)
        return _record(exit_file, 127)
    status = _watch(job, fence_file, grace, exit_file)
    return _record(exit_file, status)


def _watch(job: subprocess.Popen[bytes], fence_file: str, grace: float, exit_file: str) -> int:
    kill_at: float | None = None
    while True:
        try:
            return job.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        now = time.time()
        if kill_at is None and now > _fence(fence_file):
            print("tenure worker: no answered heartbeat in time: stopping the job", file=sys.stderr)
            os.killpg(os.getpgid(0), signal.SIGTERM)  # the shim itself ignores it
            os.killpg(os.getpgid(0), signal.SIGCONT)  # in case the job was paused
            kill_at = now + grace
        elif kill_at is not None and now > kill_at:
            _record(exit_file, FENCED)  # written first: SIGKILL ends the shim too
            os.killpg(os.getpgid(0), signal.SIGKILL)


def _fence(fence_file: str) -> float:
    try:
        with open(fence_file) as fence:
            return float(fence.read().strip())
    except (OSError, ValueError):
        return float("inf")  # no fence written (yet): nothing to enforce


def _record(exit_file: str, status: int) -> int:
    tmp = f"{exit_file}.tmp"
    with open(tmp, "w") as out:
        out.write(str(status))
    os.replace(tmp, exit_file)
    return status if status >= 0 else 128 - status


def _default_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
