"""A task's key (`OPS-12`) taken wherever its id is: the one place a key becomes an id.

A task filed by this release has an id derived from its key (task_id_of_key
below), so a key costs one read by id; a task filed when ids were drawn at random
is found through its key row (written by `tenure admin migrate`), one read more. A key is
answered for only to a caller that could see its task: any other caller hears what an
unknown task answers (404 `task_not_found`), so a key of another space tells nothing of
whether that task exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.rows import LeaseRows, TaskRows
from tenure.domain.errors import TaskNotFound
from tenure.domain.model import Principal, Task
from tenure.domain.task_keys import MAX_REF, TASK_KEY, task_id_of_key

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class TaskKeys:
    def __init__(self, kernel: Kernel, *, leases: LeaseRows, tasks: TaskRows) -> None:
        self.kernel = kernel
        self.leases = leases
        self.tasks = tasks

    def task_id(self, actor: Principal, ref: str) -> str:
        """The id of the task `ref` names: `ref` itself unless it is a task key. At most
        three reads by key (the caller's lease for a lease token, the task by its derived id,
        the key row), none for an id."""
        found = TASK_KEY.fullmatch(ref)
        if found is None:
            return ref
        unknown = TaskNotFound(f"task {ref} does not exist")
        if not self._may_see(actor, found.group(1)):
            raise unknown
        listed = self._by_key(ref)
        if listed is None:
            raise unknown
        return listed.id if isinstance(listed, Task) else listed

    def task_in(self, space: str, ref: str) -> Task | None:
        """The task `ref` (an id or a key) names in a request body, or None unless it is one
        of `space`'s: the space the request acts in, which its caller was already let into,
        so a key is read only when it names that space, and a key of any other space answers
        as an unknown id does, having read nothing. One read for an id or for a key of a task
        filed by this release; a key of an older task reads its key row and then the task."""
        found = TASK_KEY.fullmatch(ref)
        if found is None:
            task = self.tasks.get_task(ref) if len(ref) <= MAX_REF else None
        elif found.group(1) != space:
            return None
        else:
            listed = self._by_key(ref)
            task = self.tasks.get_task(listed) if isinstance(listed, str) else listed
        return task if task is not None and task.space == space else None

    def _by_key(self, key: str) -> Task | str | None:
        """The task filed under `key` when its id was derived from it (one read), else the
        id its key row names (one read more), else None."""
        task = self.tasks.get_task(task_id_of_key(key))
        if task is not None and task.key == key:
            return task
        return self.tasks.task_id_by_key(key)

    def _may_see(self, actor: Principal, space: str) -> bool:
        if actor.kind == "operator":
            return actor.spaces is None or space in actor.spaces
        if actor.kind == "lease":
            # A lease token acts in its own lease's space only.
            lease = self.leases.get_lease(actor.lease_id or "", consistent=False)
            return lease is not None and lease.space == space
        return False  # a worker token names leases, never tasks
