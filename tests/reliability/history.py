"""What a reliability run recorded: operations on the wire, holds, and the service's truth."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

# The operations a worker performs on a lease (a batched heartbeat is one per lease it names).
REPORTS = ("start", "heartbeat", "complete", "fail", "release")
FINAL = ("complete", "fail", "release")

# The status a refusal inside a batched heartbeat's answer would have had on its own.
BATCHED_STATUS = {
    "stale_lease": 409,
    "invalid_transition": 409,
    "lease_not_found": 404,
    "forbidden": 403,
    "unavailable": 503,
}

_LEASE_ROUTE = re.compile(r"/api/v1/leases/([^/]+)/([a-z_]+)$")
_CLAIM_ROUTE = re.compile(r"/api/v1/pools/([^/]+)/claim$")
_WORKER_BEAT = re.compile(r"/api/v1/workers/([^/]+)/heartbeat$")


@dataclass
class Exchange:
    """One HTTP request a worker sent through the fault proxy, and what became of it.

    `fate`: delivered (the worker got the answer), delayed (got it late), dropped (the service
    answered, the worker never heard), cut (never forwarded: the service never saw it)."""

    worker: str
    method: str
    path: str
    start: float  # wall clock (time.time()) the request reached the proxy
    end: float  # wall clock the answer was handed on, or the connection closed
    fate: str
    status: int | None = None  # the service's status (None when it never answered)
    request: Any = None
    response: Any = None


@dataclass
class Op:
    """One operation on one lease (or a claim), derived from an exchange."""

    worker: str
    kind: str  # claim | start | heartbeat | complete | fail | release | payload
    start: float
    end: float
    fate: str
    status: int | None
    code: str | None = None  # the error code, when refused
    lease_id: str | None = None
    task_id: str | None = None
    fence: int | None = None
    outcome: str | None = None  # complete's outcome (success by default)
    batched: bool = False  # part of POST /workers/{id}/heartbeat

    @property
    def acknowledged(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class Hold:
    """An interval in which a worker acted as the holder of a lease (its job was running)."""

    worker: str
    lease_id: str
    task_id: str
    fence: int
    start: float
    end: float


@dataclass
class LeaseTruth:
    id: str
    task_id: str
    job_id: str
    fence: int
    state: str
    end_reason: str | None
    outcome: str | None
    created_at: float | None
    ended_at: float | None


@dataclass
class TaskTruth:
    id: str
    status: str
    events: list[dict[str, Any]] = field(default_factory=list)  # the timeline, oldest first


@dataclass
class Truth:
    tasks: dict[str, TaskTruth]
    leases: dict[str, LeaseTruth]


def stamp(iso: str | None) -> float | None:
    """An API timestamp (…Z, ms) as epoch seconds."""
    if iso is None:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def lease_truth(view: dict[str, Any]) -> LeaseTruth:
    timing = view["timing"]
    return LeaseTruth(
        id=view["id"],
        task_id=(view.get("task") or {}).get("id", ""),
        job_id=view["job_id"],
        fence=int(view["fence"]),
        state=view["state"],
        end_reason=view.get("end_reason"),
        outcome=view.get("outcome"),
        created_at=stamp(timing.get("created_at")),
        ended_at=stamp(timing.get("ended_at")),
    )


def _error_code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        return str(code) if code is not None else None
    return None


def derive(exchanges: list[Exchange], lease_tasks: dict[str, str]) -> list[Op]:
    """The per-lease operations in the exchanges; `lease_tasks` maps lease → task (the
    claims' answers fill it in further)."""
    ops: list[Op] = []
    fences: dict[str, int] = {}
    for ex in sorted(exchanges, key=lambda e: e.start):
        base = {"worker": ex.worker, "start": ex.start, "end": ex.end, "fate": ex.fate}
        if _CLAIM_ROUTE.search(ex.path):
            op = Op(kind="claim", status=ex.status, code=_error_code(ex.response), **base)
            if ex.status == 200 and isinstance(ex.response, dict):
                lease = ex.response["lease"]
                op.lease_id, op.fence = lease["id"], int(ex.response["fence"])
                op.task_id = (lease.get("task") or {}).get("id")
                if op.task_id:
                    lease_tasks[op.lease_id] = op.task_id
                fences[op.lease_id] = op.fence
            ops.append(op)
            continue
        if _WORKER_BEAT.search(ex.path):
            named = (ex.request or {}).get("leases") or [] if isinstance(ex.request, dict) else []
            answers = {}
            if ex.status == 200 and isinstance(ex.response, dict):
                answers = {a["id"]: a for a in ex.response.get("leases", [])}
            for entry in named:
                lease_id = entry["id"]
                answer = answers.get(lease_id)
                status, code = ex.status, _error_code(ex.response)
                if answer is not None and "error" in answer:
                    code = answer["error"]["code"]
                    status = BATCHED_STATUS.get(code, 400)
                ops.append(
                    Op(
                        kind="heartbeat",
                        status=status,
                        code=code,
                        lease_id=lease_id,
                        fence=int(entry["fence"]),
                        batched=True,
                        **base,
                    )
                )
            continue
        found = _LEASE_ROUTE.search(ex.path)
        if found is None:
            continue
        lease_id, kind = found.group(1), found.group(2)
        if kind not in (*REPORTS, "payload"):
            continue
        outcome = None
        if kind == "complete":
            body = ex.request if isinstance(ex.request, dict) else {}
            outcome = body.get("outcome") or "success"
        ops.append(
            Op(
                kind=kind,
                status=ex.status,
                code=_error_code(ex.response),
                lease_id=lease_id,
                outcome=outcome,
                **base,
            )
        )
    for op in ops:
        if op.lease_id is not None:
            op.task_id = op.task_id or lease_tasks.get(op.lease_id)
            if op.fence is None:
                op.fence = fences.get(op.lease_id)
    return ops


class Journal:
    """A thread-safe list of exchanges and holds, also appended to a JSON-lines file."""

    def __init__(self, path: str | None = None) -> None:
        self.exchanges: list[Exchange] = []
        self.holds: list[Hold] = []
        self.lock = threading.Lock()
        self.path = path

    def exchange(self, ex: Exchange) -> None:
        with self.lock:
            self.exchanges.append(ex)
            self._write({"exchange": asdict(ex)})

    def hold(self, hold: Hold) -> None:
        with self.lock:
            self.holds.append(hold)
            self._write({"hold": asdict(hold)})

    def _write(self, row: dict[str, Any]) -> None:
        if self.path is not None:
            with open(self.path, "a") as out:
                out.write(json.dumps(row) + "\n")
