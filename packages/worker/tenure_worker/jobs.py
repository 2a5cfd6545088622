"""What `tenure worker run` keeps of each lease it holds and reads of each job's process: the
held lease (persisted in the state directory), the runner's options, whether a job's process
still runs, and how a failed job's error reads."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tenure_worker.shipping import MAX_BACKLOG_BYTES

# The shape of a Tenure token (`tnr_` + kind letter + secret): the SDK strips any it finds in
# a job's last output before reporting it, so no token reaches the service's records.
TOKEN_SHAPE = re.compile(r"tnr_[owl]_[A-Za-z0-9_.\-]{16,}")

# How long a stopping worker waits for its jobs' last lines to be shipped.
LOG_DRAIN_SECONDS = 10.0

STDERR_TAIL_BYTES = 4000
# A failed job's `error` names its exit status and its last stderr lines, bounded: the lease
# shows why at a glance, and the report's metadata keeps the longer tail.
ERROR_LINES = 3
ERROR_CHARS = 500
LOOP_SECONDS = 0.2
# Where Linux tells of its processes (absent elsewhere: `ps` is asked instead).
PROC = Path("/proc")
# How a service of a release without `start` on claims refuses one (422 validation_failed).
UNKNOWN_START = "start: is not a known field"
# How a service of a release without a report's `heartbeat` refuses one (422, nothing applied).
UNKNOWN_HEARTBEAT = "heartbeat: is not a known field"
# How a service of a release without heartbeat signals refuses one (422 validation_failed).
UNKNOWN_SIGNAL = "signal: is not a known field"


# The lock a worker holds its state directory by, for as long as its process lives.
LOCK_FILE = ".lock"
# A job's output file keeps its last OUTPUT_KEEP_BYTES on disk, which is all that is ever
# shipped (a backlog longer than that is skipped) and more than a failed job's report reads;
# once the file takes OUTPUT_SLACK_BYTES more than that, the worker frees what lies before
# (a hole punched in the file: its size and every offset stay as they were).
OUTPUT_KEEP_BYTES = MAX_BACKLOG_BYTES
OUTPUT_SLACK_BYTES = 8 * 1024 * 1024
# The errors that say the disk (or the user's quota on it) is full.
FULL = (errno.ENOSPC, errno.EDQUOT)


class StateDirRefused(Exception):
    """The state directory cannot be this worker's alone: another user's, a link, or held by
    another worker. One line, said as it is."""


class DiskFull(Exception):
    """A write the worker needs in its state directory failed for want of space."""


def log(message: str, **fields: Any) -> None:
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    print(f"[tenure worker] {message} {extra}".rstrip(), file=sys.stderr, flush=True)


@dataclass
class Held:
    """One lease this worker holds and the job running under it (persisted as JSON)."""

    lease_id: str
    fence: int
    token: str  # the lease's own token: kept only in the 0600 state file, to re-attach
    renew_seconds: float
    lease_seconds: float
    pid: int
    exit_file: str
    err_file: str
    payload_file: str
    marker_file: str
    fence_file: str = ""
    # When the job's process started (start_time), recorded with its pid at launch: the pid
    # alone may name another process after a restart, once the job has ended ("": unknown,
    # as in a state file of an older release, or where the system cannot tell).
    started: str = ""
    # The job runs in a process group of its own under its shim, which the worker signals
    # and which relays to that group (see `signal_job`). False, as in a state file of an older
    # release: the shim leads the job's process group, which is signalled directly.
    relays: bool = False
    acked_at: float = 0.0  # wall clock of the last answered heartbeat (survives a restart)
    keeps_logs: bool = False  # ship the job's output to the lease's logs
    log_positions: dict[str, int] | None = None  # offsets of its output files shipped so far
    # runtime only (see _RUNTIME): never written to the state file
    last_ok: float = 0.0
    revoke: str | None = None
    paused: bool = False
    stop_reason: str | None = None
    kill_at: float | None = None
    killed: bool = False
    proc: subprocess.Popen[bytes] | None = None

    def persisted(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _RUNTIME}

    @property
    def fence_at(self) -> float:
        """When the job must be stopped if nothing is heard: two heartbeats before expiry."""
        return self.last_ok + self.lease_seconds - 2 * self.renew_seconds


_RUNTIME = {"last_ok", "revoke", "paused", "stop_reason", "kill_at", "killed", "proc"}


@dataclass
class WorkerOptions:
    api: str  # where it claims, heartbeats and reports: the worker endpoint or the HTTP API
    token: str
    pool: str
    command: list[str]
    worker_id: str | None = None
    state_dir: Path = Path(".tenure-worker")
    concurrency: int = 1
    once: bool = False
    kill_grace: float = 10.0
    # On a first SIGTERM/SIGINT: how long running jobs may go on to finish before they are
    # stopped and their leases released (back to the queue, no attempt used).
    drain_seconds: float = 30.0
    worker_version: str = "tenure-worker/0.1"
    lease_seconds: int | None = None
    # The API a job is given as TENURE_API (to file tasks, block, call MCP: routes the worker
    # endpoint does not serve); None: `api`. The job reports on `api` (TENURE_WORKER_API).
    job_api: str | None = None


def fence_grace(kill_grace: float, renew_seconds: float) -> float:
    """SIGTERM → SIGKILL time for a fenced job: it must be gone before the lease can expire,
    two heartbeats after the fence, whatever --kill-grace says."""
    return min(kill_grace, max(0.5, renew_seconds))


def alive(pid: int, started: str = "", proc: Path = PROC) -> bool:
    """Whether the job's process runs: its pid is taken, not by a zombie (ended, not yet
    reaped), and, where the job's start time was recorded, by a process that started then
    (one that did not is another process the pid was given to after the job ended)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # taken by another user's process: the start time tells whether it is the job
    if started and start_time(pid, proc) != started:
        return False
    try:
        with open(proc / str(pid) / "stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def start_time(pid: int, proc: Path = PROC) -> str:
    """When process `pid` started, as this system tells it ("" when there is no such process,
    or no way to tell): with its pid it names one process. Linux: field 22 of
    /proc/<pid>/stat (starttime, in clock ticks since boot); where there is no /proc (macOS,
    the BSDs), `ps -o lstart=` (to the second)."""
    if proc.is_dir():
        try:
            text = (proc / str(pid) / "stat").read_text()
        except OSError:
            return ""
        # The command name (field 2) is in parentheses and may hold anything: count fields
        # from the last ")", after which field 3 comes.
        fields = text.rsplit(")", 1)[-1].split()
        return f"stat:{fields[19]}" if len(fields) > 19 else ""
    stamp = " ".join(_ps(pid, "lstart").split())
    return f"ps:{stamp}" if stamp else ""


def is_job(held: Held) -> bool:
    """Whether `held.pid` still names the job's process. A child this runner launched keeps
    its pid until it is reaped; one re-attached from the state directory is the job only
    while its start time is the one recorded at launch."""
    if held.proc is not None:
        return held.proc.returncode is None
    return alive(held.pid, held.started)


# What the shim takes each signal meant for the job as (tenure_worker.shim): the shim is not
# in the job's process group, so it stays free to fence a paused job and to see to it that
# nothing the job started outlives a stop by more than the grace.
RELAYED = {
    signal.SIGTERM: signal.SIGTERM,  # stop: SIGTERM to the job, SIGKILL after the grace
    signal.SIGKILL: signal.SIGUSR1,  # the grace is up: SIGKILL to the job now
    signal.SIGSTOP: signal.SIGTSTP,  # pause: SIGSTOP to the job
    signal.SIGCONT: signal.SIGCONT,  # resume
}


def signal_job(held: Held, sig: signal.Signals) -> None:
    """Signal the job, and nothing else: not a pid the system has given to another process
    since the job ended. The job's shim takes it (as RELAYED) and acts on the job's process
    group; a job of an older release's layout has its group (led by the shim) signalled."""
    if not is_job(held):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if held.relays:
            os.kill(held.pid, RELAYED[sig])
        else:
            os.killpg(held.pid, sig)


def group_left(pgid: int) -> bool:
    """Whether process group `pgid` still has a member."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stored_worker_id(state_dir: Path) -> str:
    """The worker's id kept in its state directory (made from the host and pid the first
    time), so that a restarted worker claims and heartbeats as the same worker."""
    path = state_dir / "worker-id"
    with contextlib.suppress(FileNotFoundError):
        return read_private(path).strip()
    worker_id = f"{socket.gethostname()}-{os.getpid()}"
    write_private(path, worker_id)
    return worker_id


def stderr_tail(path: str) -> str:
    try:
        with open(path, "rb") as err:
            err.seek(0, os.SEEK_END)
            size = err.tell()
            err.seek(max(0, size - STDERR_TAIL_BYTES))
            return err.read().decode(errors="replace")
    except OSError:
        return ""


def failure_error(status: int, tail: str) -> str:
    """A failed job's `error`: its exit status and its last non-empty stderr lines (at most
    ERROR_LINES, the newest kept whole where they fit in ERROR_CHARS), so the lease itself
    says why; the longer tail stays in the report's metadata."""
    error = f"exit status {status}"
    lines = [line.strip() for line in tail.splitlines() if line.strip()][-ERROR_LINES:]
    if not lines:
        return error
    room = ERROR_CHARS - len(error) - 2
    kept: list[str] = []
    for line in reversed(lines):
        cost = len(line) + (3 if kept else 0)  # " | " between lines
        if cost > room:
            if not kept:  # the last line alone is too long: its end says most
                kept.append("…" + line[-(room - 1) :])
            break
        kept.insert(0, line)
        room -= cost
    return f"{error}: {' | '.join(kept)}"


