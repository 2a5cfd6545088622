"""The traced path of one request: how many service functions, files and store calls a
`complete` and a claim go through, measured the same way every time.

One request is driven through `api.handle` on the unit rig (the in-memory fake store, the
manual clock) under `sys.setprofile`. What counts:

* a service call: a Python function entered whose code file is under `layers/core/tenure`.
  Not counted: C functions, a generator or coroutine resuming (only its first entry), and
  comprehension and generator-expression frames (`<listcomp>`, `<genexpr>`...). Calls of the
  fake store, pydantic, Powertools and the standard library are not service calls, but a
  service function they call back into is. Nor are the methods a record is given
  (records.py: its constructor's writes, equality, hash, repr), which stand for the
  ones `dataclass` compiles from text, whose code has no file under the service either.
* the files: the distinct files of the service calls, listed in order of first entry.
* a move: a service call in another file than the service call before it (in the order the
  calls start; a.py calls b.py, which returns, then a.py calls a.py: two moves, the second a
  return). A return to a file already left: a move into a file an earlier service call was in.
* store reads and writes: the fake store's public methods entered from outside the fake
  (a method the fake calls on itself is part of that one call). A write is a method named in
  `WRITES` (every method of the fake that changes a row); any other method is a read.

The stream's reactions, which the rig plays inside each commit, are held back while the
request runs and played after the trace: they run later, from the table's stream, and are not
part of the request's path.

Run `.venv/bin/python -m tests.unit.paths` for today's figures.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import tenure
from tenure import wiring
from tenure.api import app as api
from tenure.domain.model import Principal
from tenure_cli.local.frontdoor import to_event

from tests.unit.support import WORKER, Rig, as_lease

SERVICE = str(Path(tenure.__file__).resolve().parent) + "/"  # layers/core/tenure/
RECORDS = SERVICE + "records.py"  # a record's methods, not service calls
FAKES = frozenset(str(Path(__file__).with_name(n)) for n in ("fake_store.py", "fake_rules.py"))
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
RESUMABLE = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR

# The fake store's methods that change a row (every other public method only reads).
WRITES = frozenset(
    {
        "commit", "count_edge", "count_firing", "count_log_containers", "delete_address",
        "delete_attachments", "delete_rule", "drop_event_wait", "drop_request",
        "finish_request", "free_wait_slot", "keep_detail", "keep_signal_secret", "key_task",
        "list_space", "list_token", "mark_children", "mark_keeps_detail", "mark_queue",
        "mark_reclaimed",
        "move_deadline", "next_task_number", "note_firing", "note_worker", "point_claim",
        "put_address",
        "put_anchor", "put_attachment", "put_event", "put_event_record", "put_event_wait",
        "put_kept_event", "put_pool", "put_rule", "put_space", "put_sweeper_state",
        "put_token", "put_workflow", "reindex", "renew", "replace_rule",
        "revoke_token", "save_schema", "set_attachment_status", "set_scheduler_paused",
        "settle_graph", "take_request", "take_wait_slot", "touch_token", "unindex_ended",
        "unmark_queue", "update_instance", "update_pool", "update_space", "void_task",
        "write_pool_gates",
    }
)  # fmt: skip

COMPLETE_BODY = {"usage": {"input_tokens": 1200, "output_tokens": 300}, "result": "done"}
CLAIM_PATH = "/pools/builders/claim"  # the rig's pool
CACHE_EXPIRED_S = 60  # longer than the service's 30-second cache of pool and space rows


@dataclass
class Trace:
    """What one request went through (see the module's docstring for what counts)."""

    status: int = 0
    calls: int = 0
    files: list[str] = field(default_factory=list)
    moves: int = 0
    returns: int = 0
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    def lines(self, title: str) -> list[str]:
        return [
            f"{title} (HTTP {self.status})",
            f"  service calls {self.calls}, files {len(self.files)}, "
            f"moves between files {self.moves}, returns to a file already left {self.returns}",
            f"  store reads {len(self.reads)}: {', '.join(self.reads) or '-'}",
            f"  store writes {len(self.writes)}: {', '.join(self.writes) or '-'}",
            "  files in order of first entry:",
            *(f"    {name}" for name in self.files),
        ]


class _Tracer:
    """The profile function: counts the service calls and the store calls as they start."""

    def __init__(self) -> None:
        self.trace = Trace()
        self.started: set[int] = set()  # resumable frames already entered once
        self.alive: list[FrameType] = []  # keeps those frames' ids from being reused
        self.last: str | None = None  # the file of the previous service call

    def __call__(self, frame: FrameType, event: str, _: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_flags & RESUMABLE:
            if id(frame) in self.started:
                return  # a generator resuming, not a new call
            self.started.add(id(frame))
            self.alive.append(frame)
        name = code.co_filename
        if name in FAKES:
            self.store_call(frame)
        elif name.startswith(SERVICE) and name != RECORDS and code.co_name not in COMPREHENSIONS:
            self.service_call(name[len(SERVICE) - len("tenure/") :])

    def store_call(self, frame: FrameType) -> None:
        caller = frame.f_back
        inside = caller is not None and caller.f_code.co_filename in FAKES
        name = frame.f_code.co_name
        if not inside and not name.startswith("_"):
            (self.trace.writes if name in WRITES else self.trace.reads).append(name)

    def service_call(self, short: str) -> None:
        trace = self.trace
        trace.calls += 1
        if self.last is not None and short != self.last:
            trace.moves += 1
            trace.returns += short in trace.files
        if short not in trace.files:
            trace.files.append(short)
        self.last = short


@contextmanager
def _served(rig: Rig) -> Iterator[None]:
    """`api.handle` answering from the rig's service."""
    before = wiring.service
    wiring.service = lambda: rig.svc  # type: ignore[assignment]
    try:
        yield
    finally:
        wiring.service = before


def _event(method: str, path: str, body: Any, actor: Principal) -> dict[str, Any]:
    raw = json.dumps(body).encode() if body is not None else b""
    event = to_event(method, f"/api/v1{path}", {"host": "unit"}, raw)
    principal = json.dumps(dataclasses.asdict(actor))
    event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
    return event


def answer(rig: Rig, method: str, path: str, body: Any, actor: Principal) -> None:
    """One request through `api.handle`, not traced (a warm-up): it must succeed."""
    with _served(rig):
        out = api.handle(_event(method, path, body, actor), None)
    if out["statusCode"] != 200:
        raise AssertionError(f"{method} {path} answered {out['statusCode']}: {out.get('body')}")


def trace(rig: Rig, method: str, path: str, body: Any, actor: Principal) -> Trace:
    """One request through `api.handle`, profiled; the stream's reactions played after."""
    event = _event(method, path, body, actor)
    held: list[Any] = []
    react: Callable[[Any], None] | None = rig.store.reactor
    rig.store.reactor = held.append
    tracer = _Tracer()
    with _served(rig):
        sys.setprofile(tracer)
        try:
            out = api.handle(event, None)
        finally:
            sys.setprofile(None)
            rig.store.reactor = react
    if react is not None:
        for rows in held:
            react(rows)
    tracer.trace.status = int(out["statusCode"])
    return tracer.trace


def trace_complete(rig: Rig | None = None) -> Trace:
    """A lease token's complete: a command pool that does not retry (the rig's own), a task
    with no parent, the pool row in the warm cache (the claim just read it, the clock has not
    moved). As on a warm Lambda, one complete of another lease has run before it: the first
    request of a process fills the API's per-route caches and would count those calls too."""
    rig = rig or Rig()
    warm = rig.claimed("w0").lease.id
    answer(rig, "POST", f"/leases/{warm}/complete", COMPLETE_BODY, as_lease(warm))
    lease_id = rig.claimed("w1").lease.id
    path = f"/leases/{lease_id}/complete"
    return trace(rig, "POST", path, COMPLETE_BODY, as_lease(lease_id))


def trace_claim(rig: Rig | None = None) -> Trace:
    """A worker's claim of the next lease, no claim_id, the pool cache expired; after one
    claim by another worker (the warm process, as for the complete)."""
    rig = rig or Rig()
    rig.task()
    answer(rig, "POST", CLAIM_PATH, {"worker_id": "w0"}, WORKER)
    rig.task()
    rig.advance(CACHE_EXPIRED_S)
    return trace(rig, "POST", CLAIM_PATH, {"worker_id": "w1"}, WORKER)


def trace_fail_retrying(rig: Rig | None = None) -> Trace:
    """A lease token's failure report on a pool that retries failures (not warmed)."""
    rig = rig or Rig()
    rig.make_pool("retrying", retry={"on_failure": True})
    lease_id = rig.claimed(pool="retrying").lease.id
    path = f"/leases/{lease_id}/fail"
    return trace(rig, "POST", path, {"error": "broke"}, as_lease(lease_id))


def main() -> None:
    complete = trace_complete()
    claim = trace_claim()
    print("\n".join(complete.lines("POST /api/v1/leases/{id}/complete, lease token")))
    print("\n".join(claim.lines("POST /api/v1/pools/{pool}/claim, no claim_id")))


if __name__ == "__main__":
    main()
