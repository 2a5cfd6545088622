"""Feature gates on the schema version the table's data is at: a behaviour a release of the
service brings starts only once no earlier release that would misread it may still be
serving."""

from __future__ import annotations

from typing import Any

from tenure.app.catalog import POOL_CACHE_MS
from tenure.app.migrations import (
    CLAIM_START_FROM_SCHEMA,
    CREATED_STAMPS_FROM_SCHEMA,
    DERIVED_RECLAIMS_FROM_SCHEMA,
    IMPLIED_JOBS_FROM_SCHEMA,
    LISTED_BY_TASK_FROM_SCHEMA,
    SCHEMA_VERSION,
    STAMPS_FROM_SCHEMA,
    SUCCESSES_DERIVED_FROM_SCHEMA,
    UNTRANSACTED_FILING_FROM_SCHEMA,
    WORKER_SIGNALS_FROM_SCHEMA,
)
from tenure.app.ports import Clock
from tenure.app.rows import SchemaRows
from tenure.domain.timeline import first_stamps


class SchemaGates:
    def __init__(self, schema: SchemaRows, clock: Clock) -> None:
        self.schema = schema
        self.clock = clock
        self._schema_at: tuple[int, int] | None = None

    def first_stamps(self, subject_kind: str) -> dict[str, Any] | None:
        """A new lease's stamps (domain/timeline.py), or None while the table's schema is
        below STAMPS_FROM_SCHEMA (app/migrations.py): every event of that lease is then a
        timeline row, as an earlier release wrote it."""
        return first_stamps(subject_kind) if self._schema() >= STAMPS_FROM_SCHEMA else None

    def claims_may_start(self) -> bool:
        """Whether a claim may start its lease in the same write: not while the table's schema
        is below CLAIM_START_FROM_SCHEMA (app/migrations.py), when a reactor of an earlier
        release may still be reading the stream."""
        return self._schema() >= CLAIM_START_FROM_SCHEMA

    def first_lease_stamped(self) -> bool:
        """Whether a task's first lease, made with the task, may keep its creation as a stamp
        (domain/timeline.py CREATED_STAMP): not while the table's schema is below
        CREATED_STAMPS_FROM_SCHEMA, when a timeline read of an earlier release, which finds
        leases only by their anchors, may still be serving."""
        return self._schema() >= CREATED_STAMPS_FROM_SCHEMA

    def files_untransacted(self) -> bool:
        """Whether filing may write a task's first lease (marked task-pending) and then the
        task, each on its own: not while the table's schema is below
        UNTRANSACTED_FILING_FROM_SCHEMA, when a claim of an earlier release, which does not
        know the mark, may still be serving."""
        return self._schema() >= UNTRANSACTED_FILING_FROM_SCHEMA

    def first_jobs_implied(self) -> bool:
        """Whether a task's first job, opened with the task, may go without a row
        (domain/model.py first_job_id): not while the table's schema is below
        IMPLIED_JOBS_FROM_SCHEMA, when an earlier release, which finds a task's lease
        through its job's row, may still be serving."""
        return self._schema() >= IMPLIED_JOBS_FROM_SCHEMA

    def first_leases_listed_by_task(self) -> bool:
        """Whether a task's first lease, made with the task, may go without an entry in the
        space's lease list (its task's entry lists it): not while the table's schema is below
        LISTED_BY_TASK_FROM_SCHEMA, when a lease list of an earlier release, which reads the
        lease entries only, may still be serving."""
        return self._schema() >= LISTED_BY_TASK_FROM_SCHEMA

    def successes_derived(self) -> bool:
        """Whether the success of a task nothing is linked to may stay its lease's, with no
        graph row written for it: not while the table's schema is below
        SUCCESSES_DERIVED_FROM_SCHEMA, when an earlier release, which reads a task's success
        only from its graph row and links to a task without checking its lease, may still
        be serving."""
        return self._schema() >= SUCCESSES_DERIVED_FROM_SCHEMA

    def derived_reclaims(self) -> bool:
        """Whether a lease may end without entering the ended index when it has no logs and
        no attachments (reclaimed by derivation: domain/model.py derived_reclaimed_at): not
        while the table's schema is below DERIVED_RECLAIMS_FROM_SCHEMA, when an earlier
        release, which reads a lease as reclaimed only once its sweeper has marked it, and
        finds what to mark only in that index, may still be serving."""
        return self._schema() >= DERIVED_RECLAIMS_FROM_SCHEMA

    def worker_signals(self) -> bool:
        """Whether every write a worker heartbeat must report raises the holder's signal epoch
        (domain/signals.py), so that a heartbeat may trust it: not while the table's schema
        is below WORKER_SIGNALS_FROM_SCHEMA, when a writer of an earlier release, which does
        not raise it, may still be serving."""
        return self._schema() >= WORKER_SIGNALS_FROM_SCHEMA

    def _schema(self) -> int:
        """The schema version the data is at, read once per POOL_CACHE_MS like the pools. A
        table no release has migrated (a new stack) is at this release's version: no earlier
        release shares it. The version only rises, and every gate asks for at least one: once
        the data is at this release's version it is not read again."""
        now = self.clock.now_ms()
        known = self._schema_at
        if known is None or (now - known[0] >= POOL_CACHE_MS and known[1] < SCHEMA_VERSION):
            state = self.schema.schema_state()
            version = SCHEMA_VERSION if state.step == 0 else state.version
            known = self._schema_at = (now, version)
        return known[1]
