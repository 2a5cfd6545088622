"""Helpers of the unit tier: principals, predictable ids, and a service on the fake store."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter
from tenure.app.leases.claims import Claimed
from tenure.app.rows import Rows
from tenure.app.sweep import SweepReport
from tenure.app.tenure import Tenure, compose
from tenure.domain.model import Event, Lease, Pool, Principal, Task
from tenure.domain.states import LeaseState, PoolKind, SubjectKind
from tenure.wiring import ManualClock

from tests.unit.fake_store import FakeStore

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SPACE = "OPS"
POOL = "builders"

ADMIN = Principal(kind="operator", token_id="tok-admin", role="admin")
MEMBER = Principal(kind="operator", token_id="tok-member", role="member")
READER = Principal(kind="operator", token_id="tok-read", role="read")
WORKER = Principal(kind="worker", token_id="tok-worker")


def as_lease(lease_id: str) -> Principal:
    """The principal the authorizer makes of a lease token."""
    return Principal(kind="lease", token_id="abcd1234", lease_id=lease_id)


class SeqIds:
    """Ids in creation order (so ties sort predictably); secrets stay really random."""

    def __init__(self) -> None:
        self.count = 0

    def new_id(self, prefix: str) -> str:
        # Led by a 1, as a random id is by the time in hex: after a task's derived ids.
        self.count += 1
        return f"{prefix}_1{self.count:06d}"

    def secret(self) -> str:
        return secrets.token_urlsafe(24)

    def shuffle(self, items: list[str]) -> list[str]:
        return list(items)

    def jitter(self) -> float:
        return 0.0  # no back-off: the fake clock stays where the test put it


@dataclass
class Rig:
    """A space OPS with a pool `builders` (default timings) on a fake store and a manual clock."""

    store: FakeStore = field(default_factory=FakeStore)
    clock: ManualClock = field(default_factory=lambda: ManualClock(T0))
    ids: SeqIds = field(default_factory=SeqIds)
    svc: Tenure = field(init=False)

    def __post_init__(self) -> None:
        self.svc = compose(Rows.of(self.store, self.store), self.clock, self.ids)
        # The stream's reactions (the whole table), played inside each commit.
        self.store.reactor = self.svc.reactions.react_to_rows
        self.svc.spaces.create_space(ADMIN, SPACE, "Operations", None)
        self.make_pool(POOL)

    def make_pool(self, name: str, **settings: Any) -> Pool:
        pool = Pool(name=name, space=SPACE, kind=PoolKind.COMMAND, created_at=0, **settings)
        return self.svc.pools.create_pool(ADMIN, pool)

    def task(self, pool: str | None = POOL, **kw: Any) -> tuple[Task, Lease | None]:
        args: dict[str, Any] = {
            "title": "Build it",
            "workflow": None,
            "body": "make all",
            "properties": {},
            "max_attempts": None,
            **kw,
        }
        return self.svc.filing.create_task(MEMBER, SPACE, pool=pool, **args)

    def claim(
        self,
        worker_id: str = "w1",
        pool: str = POOL,
        lease_seconds: int | None = None,
        wait_seconds: float = 0,
    ) -> Claimed:
        won = self.svc.claims.claim(WORKER, pool, worker_id, "1.0", wait_seconds, lease_seconds)
        assert won is not None, "expected a claimable lease"
        return won

    def claimed(self, worker_id: str = "w1", pool: str = POOL, **task: Any) -> Claimed:
        """A new task, enqueued on `pool` and claimed by `worker_id`."""
        self.task(pool=pool, **task)
        return self.claim(worker_id, pool)

    def running(self, worker_id: str = "w1", pool: str = POOL, **task: Any) -> Lease:
        won = self.claimed(worker_id, pool, **task)
        return self.svc.reports.start(as_lease(won.lease.id), won.lease.id)

    def lease(self, lease_id: str) -> Lease:
        found = self.store.get_lease(lease_id)
        assert found is not None
        return found

    def events(self, task_id: str) -> list[Event]:
        return self.store.timeline("task", task_id, None)

    def types(self, task_id: str) -> list[str]:
        return [e.type for e in self.events(task_id)]

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def sweep(self) -> SweepReport:
        return self.svc.sweep.once()

    def system_events(self) -> list[Event]:
        return self.store.timeline("system", "sweeper", None)


def settings_reads(rig: Rig) -> list[str]:
    """Each read of a pool, space or instance row the rig's store is asked for, from now on."""
    reads: list[str] = []
    for name in ("get_pool", "get_space", "get_instance"):
        real = getattr(rig.store, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            reads.append(_name)
            return _real(*args, **kw)

        setattr(rig.store, name, counted)
    return reads


def make_lease(lease_id: str, at: int = T0, **kw: Any) -> Lease:
    """A lease row built by hand (store and view tests)."""
    base: dict[str, Any] = {
        "id": lease_id,
        "job_id": "job_1",
        "space": SPACE,
        "pool": "p",
        "subject_kind": SubjectKind.TASK,
        "subject_id": "task_1",
        "task_id": "task_1",
        "state": LeaseState.PENDING,
        "fence": 1,
        "attempt": 1,
        "created_at": at,
    }
    base.update(kw)
    return Lease(**base)


def queued(rig: Rig) -> Lease:
    """A new task's pending lease."""
    _, lease = rig.task()
    assert lease is not None
    return lease


def queued_code(rig: Rig, lease: Lease) -> str | None:
    """The queued condition's code the lease reads now (None when it has none)."""
    found = rig.svc.conditions.queued_condition_of(rig.lease(lease.id))
    return found.code if found else None


def with_artifacts(rig: Rig) -> Rig:
    """The rig with in-memory attachments and logs (fake S3 and CloudWatch Logs)."""
    from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink

    rig.svc.artifacts.blobs = FakeBlobs(rig.clock.now_ms)
    rig.svc.artifacts.log_sink = FakeLogSink()
    return rig


def shaped(shape: Any, data: Any) -> Any:
    """`data` validated against an answer's shape (api/models/), as the OpenAPI document
    describes it: closed, so a key the shape does not name fails. The validated dict."""
    return TypeAdapter(shape).validate_python(data)


def schema_of(shape: Any) -> dict[str, Any]:
    """An answer shape's JSON Schema, as the OpenAPI document shows it."""
    schema: dict[str, Any] = TypeAdapter(shape).json_schema()
    return schema


def emitted_metrics(out: str) -> dict[str, float]:
    """The metrics of the EMF documents a function printed, by name (Powertools writes a
    metric's values as a list; they are summed)."""
    docs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    values = {
        m["Name"]: doc[m["Name"]]
        for doc in docs
        for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    }
    return {name: sum(v) if isinstance(v, list) else v for name, v in values.items()}