def usage_file(held: Held) -> str:
    return held.marker_file.removesuffix(".reported") + ".usage"


def noted_usage(held: Held) -> dict[str, Any] | None:
    """What the job noted with `tenure worker usage`, if anything."""
    path = Path(usage_file(held))
    if not path.exists():
        return None
    try:
        found = json.loads(path.read_text())
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def riding(held: dict[str, Held], next_beat: float, body: dict[str, Any]) -> list[Held]:
    """The leases whose worker heartbeat rides on this report: only on a report that claims
    the next lease (it goes with the worker token), and only when that heartbeat is due within
    half a renewal, so a lease's beats never come further apart than a renewal."""
    if "next" not in body or not held:
        return []
    if next_beat - time.monotonic() > min(h.renew_seconds for h in held.values()) / 2:
        return []
    return [h for h in held.values() if h.stop_reason != "stale"]


def with_beats(body: dict[str, Any], riders: list[Held]) -> dict[str, Any]:
    if not riders:
        return body
    return {**body, "heartbeat": [{"id": h.lease_id, "fence": h.fence} for h in riders]}


def ridden_rows(riders: list[Held], answer: dict[str, Any]) -> list[Any] | None:
    """The report's answer to the heartbeat it carried, one row per lease as a worker
    heartbeat's; None when it carried none, or when the service refused that heartbeat as a
    whole (`{error}`; the report stands): it is then sent apart when due."""
    if not riders:
        return None
    rows = answer.get("heartbeat")
    if isinstance(rows, list):
        return rows
    refusal = rows.get("error") if isinstance(rows, dict) else None
    log("heartbeat on the report not taken; sending it apart", error=refusal)
    return None


