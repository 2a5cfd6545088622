"""Runs one job, fences it, and records its exit status, even when its worker is gone.

`python -m tenure_worker.shim EXIT_FILE FENCE_FILE GRACE [KILL_GRACE] -- CMD [ARG...]`, started
in a session of its own. The job runs in a process group of its own under the shim, so the
shim is never in the group it stops, pauses or kills: a paused job's shim still runs, and
can still fence it. The worker signals the shim, which acts on the job's group:

- SIGTERM: stop the job (SIGTERM and SIGCONT to its group); SIGKILL follows after KILL_GRACE
  (and BACKSTOP_SECONDS), in case the worker is gone by then;
- SIGUSR1: kill the job now (SIGKILL to its group): the worker's grace is up;
- SIGTSTP: pause the job (SIGSTOP to its group); SIGCONT: resume it.

FENCE_FILE holds the wall-clock time by which the job must be stopped unless the worker hears
from the service again (it rewrites the file on every answered heartbeat). If that time
passes — the worker died, or lost the service, or was stopped — the shim stops the job itself
(SIGTERM, then SIGKILL after GRACE seconds), so a job can never run on past its lease.

Nothing the job started outlives it: once the job's own process has exited, whatever is left
in its process group (and, on Linux, any other process descended from the shim, the shim
being their child subreaper, so that processes that left the group with setsid or a double
fork come back to it) gets SIGTERM, then SIGKILL after KILL_GRACE, and the shim records the
job's exit status only once they are all gone. Signals come first: no failed write (a full
disk under the job's stderr or the exit file) can keep the shim from stopping the job.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from types import FrameType

POLL_SECONDS = 0.2
# How much later than the worker's own SIGKILL the shim kills a job the worker stopped: the
# worker's is the one meant; the shim's is for a worker that died meanwhile.
BACKSTOP_SECONDS = 1.0
# How long the shim waits on processes that survive SIGKILL (stuck in the kernel) before it
# records the exit status anyway.
STUCK_SECONDS = 5.0
PR_SET_CHILD_SUBREAPER = 36
PROC = "/proc"


def main(argv: list[str]) -> int:
    try:
        split = argv.index("--")
    except ValueError:
        split = -1
    if split not in (3, 4) or len(argv) <= split + 1:
        _say("usage: python -m tenure_worker.shim EXIT_FILE FENCE_FILE GRACE [KILL_GRACE] -- CMD")
        return 2
    grace = float(argv[2])
    kill_grace = float(argv[3]) if split == 4 else grace
    shim = Shim(argv[0], argv[1], grace, kill_grace)
    return shim.run(argv[split + 1 :])


class Shim:
    def __init__(self, exit_file: str, fence_file: str, grace: float, kill_grace: float) -> None:
        self.exit_file = exit_file
        self.fence_file = fence_file
        self.grace = grace
        self.kill_grace = kill_grace
        self.job: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.kill_at: float | None = None
        self.paused = False
        self.fenced = False

    def run(self, command: list[str]) -> int:
        for sig in (signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGUSR1, self._on_kill)
        signal.signal(signal.SIGTSTP, self._on_pause)
        signal.signal(signal.SIGCONT, self._on_resume)
        _become_subreaper()
        try:
            job = subprocess.Popen(command, process_group=0, preexec_fn=_default_signals)
        except OSError as err:
            _say(f"tenure worker: cannot run {command[0]!r}: {err}")
            return _record(self.exit_file, 127)
        self.job = job
        if self.paused:  # asked for before the job was there
            self._signal(signal.SIGSTOP)
        if self.stopping:
            self._signal(signal.SIGTERM)
            self._signal(signal.SIGCONT)
        status = self._watch(job)
        self._clear_leftovers()
        return _record(self.exit_file, status)

    # ------------------------------------------------------------ what the worker asks

    def _on_stop(self, _signum: int, _frame: FrameType | None) -> None:
        self._stop(self.kill_grace + BACKSTOP_SECONDS)

    def _on_kill(self, _signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        self.kill_at = 0.0
        self._kill()

    def _on_pause(self, _signum: int, _frame: FrameType | None) -> None:
        self.paused = True
        self._signal(signal.SIGSTOP)

    def _on_resume(self, _signum: int, _frame: FrameType | None) -> None:
        self.paused = False
        self._signal(signal.SIGCONT)

    # ---------------------------------------------------------------- acting on the job

    def _stop(self, grace: float) -> None:
        """SIGTERM to the job (SIGCONT too, so a paused job gets it); SIGKILL after `grace`."""
        kill_at = time.time() + grace
        if self.kill_at is None or kill_at < self.kill_at:
            self.kill_at = kill_at
        if not self.stopping:
            self.stopping = True
            self._signal(signal.SIGTERM)
            self._signal(signal.SIGCONT)

    def _kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        """Signal the job's process group, and every other process descended from the shim
        (each once: not those of the group again)."""
        if self.job is None:
            return
        group = self.job.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
        for pid, pgid in _descendants(os.getpid()):
            if pgid != group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def _check_fence(self, now: float) -> None:
        if not self.fenced and now > _fence(self.fence_file):
            self.fenced = True
            self._stop(self.grace)  # first: no failed write may keep it from happening
            _say("tenure worker: no answered heartbeat in time: stopping the job")

    def _watch(self, job: subprocess.Popen[bytes]) -> int:
        while True:
            try:
                return job.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            now = time.time()
            self._check_fence(now)
            if self.kill_at is not None and now >= self.kill_at:
                self._kill()

    def _clear_leftovers(self) -> None:
        """After the job's own process has exited: wait for whatever it left (its process
        group, the shim's other descendants) to be gone, SIGTERM to them if the job was not
        being stopped already, SIGKILL once the grace is up."""
        assert self.job is not None
        given_up_at: float | None = None
        while True:
            _reap()
            if not self._left():
                return
            now = time.time()
            if not self.stopping:
                self._stop(self.kill_grace)
            self._check_fence(now)
            if self.kill_at is not None and now >= self.kill_at:
                self._kill()
                if given_up_at is None:
                    given_up_at = now + STUCK_SECONDS
                elif now >= given_up_at:
                    _say("tenure worker: processes of the job survive SIGKILL; leaving them")
                    return
            time.sleep(POLL_SECONDS / 4)

    def _left(self) -> bool:
        assert self.job is not None
        try:
            os.killpg(self.job.pid, 0)
            return True
        except ProcessLookupError:
            pass
        except PermissionError:
            return True
        return any(not _zombie(pid) for pid, _ in _descendants(os.getpid()))


def _become_subreaper() -> None:
    """On Linux: processes of the job orphaned by their parent (a double fork, a daemon)
    are re-parented to the shim, not to init, so it still finds and stops them. Elsewhere
    only the job's process group is stopped."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stat(pid: str) -> list[str] | None:
    try:
        with open(f"{PROC}/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()  # from field 3: state, ppid, pgrp, ...


def _descendants(root: int) -> list[tuple[int, int]]:
    """(pid, process group) of every process descended from `root`, as /proc tells (none
    where there is no /proc)."""
    try:
        entries = os.listdir(PROC)
    except OSError:
        return []
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat(entry)
        if fields is None or len(fields) < 3:
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), int(fields[2])))
    found: list[tuple[int, int]] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _zombie(pid: int) -> bool:
    fields = _stat(str(pid))
    return fields is None or fields[0] in ("Z", "X")


def _reap() -> None:
    """Wait for the shim's ended children (processes re-parented to it), so none is left a
    zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fence(fence_file: str) -> float:
    try:
        with open(fence_file) as fence:
            return float(fence.read().strip())
    except (OSError, ValueError):
        return float("inf")  # no fence written (yet): nothing to enforce


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


def _record(exit_file: str, status: int) -> int:
    tmp = f"{exit_file}.tmp"
    try:
        with open(tmp, "w") as out:
            out.write(str(status))
        os.replace(tmp, exit_file)
    except OSError as err:
        _say(f"tenure worker: cannot record the job's exit status: {err}")
    return status if status >= 0 else 128 - status


def _default_signals() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
