"""Explicit mapping between domain entities and table rows (attributes only, no keys)."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, TypeVar

from tenure.app.ports import Attachment, ClaimRecord
from tenure.domain.model import (
    Event,
    Instance,
    Job,
    Lease,
    Pool,
    PoolVersion,
    Space,
    Task,
    TaskGraph,
    Token,
    Worker,
    Workflow,
)
from tenure.domain.states import (
    EndReason,
    LeaseState,
    OnExpiry,
    PoolKind,
    ReportKind,
    Revoke,
    SubjectKind,
)
from tenure.store.keys import ENDED_PK

T = TypeVar("T")

# Attributes whose stored string is an enum member in the entity.
_ENUMS: dict[str, type[Enum]] = {
    "state": LeaseState,
    "subject_kind": SubjectKind,
    "kind": PoolKind,
    "on_expiry": OnExpiry,
    "end_reason": EndReason,
    "revoke": Revoke,
    "report_kind": ReportKind,
}
# Attributes kept as tuples in entities (lists in rows).
_TUPLES = {
    "spaces",
    "pools",
    "counted",
    "ancestors",
    "depends_on",
    "lineage",
    "accepts_delegation_from",
    "shunned",
}


def _row(entity: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if value is None or (value == {} and f.name == "data"):
            continue
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, tuple):
            value = list(value)
        row[f.name] = value
    return row


def _from(cls: type[T], row: dict[str, Any], enums: dict[str, type[Enum]] | None = None) -> T:
    enums = _ENUMS if enums is None else enums
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for name, value in row.items():
        if name not in names:
            continue
        if name in enums and value is not None:
            value = enums[name](value)
        elif name in _TUPLES and value is not None:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def space_item(space: Space) -> dict[str, Any]:
    return {"entity": "space", **_row(space)}


def space_from(row: dict[str, Any]) -> Space:
    return _from(Space, row)


def workflow_item(wf: Workflow) -> dict[str, Any]:
    return {"entity": "workflow", **_row(wf)}


def workflow_from(row: dict[str, Any]) -> Workflow:
    return _from(Workflow, row)


def pool_item(pool: Pool) -> dict[str, Any]:
    return {"entity": "pool", **_row(pool)}


def pool_from(row: dict[str, Any]) -> Pool:
    return _from(Pool, row)


def token_item(token: Token) -> dict[str, Any]:
    row = _row(token)
    # `expires_at` is the table's TTL attribute (epoch seconds); a token's end, in ms, is
    # kept under its own name so TTL never deletes a token (its listing shows it expired).
    if "expires_at" in row:
        row["token_expires_at"] = row.pop("expires_at")
    return {"entity": "token", **row}


def token_from(row: dict[str, Any]) -> Token:
    # A token's `kind` is operator/worker, not a pool kind.
    row = {k: v for k, v in row.items() if k != "expires_at"}
    if "token_expires_at" in row:
        row["expires_at"] = row.pop("token_expires_at")
    return _from(Token, row, enums={})


def task_item(task: Task) -> dict[str, Any]:
    return {"entity": "task", **_row(task)}


def task_from(row: dict[str, Any]) -> Task:
    return _from(Task, row)


def job_item(job: Job) -> dict[str, Any]:
    return {"entity": "job", **_row(job)}


def job_from(row: dict[str, Any]) -> Job:
    return _from(Job, row)


def lease_item(lease: Lease) -> dict[str, Any]:
    # Every byte counts: a row past 1 KB costs twice per write. A task's lease names its task
    # as its subject (subject_id is task_id), and retry_depth is mostly 0: neither is written
    # then, and lease_from gives both back. (subject_id only on a lease made with stamps: a
    # release that knows no stamps never shares a table with one, app/schema_versions.py.)
    row = {"entity": "lease", **_row(lease)}
    task_lease = lease.subject_kind == SubjectKind.TASK and lease.subject_id == lease.task_id
    if task_lease and lease.tl is not None:
        del row["subject_id"]
    if not lease.retry_depth:
        row.pop("retry_depth", None)
    # Said by the ended index's partition key (store.dynamo.commit.lease_row), never by a flag.
    row.pop("keeps_detail", None)
    return row


def lease_from(row: dict[str, Any]) -> Lease:
    if "subject_id" not in row and row.get("subject_kind") == SubjectKind.TASK.value:
        row = {**row, "subject_id": row.get("task_id")}
    return _from(Lease, {**row, "keeps_detail": ENDED_PK in row})


def event_item(event: Event) -> dict[str, Any]:
    return {"entity": "event", **_row(event)}


def event_from(row: dict[str, Any]) -> Event:
    return _from(Event, row, enums={})


def worker_item(worker: Worker) -> dict[str, Any]:
    return {"entity": "worker", **_row(worker)}


def worker_from(row: dict[str, Any]) -> Worker:
    return _from(Worker, row)


def claim_item(claim: ClaimRecord) -> dict[str, Any]:
    # `expires_at` is the row's TTL attribute (store.keys.TTL_ATTRIBUTE).
    return {"entity": "claim", **_row(claim)}


def claim_from(row: dict[str, Any]) -> ClaimRecord:
    # A record written inside its claim's transaction (earlier releases) has no `intent`.
    return _from(ClaimRecord, {"intent": False, **row}, enums={})


def attachment_item(attachment: Attachment) -> dict[str, Any]:
    return {"entity": "attachment", **_row(attachment)}


def attachment_from(row: dict[str, Any]) -> Attachment:
    # An attachment's `kind` is the worker's own word ("file", "report"…), not a pool kind.
    return _from(Attachment, row, enums={})


def pool_version_item(version: PoolVersion) -> dict[str, Any]:
    return {"entity": "pool_version", **_row(version)}


def pool_version_from(row: dict[str, Any]) -> PoolVersion:
    return _from(PoolVersion, row)


def instance_from(row: dict[str, Any]) -> Instance:
    return _from(Instance, row)


def graph_from(task_id: str, row: dict[str, Any]) -> TaskGraph:
    """A task's graph row (store.keys.task_graph_key); an absent row is all zeros."""
    keys = tuple(sorted(row.get("usage_cost_keys") or ()))
    return _from(TaskGraph, {**row, "task_id": task_id, "usage_cost_keys": keys})