# ------------------------------------------------------------------ state directory


def hold_state_dir(path: Path) -> int:
    """Make sure the state directory is this user's alone and hold it: the open lock file's
    descriptor, locked for as long as it stays open (the process ends, the lock with it).

    Whoever owns the directory, or can write to it, chooses which pids a worker signals (the
    state files it re-attaches from) and, through links planted under the names it writes,
    which files it overwrites. So a directory another user owns, or a link to one, is refused
    outright; one of ours open to others is closed to them (0700). A second worker on the same
    directory would take the first one's jobs for its own: refused, naming the holder's pid.
    So is one under a directory another user could change (see `_check_above`)."""
    _check_above(path)
    with contextlib.suppress(FileExistsError):
        path.mkdir(parents=True, mode=0o700)
    if path.is_symlink():
        raise StateDirRefused(f"the state dir {path} is a symbolic link; give the directory itself")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        raise StateDirRefused(f"the state dir {path}: {err.strerror or err}") from None
    try:
        seen = os.fstat(fd)
        if seen.st_uid != os.geteuid():
            raise StateDirRefused(
                f"the state dir {path} belongs to uid {seen.st_uid}, not to this user (uid "
                f"{os.geteuid()}): its owner could choose what the worker signals and writes; "
                "give a directory of your own"
            )
        if stat.S_IMODE(seen.st_mode) & 0o077:
            os.fchmod(fd, 0o700)
            if stat.S_IMODE(os.fstat(fd).st_mode) & 0o022:
                raise StateDirRefused(
                    f"the state dir {path} stays writable by others after chmod 700; "
                    "give another directory"
                )
        return _lock(path, fd)
    finally:
        os.close(fd)


