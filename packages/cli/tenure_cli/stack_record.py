"""The record a running `tenure local` keeps in its data dir, `stack.json`: every endpoint it
serves and its own process id. Commands given no address (`tenure worker run|claim`, `tenure
email send`) find the stack through it.

The record is true only while its stack runs: the stack removes it when it stops, and a record
its stack could not remove (killed with SIGKILL, a machine that lost power) is refused by name
instead of sending requests to ports nobody serves any more. Whether the stack runs is read
from the lock it holds its data dir by (`.lock` beside the record), not from its process id:
a lock ends with its process even before the process is reaped, never passes to a process that
reuses the id, and is the same from another pid namespace (a container sharing the data dir).
A record with no lock beside it is judged by its process id (a zombie's counts as ended),
as the worker SDK judges a job's. Kept free of the service's dependencies: a worker host reads
it too."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from tenure_worker.jobs import alive

STACK_FILE = "stack.json"
# Beside the record: the file a running stack holds an exclusive lock on.
LOCK_FILE = ".lock"


class StackNotRunning(ValueError):
    """The data dir's record leads to no running stack: its process has ended, or the file is
    not a record a stack wrote (cut short, or edited by hand)."""


def record_path(data_dir: Path) -> Path:
    return data_dir / STACK_FILE


def running_stack(data_dir: Path) -> dict[str, Any]:
    """The record of the stack running from `data_dir`; {} when there is none.
    StackNotRunning when it is not a JSON object, or names a process that is gone. A record
    without a process id is taken as it is."""
    path = record_path(data_dir)
    found = _read(path)
    if not found:
        return {}
    pid = found.get("pid")
    held = lock_held(data_dir)
    gone = isinstance(pid, int) and not isinstance(pid, bool) and not alive(pid)
    if held is False or (held is None and gone):
        raise StackNotRunning(
            f"{path} names a stack whose process ({pid}) has ended; start `tenure local` again"
        )
    return found


def lock_held(data_dir: Path) -> bool | None:
    """Whether a process holds the data dir's lock; None when this cannot tell: no lock file
    (a record of a stack that took none), or a file system without locks. Read with a shared
    lock taken and given back at once: never a hold of its own."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing gives back the shared lock, if it was taken
    return False


def forget_own_record(data_dir: Path) -> None:
    """Remove the record if this process wrote it: a stack that stops takes its endpoints
    with it, and a record another start has written since is left alone."""
    path = record_path(data_dir)
    try:
        mine = _read(path).get("pid") == os.getpid()
    except StackNotRunning:
        return  # not a record this process wrote
    if mine:
        path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any]:
    """The record as written; {} when there is none, StackNotRunning when it is not a JSON
    object (cut short, or edited by hand)."""
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise StackNotRunning(
            f"{path} is not a stack's record ({type(err).__name__}): start `tenure local` again"
        ) from None
    if not isinstance(found, dict):
        raise StackNotRunning(f"{path} is not a stack's record: start `tenure local` again")
    return found
