"""Lease and job rows, and the writes of a held lease's timing outside a commit."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import LeasePage, SignalBump
from tenure.domain.errors import Conflict
from tenure.domain.model import Job, Lease
from tenure.domain.states import LeaseState, SubjectKind
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.dynamo.graph_ops import signal_op
from tenure.store.reads import PagedReads
from tenure.store.table import Table


class DynamoLeases:
    """The LeaseRows port on one table."""

    def __init__(self, table: Table, reads: PagedReads) -> None:
        self.table = table
        self.reads = reads

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None:
        row = self.table.get(keys.lease_key(lease_id), consistent=consistent)
        return items.lease_from(row) if row else None

    def get_leases(self, lease_ids: list[str], consistent: bool = True) -> dict[str, Lease]:
        rows = self.table.batch_get(
            [keys.lease_key(i) for i in dict.fromkeys(lease_ids)], consistent
        )
        return {lease.id: lease for lease in map(items.lease_from, rows)}

    def get_job(self, job_id: str, consistent: bool = True) -> Job | None:
        row = self.table.get(keys.job_key(job_id), consistent=consistent)
        return items.job_from(row) if row else None

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
        subjects: frozenset[SubjectKind] | None = None,
    ) -> LeasePage:
        return self.reads.list_leases(space, limit, cursor, state, pool, subjects)

    def renew(
        self,
        lease: Lease,
        expect: tuple[LeaseState, int],
        move_due: bool = False,
        signal: SignalBump | None = None,
    ) -> None:
        """Move a held lease's deadline; touches no index key (see keys.DUE_INDEX) unless
        `move_due`: a shortened lease moves its due_at entry earlier in the same write. With
        `signal`, one transaction with the raise of that worker's signal epoch."""
        fields: dict[str, Any] = {
            "deadline": lease.deadline,
            "heartbeat_at": lease.heartbeat_at,
            "lease_seconds": lease.lease_seconds,
        }
        if move_due:
            fields[keys.DUE_AT] = lease.due_at
        if signal is None:
            self._set_on_lease(lease.id, expect, fields)
            return
        update = self._update_on_lease(lease.id, expect, fields)
        self.table.transact([{"Update": update}, signal_op(self.table.name, signal)])

    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        fields: dict[str, Any] = {"deadline": lease.deadline, keys.DUE_AT: lease.due_at}
        if lease.pushed_for is not None:  # the mark, on a lease not marked with it yet
            fields[conditions.PUSHED_FOR] = lease.pushed_for
        update = self._update_on_lease(
            lease.id, (seen.state, seen.fence), fields, deadline_was=seen.deadline
        )
        if lease.pushed_for is not None:
            update["ConditionExpression"] += f" AND {conditions.NOT_PUSHED_FOR}"
        self.table.write("update", Conflict("lease moved on"), **update)

    def reindex(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        self._set_on_lease(lease.id, expect, {keys.DUE_AT: lease.due_at})

    def _set_on_lease(
        self, lease_id: str, expect: tuple[LeaseState, int], fields: dict[str, Any]
    ) -> None:
        """SET some attributes of a held lease, fenced on (state, fence)."""
        update = self._update_on_lease(lease_id, expect, fields)
        self.table.write("update", Conflict("lease moved on"), **update)

    def _update_on_lease(
        self,
        lease_id: str,
        expect: tuple[LeaseState, int],
        fields: dict[str, Any],
        deadline_was: int | None = None,
    ) -> dict[str, Any]:
        state, fence = expect
        condition, extra = conditions.LEASE_IS_AT, {}
        if deadline_was is not None:
            condition, extra = (
                f"{condition} AND {conditions.SAME_DEADLINE}",
                {"expect_deadline": deadline_was},
            )
        return {
            "TableName": self.table.name,
            "Key": codec.dump(keys.lease_key(lease_id)),
            "UpdateExpression": expressions.set_each(fields),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": conditions.STATE_NAMES,
            "ExpressionAttributeValues": codec.values(
                **fields, expect_state=state.value, expect_fence=fence, **extra
            ),
        }