def _check_above(path: Path) -> None:
    """Refuse a state dir below a directory whose entries another user may rename: owned by
    someone other than this user or root, or writable by others without the sticky bit (as
    /tmp has, where only an entry's owner may move it). From such a directory they could swap
    the state dir for their own once it was checked, and the worker's writes and signals
    would follow its path there. Both the path as given and where its links lead are judged;
    what does not exist yet is made by the worker, as its own."""
    me = os.geteuid()
    # From the root down, the path as given first, then where its links lead.
    above = [*reversed(path.absolute().parents), *reversed(path.resolve().parents)]
    for directory in dict.fromkeys(above):
        try:
            seen = os.stat(directory)
        except FileNotFoundError:
            continue
        except OSError as err:
            raise StateDirRefused(f"{directory}, above the state dir: {err.strerror}") from None
        real = directory.resolve()
        named = str(directory) if real == directory else f"{directory} (a link to {real})"
        if seen.st_uid not in (0, me):
            raise StateDirRefused(
                f"{named}, above the state dir {path}, belongs to uid {seen.st_uid}: its "
                "owner could swap the state dir for another; give a directory of your own"
            )
        if stat.S_IMODE(seen.st_mode) & 0o022 and not seen.st_mode & stat.S_ISVTX:
            raise StateDirRefused(
                f"{named}, above the state dir {path}, is writable by others without the "
                "sticky bit: they could swap the state dir for another; give a directory of "
                "your own"
            )


