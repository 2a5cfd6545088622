"""The front door's worker processes: one invocation at a time each, the warmest one first."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import forkserver
from typing import Any, Protocol

from tenure_worker.jobs import alive

from tenure_cli.local import lambda_host

# Every Workers shares the one fork server (the API's listener, the worker function's, and the
# claim function's ClaimHost). The fork server ends only once every process it forked has
# ended, so the last of them to stop stops it: stopped by the first, it would wait on the
# others' live processes.
_LIVE = 0
_LIVE_LOCK = threading.Lock()
# Where a process cannot wait on its stack's end, it looks this often.
STACK_WATCH_SECONDS = 1.0


def as_a_stack_s_process(stack: int) -> None:
    """What each process of a stack's functions does first.

    It ignores SIGINT: Ctrl-C at a terminal reaches the whole foreground process group, and
    the stack ends its processes itself (`Workers.stop`), so one would only print a
    KeyboardInterrupt traceback of its own on the way out.

    And it ends when the stack (process `stack`) ends, however that ends. A pool's process
    holds both ends of its own call queue, so it never reads an end of file when the stack is
    killed with SIGKILL; it would wait for work forever, and the fork server, which ends only
    once every process it forked has ended, with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(stack,), daemon=True).start()


def _end_with(stack: int) -> None:
    try:
        # Readable once the process has ended; opened while it runs, it cannot name another.
        watched = os.pidfd_open(stack)
    except ProcessLookupError:
        os._exit(0)
    except (AttributeError, OSError):  # no pidfd here (not Linux, or an old kernel)
        while alive(stack):
            time.sleep(STACK_WATCH_SECONDS)
    else:
        select.select([watched], [], [])
    os._exit(0)


class Busy(Exception):
    """Every worker stayed busy for as long as the invocation could wait for one."""


class Invocations(Protocol):
    """Where a listener's invocations run: `Workers`, or the claim function's `ClaimHost`."""

    def submit(self, fn: Callable[..., Any], *args: Any, wait: float) -> Future[Any]: ...

    def stop(self) -> None: ...


def hold_fork_server() -> None:
    """One more user of the shared fork server (a `Workers`, a `ClaimHost`)."""
    global _LIVE
    with _LIVE_LOCK:
        _LIVE += 1


def release_fork_server() -> None:
    """One user fewer; the last one stops the fork server."""
    global _LIVE
    with _LIVE_LOCK:
        _LIVE -= 1
        last = _LIVE == 0
    if last:
        _stop_fork_server()


class Workers:
    """Up to `size` processes, each running one invocation at a time as a Lambda execution
    environment does, started on first use. The one that finished last takes the next
    invocation: it is the warmest (its clients, models and caches are built), so the extra
    processes of a burst stay idle rather than spread every later request over processes cold
    to it (a run of generated requests took nearly twice as long after 64 had started).

    Each process forks from one fork server that imported the handlers once: a cold start
    costs a fork, not an import (64 processes each importing the handlers took minutes of two
    busy cores), and the stack's own threads, which a plain fork would copy mid-flight, are
    never forked."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(list(lambda_host.PRELOAD))
        self._idle: list[ProcessPoolExecutor] = []  # the most recently freed last
        self._all: list[ProcessPoolExecutor] = []
        self._changed = threading.Condition()
        self._closed = False
        hold_fork_server()

    def submit(self, fn: Callable[..., Any], *args: Any, wait: float) -> Future[Any]:
        """`fn(*args)` in the warmest free process, waiting up to `wait` seconds for one."""
        give_up = time.monotonic() + wait
        with self._changed:
            while not self._idle and len(self._all) >= self.size:
                left = give_up - time.monotonic()
                if self._closed or left <= 0:
                    raise Busy(f"all {self.size} worker processes stayed busy")
                self._changed.wait(left)
            if self._idle:
                worker = self._idle.pop()
            else:
                worker = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=self._ctx,
                    initializer=as_a_stack_s_process,
                    initargs=(os.getpid(),),
                )
                self._all.append(worker)
        try:
            future = worker.submit(fn, *args)
        except BrokenProcessPool:  # its process died after its last answer: start another
            self._retire(worker)
            return self.submit(fn, *args, wait=max(0.0, give_up - time.monotonic()))
        future.add_done_callback(lambda done: self._freed(worker, done))
        return future

    def _freed(self, worker: ProcessPoolExecutor, done: Future[Any]) -> None:
        if not done.cancelled() and isinstance(done.exception(), BrokenProcessPool):
            self._retire(worker)  # a crashed process: the next invocation gets a new one
            return
        with self._changed:
            if worker in self._all:
                self._idle.append(worker)
            self._changed.notify()

    def _retire(self, worker: ProcessPoolExecutor) -> None:
        with self._changed:
            if worker in self._all:
                self._all.remove(worker)
            self._changed.notify()
        worker.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        """End every process, a busy one too (SIGTERM, then SIGKILL), and the fork server
        when no other Workers still uses it."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            pools, self._all, self._idle = list(self._all), [], []
            self._changed.notify_all()
        # shutdown() forgets the processes: take them first, to be sure they end.
        procs = [p for pool in pools for p in (getattr(pool, "_processes", None) or {}).values()]
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        give_up = time.monotonic() + 5
        for proc in procs:
            proc.join(timeout=max(0.0, give_up - time.monotonic()))
        for proc in procs:
            if proc.is_alive():  # deaf to SIGTERM (stuck in a call): never left behind
                proc.kill()
                proc.join(timeout=2)
        release_fork_server()


def _stop_fork_server() -> None:
    """The fork server would otherwise outlive the workers until this process exits, and a
    stopped stack must leave no process behind. The standard library offers this stop to its
    own tests only: if it ever goes, the server still ends with this process."""
    stop = getattr(forkserver._forkserver, "_stop", None)
    if callable(stop):
        stop()
