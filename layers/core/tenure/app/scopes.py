"""The space a resource named in a request lives in, for the scope check made before the
request is validated (so a token that may not touch the resource hears 403 whatever its body
says; api/scopes.py decides, this only reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.rows import LeaseRows, TaskRows
from tenure.app.rules.ports import RuleStore
from tenure.domain import fencing
from tenure.domain.errors import NotFound
from tenure.domain.task_keys import derived_outside

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Scopes:
    def __init__(
        self, kernel: Kernel, *, leases: LeaseRows, rules: RuleStore, tasks: TaskRows
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.rules = rules
        self.tasks = tasks

    def space_of(self, kind: str, ident: str) -> str | None:
        """The space of the `kind` (space, pool, lease, task, rule, task_or_lease) named
        `ident`; None when nothing has that name, so the route answers as it always has (the
        service's own lookup says 404). One read at most, two for task_or_lease; a pool comes
        from the pool cache. A resource's space never changes, so the lease is read eventually
        consistent: one not yet visible is judged by the service after validation instead."""
        if not ident or len(ident) > fencing.MAX_ID_LENGTH:
            return None
        if kind == "space":
            return ident
        if kind == "pool":
            try:
                return self.kernel.catalog.pool(ident).space
            except NotFound:
                return None
        if kind == "rule":
            rule = self.rules.get_rule(ident)
            return rule.space if rule is not None else None
        task = self.tasks.get_task(ident) if kind in ("task", "task_or_lease") else None
        if task is not None:
            return task.space
        if kind in ("lease", "task_or_lease"):
            lease = self.leases.get_lease(ident, consistent=False)
            return lease.space if lease is not None else None
        return None

    def lease_reaches_task(self, lease_id: str, task_id: str) -> bool | None:
        """Whether a lease's token may touch the task's blocks: the lease is a run of that
        task, or filed it (the rule Blocks applies, app/autonomy/blocks.py); None when either is
        unknown, left to the service to answer."""
        if max(len(lease_id), len(task_id)) > fencing.MAX_ID_LENGTH:
            return None
        lease = self.leases.get_lease(lease_id, consistent=False)
        if lease is not None and derived_outside(task_id, (lease.space,)):
            return False  # another space's task by its id's form, whether or not it exists
        task = self.tasks.get_task(task_id) if lease is not None else None
        if lease is None or task is None:
            return None
        return task.id == lease.task_id or task.created_by_lease == lease.id
