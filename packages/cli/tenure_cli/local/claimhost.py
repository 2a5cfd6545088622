"""The local claim function: a claim that waits parks a thread, not a whole process.

On AWS each waiting claim holds an instance of the claim function for its wait. Locally, on two
shared cores, a process per waiting claim cannot hold the long polls this stack is meant to take
at once (200: 25 worker tokens with 8 claims waiting each). Measured on the front door's
process-per-invocation pool: 200 concurrent long polls took over a minute to start their
processes (34 MB each), and some ran past the invocation timeout.

So the claim function runs in a few processes, each taking many invocations on threads but
running their code one at a time, as a Lambda instance runs one invocation: an invocation holds
its process's turn while it runs and gives the turn up only while it waits on something outside
the process (its claim's sleep between two looks, a DynamoDB call), taking it back, with its own
request as the resolver's current one, when the wait ends (`_Turn`). What a waiting claim costs
is then a thread and its looks, as on AWS it is an instance and its looks; the handler's code
never runs for two invocations at once, and its module state (the resolver's current event)
stays each invocation's own.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from typing import Any

from tenure_cli.local import lambda_host
from tenure_cli.local.workers import Busy, hold_fork_server, release_fork_server

# The claim function's processes, and the invocations each holds at once (waiting ones
# included): 256 in all, for the 200 long polls of 25 tokens and the claims that answer at once.
CLAIM_PROCESSES = 8
PER_PROCESS = 32


class ClaimHost:
    """Up to `processes` processes, started on first use, each running up to `per_process`
    invocations at once on threads, one at a time but for their claims' waits. An invocation
    goes to the least busy process; past every process's bound it waits for room within its
    budget, then is `Busy` (the front door's 503), as Lambda throttles past its concurrency."""

    def __init__(self, processes: int = CLAIM_PROCESSES, per_process: int = PER_PROCESS) -> None:
        self.processes = processes
        self.per_process = per_process
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(list(lambda_host.PRELOAD))
        self._all: list[_Process] = []
        self._changed = threading.Condition()
        self._closed = False
        hold_fork_server()

    def submit(self, fn: Callable[..., Any], *args: Any, wait: float) -> Future[Any]:
        give_up = time.monotonic() + wait
        with self._changed:
            while True:
                if self._closed:
                    raise Busy("the claim function is stopped")
                chosen = self._room()
                if chosen is not None:
                    break
                left = give_up - time.monotonic()
                if left <= 0:
                    raise Busy(f"all {self.processes * self.per_process} claim invocations busy")
                self._changed.wait(left)
            chosen.in_flight += 1
        return chosen.call(fn, args, self._done)

    def _room(self) -> _Process | None:
        """The least busy live process with room, or a new one while fewer than `processes`
        run and each has an invocation already (so a burst spreads over the processes)."""
        self._all = [p for p in self._all if p.alive]
        open_ = [p for p in self._all if p.in_flight < self.per_process]
        least = min(open_, key=lambda p: p.in_flight, default=None)
        if (least is None or least.in_flight > 0) and len(self._all) < self.processes:
            least = _Process(self._ctx)
            self._all.append(least)
        return least

    def _done(self, process: _Process) -> None:
        with self._changed:
            process.in_flight -= 1
            self._changed.notify()

    def stop(self) -> None:
        """End every process, busy ones too, then let the fork server go."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            procs, self._all = list(self._all), []
            self._changed.notify_all()
        for proc in procs:
            proc.stop()
        release_fork_server()


class _Process:
    """One claim function process, its connection, and the calls it has not answered."""

    def __init__(self, ctx: Any) -> None:
        self.in_flight = 0
        self.alive = True
        ours, theirs = ctx.Pipe()
        self._conn: Connection = ours
        self._proc = ctx.Process(target=_serve, args=(theirs,), daemon=True)
        self._proc.start()
        theirs.close()
        self._ids = itertools.count()
        self._pending: dict[int, tuple[Future[Any], Callable[[_Process], None]]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], done: Callable[[_Process], None]
    ) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            call_id = next(self._ids)
            self._pending[call_id] = (future, done)
            try:
                self._conn.send((call_id, fn, args))
            except (OSError, ValueError) as err:
                self._pending.pop(call_id, None)
                done(self)
                future.set_exception(BrokenProcessPool(f"the claim process is gone: {err}"))
        return future

    def _read(self) -> None:
        while True:
            try:
                call_id, ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future, done = self._pending.pop(call_id)
            done(self)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        # The process ended (stopped, or crashed): what it had not answered fails, as a
        # crashed Lambda's invocation does, and the next invocation gets another process.
        self.alive = False
        with self._lock:
            left, self._pending = list(self._pending.values()), {}
        for future, done in left:
            done(self)
            future.set_exception(BrokenProcessPool("the claim process ended"))

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.join(timeout=5)
        if self._proc.is_alive():  # deaf to SIGTERM (stuck in a call): never left behind
            self._proc.kill()
            self._proc.join(timeout=2)
        self._conn.close()


# ----------------------------------------------------------------- in the claim process


def _serve(conn: Connection) -> None:
    """Take invocations until the stack closes the connection, each on its own thread."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the stack ends its processes itself
    turn = _Turn()
    sending = threading.Lock()
    parked = False
    while True:
        try:
            call_id, fn, args = conn.recv()
        except (EOFError, OSError):
            return
        if not parked:  # the service is built here, after the stack exported its settings
            _park_waits(turn)
            parked = True
        threading.Thread(
            target=_run, args=(conn, sending, turn, call_id, fn, args), daemon=True
        ).start()


def _run(
    conn: Connection,
    sending: threading.Lock,
    turn: _Turn,
    call_id: int,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    with turn:
        try:
            answer: tuple[int, bool, Any] = (call_id, True, fn(*args))
        except Exception as err:
            answer = (call_id, False, err)
    with sending:
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return  # the stack is gone
        except Exception as err:  # an answer that cannot be pickled: say what it was
            conn.send((call_id, False, RuntimeError(repr(err))))


class _Turn:
    """The process's turn: whoever holds it runs handler code, alone. An invocation gives it
    up while it waits on something outside the process (its claim's sleep between looks, a
    DynamoDB call), and takes it back with its own request the resolver's current one again,
    so what the handler keeps in module state (the resolver's current event) stays its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: int | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        self._holder = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        self._holder = None
        self._lock.release()

    @contextlib.contextmanager
    def parked(self) -> Iterator[None]:
        if self._holder != threading.get_ident():  # not within an invocation: nothing to give
            yield
            return
        from aws_lambda_powertools.event_handler.api_gateway import BaseRouter
        from tenure.api.surface import app

        # Not set before the first resolve of the process (a bearer check reads the table
        # first): put back as it was, absent as None, which the next resolve replaces.
        event = getattr(BaseRouter, "current_event", None)
        context = getattr(BaseRouter, "lambda_context", None)
        routing = app.context
        app.context = {}  # the next invocation's own (a resolve clears its context in place)
        self.__exit__()
        try:
            yield
        finally:
            self.__enter__()
            setattr(BaseRouter, "current_event", event)  # noqa: B010 - typed as never None
            setattr(BaseRouter, "lambda_context", context)  # noqa: B010
            app.context = routing


class _ParkingClock:
    """The service's clock, whose sleep (a claim's wait between looks) parks."""

    def __init__(self, inner: Any, turn: _Turn) -> None:
        self.inner = inner
        self.turn = turn

    def now_ms(self) -> int:
        return int(self.inner.now_ms())

    def sleep(self, seconds: float) -> None:
        with self.turn.parked():
            self.inner.sleep(seconds)


# Reads the claim looks make, which one process's claims share (`_SharedReads`).
SHARED_READS = frozenset({"GetItem", "Query", "BatchGetItem"})
# Distinct reads a process keeps a chain for (keys, pools, tokens); past it the idle go.
MAX_SHARED_READS = 1024


class _SharedReads:
    """The identical reads of one process's waiting claims, made once for all of them.

    A waiting claim looks every half second (the scheduler row, the pool's queue) and reads its
    pool, space and instance afresh every two seconds: 200 waiting claims ask DynamoDB Local
    for about 1,100 calls a second, and two shared cores serve a few hundred, so every other
    request (a heartbeat's) queued behind the looks. Here a process's claims share them: every
    read waits for the one under way and is answered by the next, which starts after it was
    asked, so it never answers with what is older than the call. Writes
    are never shared."""

    def __init__(self, call: Callable[[str, dict[str, Any]], Any]) -> None:
        self._call = call
        self._lock = threading.Condition()
        self._chains: dict[str, _Chain] = {}

    def __call__(self, operation: str, params: dict[str, Any]) -> Any:
        if operation not in SHARED_READS:
            return self._call(operation, params)
        key = f"{operation} {json.dumps(params, sort_keys=True, default=str)}"
        return copy.deepcopy(self._shared(key, operation, params))

    def _shared(self, key: str, operation: str, params: dict[str, Any]) -> Any:
        with self._lock:
            chain = self._chains.get(key)
            if chain is None:
                if len(self._chains) >= MAX_SHARED_READS:  # bounded: idle chains go first
                    for idle in [k for k, c in self._chains.items() if not c.running]:
                        del self._chains[idle]
                chain = self._chains[key] = _Chain()
            # Only a read that starts from now on, eventually consistent or not: an answer
            # older than the call let a claim take a lease blocked or paused a moment before
            # (the end-to-end tier saw both), which DynamoDB's own lag makes rare, not routine.
            wanted = chain.started + 1
            while chain.done < wanted:
                if not chain.running:
                    chain.running = True
                    chain.started += 1
                    mine = chain.started
                    self._lock.release()
                    try:
                        answer: tuple[bool, Any] = (True, self._call(operation, params))
                    except Exception as err:
                        answer = (False, err)
                    finally:
                        self._lock.acquire()
                    chain.running = False
                    chain.done, chain.answer, chain.done_at = mine, answer, time.monotonic()
                    self._lock.notify_all()
                else:
                    self._lock.wait()
            ok, value = chain.answer
        if not ok:
            raise value
        return value


class _Chain:
    """One consistent read's requests, one at a time: the last started, the last answered."""

    def __init__(self) -> None:
        self.started = 0
        self.done = 0
        self.running = False
        self.answer: tuple[bool, Any] = (False, None)
        self.done_at = float("-inf")


def _park_waits(turn: _Turn) -> None:
    """The service of this process parks its invocation while its claims sleep and while it
    waits for DynamoDB (run one at a time, the looks of a process's many waiting claims queued
    behind each other and made them late), and shares its claims' identical reads."""
    from tenure import wiring

    # The claim function's own service: the worker's use cases composed alone (api/worker.py).
    service = wiring.worker_service()
    kernel = service.kernel
    kernel.clock = _ParkingClock(kernel.clock, turn)
    # Every port of the adapter shares one table, and the table one client.
    client = getattr(getattr(service.rows.committer, "table", None), "client", None)
    if client is not None:
        shared = _SharedReads(client._make_api_call)

        def parked_call(operation: str, params: dict[str, Any]) -> Any:
            with turn.parked():
                return shared(operation, params)

        client._make_api_call = parked_call
