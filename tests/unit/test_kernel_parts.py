"""The kernel's parts on their own: the successor lease (pure), the catalog's three read
policies, and the schema gates."""

from __future__ import annotations

from collections import Counter

import pytest
from tenure.app.catalog import POOL_CACHE_MS, Catalog, SchemaGates, one_request
from tenure.app.migrations import (
    CLAIM_START_FROM_SCHEMA,
    SCHEMA_VERSION,
    SchemaState,
)
from tenure.domain.errors import NotFound, ValidationFailed
from tenure.domain.model import Instance, Job, Lease, Pool, PoolKind, Space
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.transitions import successor_of
from tenure.wiring import ManualClock

from tests.unit.support import T0


def _lease(**fields: object) -> Lease:
    base: dict[str, object] = {
        "id": "lease_1",
        "job_id": "job_1",
        "space": "S",
        "pool": "p",
        "subject_kind": SubjectKind.TASK,
        "subject_id": "task_1",
        "state": LeaseState.LOST,
        "fence": 3,
        "attempt": 2,
        "created_at": T0,
    }
    return Lease(**{**base, **fields})  # type: ignore[arg-type]


def _job(**fields: object) -> Job:
    base: dict[str, object] = {
        "id": "job_1",
        "space": "S",
        "pool": "p",
        "subject_kind": SubjectKind.TASK,
        "subject_id": "task_1",
        "created_at": T0,
        "lease_id": "lease_1",
        "fence": 3,
        "attempt": 2,
    }
    return Job(**{**base, **fields})  # type: ignore[arg-type]


# ------------------------------------------------------------------------- successor_of


def test_a_successor_is_the_jobs_next_pending_lease_under_the_next_fence() -> None:
    lease = _lease(priority=5, expires_in_seconds=30, retry_depth=1)
    nxt, job = successor_of(lease, _job(), T0 + 10, "lease_2", False, None)
    assert (nxt.id, nxt.state, nxt.fence, nxt.attempt) == ("lease_2", LeaseState.PENDING, 4, 2)
    assert nxt.previous_lease_id == "lease_1" and nxt.priority == 5 and nxt.retry_depth == 1
    assert nxt.queue_expires_at == T0 + 10 + 30_000  # its queue timeout counts from now
    assert nxt.event_data == {"previous_lease_id": "lease_1", "recovered": False}
    assert (job.fence, job.lease_id, job.recovery_count) == (4, "lease_2", 0)


def test_only_a_recovered_successor_counts_a_recovery_and_none_waits_without_a_timeout() -> None:
    nxt, job = successor_of(_lease(), _job(recovery_count=2), T0, "lease_2", True, {"n": 1})
    assert job.recovery_count == 3
    assert nxt.queue_expires_at is None and nxt.tl == {"n": 1}


# ------------------------------------------------------------------------------ catalog


class Rows:
    """Pool and space rows that count their reads."""

    def __init__(self) -> None:
        self.reads: Counter[str] = Counter()
        self.pool_row = Pool(name="p", space="S", kind=PoolKind.COMMAND, created_at=0)

    def get_pool(self, name: str) -> Pool | None:
        self.reads["pool"] += 1
        return self.pool_row if name == "p" else None

    def get_space(self, key: str) -> Space | None:
        self.reads["space"] += 1
        return Space(key=key, name=key, created_at=0) if key == "S" else None

    def get_instance(self) -> Instance:
        self.reads["instance"] += 1
        return Instance()


def _catalog() -> tuple[Catalog, Rows, ManualClock]:
    rows, clock = Rows(), ManualClock(T0)
    return Catalog(rows, rows, clock), rows, clock  # type: ignore[arg-type]


def test_the_cached_pool_is_read_again_only_once_its_copy_is_old() -> None:
    catalog, rows, clock = _catalog()
    catalog.pool("p")
    clock.advance((POOL_CACHE_MS - 1) / 1000)
    catalog.pool("p")
    assert rows.reads["pool"] == 1
    clock.advance(0.001)
    catalog.pool("p")
    assert rows.reads["pool"] == 2


def test_a_fresh_read_always_reads_and_refreshes_the_cache() -> None:
    catalog, rows, _ = _catalog()
    catalog.pool("p")
    catalog.fresh_pool("p")
    catalog.pool("p")
    assert rows.reads["pool"] == 2


def test_the_requests_read_is_taken_once_read_fresh_in_that_request_only() -> None:
    catalog, rows, _ = _catalog()
    with one_request():
        catalog.fresh_pool("p")
        catalog.request_pool("p")
        catalog.request_space("S")
        catalog.request_space("S")
    assert rows.reads == Counter({"pool": 1, "space": 1})
    catalog.request_pool("p")  # outside a request: read fresh every time
    catalog.request_pool("p")
    assert rows.reads["pool"] == 3


def test_a_missing_or_overlong_name_is_refused_without_reading_an_overlong_one() -> None:
    catalog, rows, _ = _catalog()
    with pytest.raises(NotFound):
        catalog.pool("nope")
    with pytest.raises(NotFound):
        catalog.pool("x" * 10_000)
    assert rows.reads["pool"] == 1
    with pytest.raises(ValidationFailed):
        catalog.pool_in_space("p", "OTHER")  # another space's pool is refused


# -------------------------------------------------------------------------- schema gates


class Schema:
    def __init__(self, version: int, step: int) -> None:
        self.state = SchemaState(version=version, step=step)
        self.reads = 0

    def schema_state(self) -> SchemaState:
        self.reads += 1
        return self.state


def test_a_gate_stays_shut_below_its_version_and_the_version_is_read_once_per_window() -> None:
    schema, clock = Schema(CLAIM_START_FROM_SCHEMA - 1, step=3), ManualClock(T0)
    gates = SchemaGates(schema, clock)
    assert not gates.claims_may_start()
    assert schema.reads == 1
    schema.state = SchemaState(version=SCHEMA_VERSION, step=4)
    assert not gates.claims_may_start()  # still this window's version
    clock.advance(POOL_CACHE_MS / 1000)
    assert gates.claims_may_start()
    assert schema.reads == 2


def test_a_table_no_release_migrated_is_at_this_releases_version() -> None:
    gates = SchemaGates(Schema(0, step=0), ManualClock(T0))
    assert gates.claims_may_start() and gates.derived_reclaims()
