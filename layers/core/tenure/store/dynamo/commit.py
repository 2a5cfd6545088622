"""The one write of a Change: its rows as TransactItems, each on its condition."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import Change, JobWrite, LeaseWrite, TaskWrite
from tenure.domain.errors import CeilingReached, Conflict
from tenure.domain.model import Lease, Task, may_be_implied
from tenure.domain.states import REPORTABLE, LeaseState
from tenure.store import codec, conditions, items, keys
from tenure.store.dynamo.ceilings import ceiling_op
from tenure.store.dynamo.claims import record_op
from tenure.store.dynamo.graph_ops import graph_op, hold_op, job_check, signal_op
from tenure.store.table import Table

_LOST = "ConditionalCheckFailed"


def lease_row(lease: Lease) -> dict[str, Any]:
    """A lease's row with the index keys its state gives it."""
    row = items.lease_item(lease)
    if not lease.via_task:  # else its task's list entry lists it (store.reads.list_leases)
        row.update(keys.space_list_keys(lease.space, lease.created_at, lease.id))
    if lease.state is LeaseState.PENDING:
        at = keys.queue_at(lease.created_at, lease.not_before)
        row.update(keys.queue_keys(lease.pool, at, lease.id, lease.priority))
    if lease.state is LeaseState.PENDING and lease.queue_expires_at is not None:
        # The sweeper finds it by its expiry, in a partition of its own
        # (app/leases/queue_timeouts.py).
        row[keys.DUE_PK] = keys.queue_expiry_pk(lease.pool)
        row[keys.DUE_AT] = lease.queue_expires_at
    elif lease.state in REPORTABLE and lease.due_at is not None:
        row[keys.DUE_PK] = keys.due_pk(lease.pool)
    else:
        row.pop(keys.DUE_AT, None)
    if lease.keeps_detail and lease.reclaimed_at is None:
        # In the ended index once it has both keys: this one from the lease's first log
        # stream or attachment (or its ending, on an older table), `ended_at` from its end.
        row[keys.ENDED_PK] = keys.ended_pk(lease.pool)
    return row


def task_row(task: Task) -> dict[str, Any]:
    # Every write of a task carries its list keys, unchanged from the first: the KEYS_ONLY
    # index is written when the task is filed and never again. A task filed before the index
    # existed joins the list with its next write.
    return {**items.task_item(task), **keys.task_list_keys(task.space, task.created_at, task.id)}


class DynamoCommitter:
    """The Committer port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def commit(self, change: Change) -> None:
        ops = [self._lease_op(lw) for lw in change.leases]
        # A new job that nothing names yet (`ahead`) is written on its own, before the rest,
        # sparing it the transaction (AWS bills a transaction's items twice): see JobWrite.
        ahead = [jw for jw in change.jobs if jw.ahead and jw.expect_fence is None]
        ops.extend(self._job_op(jw) for jw in change.jobs if jw not in ahead)
        ops.extend(self._task_op(tw) for tw in change.tasks)
        name = self.table.name
        ops.extend(job_check(name, job_id, lease_id) for job_id, lease_id in change.job_checks)
        ops.extend(graph_op(name, g) for g in change.graph)
        ops.extend(hold_op(name, h) for h in change.holds)
        ops.extend(record_op(name, rw) for rw in change.records)
        ops.extend(signal_op(name, bump) for bump in change.signals)
        first_ceiling = len(ops)
        ops.extend(ceiling_op(name, ceiling) for ceiling in change.ceilings)
        for jw in ahead:
            self.table.put_one(self._job_op(jw)["Put"])
        if not ops:
            return
        if len(ops) == 1 and "Put" in ops[0]:
            self.table.put_one(ops[0]["Put"])
            return
        try:
            self.table.transact(ops)
        except Conflict as lost:
            reasons = lost.details.get("reasons") or []
            if any(r == _LOST for r in reasons[first_ceiling:]) and not any(
                r == _LOST for r in reasons[:first_ceiling]
            ):
                # Which one: a full key lets a claim move on to other keys, the rest do not.
                full = [
                    c
                    for c, r in zip(change.ceilings, reasons[first_ceiling:], strict=False)
                    if r == _LOST
                ]
                raise CeilingReached(
                    "a ceiling is full", scope=full[0].scope, name=full[0].name, **lost.details
                ) from lost
            raise

    def _lease_op(self, lw: LeaseWrite) -> dict[str, Any]:
        item = {**keys.lease_key(lw.new.id), **lease_row(lw.new)}
        if lw.expect is None:
            return self.table.put_op(item, conditions.IS_NEW)
        state, fence = lw.expect
        condition = conditions.LEASE_IS_AT
        values: dict[str, Any] = {"expect_state": state.value, "expect_fence": fence}
        if lw.seen is not None:
            condition += f" AND {conditions.SAME_VERSION}"
            values["expect_version"] = lw.seen.version
            if not lw.seen.keeps_detail:
                # A first log stream or attachment marks the row without a new
                # version (RetentionRows.keep_detail): never written over unseen.
                condition += f" AND {conditions.KEEPS_NO_DETAIL}"
            if lw.seen.deadline is None:
                condition += f" AND {conditions.NO_DEADLINE}"
            else:
                condition += f" AND {conditions.SAME_DEADLINE}"
                values["expect_deadline"] = lw.seen.deadline
        return self.table.put_op(
            item, condition, names=conditions.STATE_NAMES, values=codec.values(**values)
        )

    def _job_op(self, jw: JobWrite) -> dict[str, Any]:
        item = {**keys.job_key(jw.new.id), **items.job_item(jw.new)}
        if jw.expect_fence is None:
            return self.table.put_op(item, conditions.IS_NEW)
        # A missing row of a task's first job is that job at fence 1.
        implied = jw.expect_fence == 1 and may_be_implied(jw.new)
        fenced = conditions.IMPLIED_JOB_FENCE_IS if implied else conditions.JOB_FENCE_IS
        return self.table.put_op(item, fenced, values=codec.values(expect_fence=jw.expect_fence))

    def _task_op(self, tw: TaskWrite) -> dict[str, Any]:
        item = {**keys.task_key(tw.new.id), **task_row(tw.new)}
        # A write that does not carry a cancel must not land on a cancelled task.
        kept = "" if tw.new.cancelled is not None else f" AND {conditions.TASK_NOT_CANCELLED}"
        if tw.create:
            return self.table.put_op(item, conditions.IS_NEW)
        if tw.expect_version is not None:
            job_is, job = (
                (conditions.TASK_HAS_NO_JOB, {})
                if tw.expect_job_id is None
                else (conditions.TASK_JOB_IS, {"expect_job": tw.expect_job_id})
            )
            values = codec.values(**job, expect_task_version=tw.expect_version)
            return self.table.put_op(
                item, f"{job_is} AND {conditions.TASK_VERSION_IS}{kept}", values=values
            )
        if tw.expect_job_id is None:
            return self.table.put_op(item, conditions.TASK_HAS_NO_JOB + kept)
        return self.table.put_op(
            item, conditions.TASK_JOB_IS + kept, values=codec.values(expect_job=tw.expect_job_id)
        )