def _lock(path: Path, dir_fd: int) -> int:
    try:
        lock = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in FULL:
            raise DiskFull(f"the disk of the state dir {path} is full: {err.strerror}") from None
        raise StateDirRefused(f"{path / LOCK_FILE}: {err.strerror or err}") from None
    try:
        _own(lock, path / LOCK_FILE)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(lock, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(lock)
        raise StateDirRefused(
            f"the state dir {path} is in use by another tenure worker (pid {holder}): stop "
            "that one, or give this one another --state-dir"
        ) from None
    except StateDirRefused:
        os.close(lock)
        raise
    except OSError as err:  # a file system without locks (some network mounts)
        log(
            f"cannot lock the state dir ({err.strerror or err}): a second worker there "
            "would not be refused",
            state_dir=str(path),
        )
    with contextlib.suppress(OSError):  # who holds it, for the refusal; the lock is what counts
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
    return lock


def _own(fd: int, path: str | Path) -> None:
    """Refuse an open state file that is not a regular file of this user's with one name: a
    device, a fifo, or a second name for a file elsewhere (a hard link) is not one to use."""
    seen = os.fstat(fd)
    if not stat.S_ISREG(seen.st_mode) or seen.st_uid != os.geteuid() or seen.st_nlink != 1:
        raise StateDirRefused(f"{path} is not a file of this worker's; remove it")


def _write(fd: int, data: bytes) -> int:
    return os.write(fd, data)


def write_private(path: str | Path, text: str) -> None:
    """Write a state file whole: a reader sees the old one or the new one, never a part. It is
    written to a new file (`<path>.tmp`, removed first, created exclusively, never through a
    link) and renamed over `path`, which replaces a link there rather than following it. The
    disk full: DiskFull, with nothing left half-written."""
    tmp = f"{path}.tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            data = memoryview(text.encode())
            while data:
                data = data[_write(fd, data.tobytes()) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as err:
        if err.errno not in FULL:
            raise
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise DiskFull(f"{err.strerror} writing {Path(path).name}") from None


def read_private(path: str | Path) -> str:
    """A state file's text, never read through a link, and only from a file of this user's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise StateDirRefused(f"{path} is a symbolic link; remove it") from None
        raise
    with os.fdopen(fd) as f:
        _own(fd, path)
        return f.read()


def open_output(path: str) -> int:
    """A job's output file, opened to append (the job's writes always go to its end, so the
    worker may free its head meanwhile), never through a link, and only a file of ours."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as err:
        if err.errno in FULL:
            raise DiskFull(f"{err.strerror} creating {Path(path).name}") from None
        raise
    try:
        _own(fd, path)
    except StateDirRefused:
        os.close(fd)
        raise
    return fd


_FALLOC_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


def _fallocate() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.fallocate
    except (OSError, AttributeError):  # not Linux: no way to free a file's head
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    call.restype = ctypes.c_int
    return call


_PUNCH = _fallocate()


def free_read_output(path: str) -> bool:
    """Free the disk a job's output file takes before its last OUTPUT_KEEP_BYTES, once that
    head passes OUTPUT_SLACK_BYTES: nothing reads it again (shipping skips a backlog longer
    than that). Its size and offsets stay, so shipping's positions stay true, and the job
    appends on. False where the system or its file system cannot free part of a file."""
    try:
        seen = os.lstat(path)
    except OSError:
        return True
    if not stat.S_ISREG(seen.st_mode):
        return True
    if seen.st_blocks * 512 <= OUTPUT_KEEP_BYTES + OUTPUT_SLACK_BYTES:
        return True
    head = (seen.st_size - OUTPUT_KEEP_BYTES) // 65536 * 65536
    if _PUNCH is None or head <= 0:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return True
    try:
        return bool(_PUNCH(fd, _FALLOC_PUNCH_HOLE_KEEP_SIZE, 0, head) == 0)
    finally:
        os.close(fd)


def owned_by_us(pid: int, proc: Path = PROC) -> bool:
    """Whether process `pid` runs as this user (its real uid is ours): only such a process can
    be a job this worker launched. Linux: the `Uid:` line of /proc/<pid>/status; elsewhere
    `ps -o ruid=`."""
    if proc.is_dir():
        try:
            text = (proc / str(pid) / "status").read_text()
        except OSError:
            return False
        for line in text.splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1]) == os.getuid()
        return False
    return _ps(pid, "ruid").strip() == str(os.getuid())


def _ps(pid: int, field: str) -> str:
    """One field of process `pid` as `ps` prints it, where there is no /proc; "" when `ps`
    cannot tell (no such process, no `ps`)."""
    try:
        out = subprocess.run(
            ["ps", "-o", f"{field}=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout if out.returncode == 0 else ""
