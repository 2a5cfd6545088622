"""Runs one job and records its exit status, even when the worker that started it is gone.

`python -m tenure.worker.shim EXIT_FILE -- CMD [ARG...]` — started in a session of its own, so
signals the worker sends to the session's process group reach the job. The shim ignores
SIGTERM/SIGINT/SIGHUP itself: it must outlive the job to write the exit status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tenure.worker.shim EXIT_FILE -- CMD [ARG...]", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        # The job gets the default dispositions back, whatever the shim ignores.
        job = subprocess.Popen(command, restore_signals=True, preexec_fn=_default_signals)
        status = job.wait()
    except OSError as err:
        print(f"tenure worker: cannot run {command[0]!r}: {err}", file=sys.stderr)
        status = 127
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
