"""The front door's worker processes and Ctrl-C: a terminal's SIGINT reaches every process of
the foreground group, and the stack, not each worker, decides how they end."""

from __future__ import annotations

import os
import signal
import time

from tenure_cli.local.workers import Workers


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
