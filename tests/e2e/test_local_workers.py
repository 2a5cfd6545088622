"""The front door's worker processes and Ctrl-C: a terminal's SIGINT reaches every process of
the foreground group, and the stack, not each worker, decides how they end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tenure_cli.local.workers import Workers
from tenure_worker.jobs import alive


def interrupt_handler() -> tuple[int, bool]:
    return os.getpid(), signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_worker_process_ignores_sigint_and_keeps_answering_until_the_stack_stops_it() -> None:
    workers = Workers(1)
    try:
        pid, deaf = workers.submit(interrupt_handler, wait=30).result(timeout=60)
        assert deaf, "a worker process would print its own KeyboardInterrupt on Ctrl-C"
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        again, _ = workers.submit(interrupt_handler, wait=30).result(timeout=60)
        assert again == pid  # the same warm process, still alive after the interrupt
    finally:
        workers.stop()
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"worker process {pid} outlived Workers.stop")


# A stack that holds one warm worker process, then waits to be killed.
HOLDER = """
import os, sys, time
from multiprocessing import forkserver
from tenure_cli.local.workers import Workers
workers = Workers(1)
pid = workers.submit(os.getpid, wait=30).result(timeout=60)
print(pid, forkserver._forkserver._forkserver_pid, flush=True)
time.sleep(120)
"""


def test_a_killed_stack_leaves_no_worker_process_or_fork_server_behind() -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        worker, server = (int(p) for p in holder.stdout.readline().split())
        assert alive(worker) and alive(server)
    finally:
        holder.kill()  # SIGKILL: the stack's own stop never runs
        holder.wait()
    give_up = time.monotonic() + 10
    while (alive(worker) or alive(server)) and time.monotonic() < give_up:
        time.sleep(0.1)
    left = [p for p in (worker, server) if alive(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes {left} outlived their stack"
