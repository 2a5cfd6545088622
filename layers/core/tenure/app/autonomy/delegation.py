"""Delegation (DESIGN §14): tasks filed with a lease token, and the completion claim gate.

A worker holding a lease may file tasks: they land in its lease's space and remember that
lease (`created_by_lease`), which is what the claim gate checks when the lease's completion
names `created_task_ids` — an agent must not take credit for tasks it did not create. The
gate reads one task row per id (bounded by the report's schema), before the completion's
conditional write, so a refused completion leaves the lease exactly as it was.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from tenure.app.tasks.filing import TaskLinks
from tenure.app.tasks.graph import GraphOps
from tenure.domain import authz
from tenure.domain.errors import InvalidTransition, UnverifiedCreatedTasks, ValidationFailed
from tenure.domain.model import Lease, Principal, Task

# At most this many ids a completion may name (the API model says the same).
MAX_CREATED_TASK_IDS = 100
# What a task id looks like (core ids: "task_" then hex), for the advisory scan of `result`.
TASK_ID_SHAPE = re.compile(r"\btask_[0-9a-f]{6,40}\b")
# How many id-shaped strings in one result the scan looks up at most.
MAX_SCANNED_IDS = 20
# How much of a result's text the scan reads.
MAX_SCANNED_CHARS = 100_000


class DelegationOps(GraphOps):
    def create_task(
        self,
        actor: Principal,
        space: str | None,
        title: str,
        workflow: str | None,
        body: str | None,
        properties: dict[str, Any],
        pool: str | None,
        max_attempts: int | None,
        not_before: int | None = None,
        links: TaskLinks | None = None,
    ) -> tuple[Task, Lease | None]:
        """`space` may be left out by a lease token only: its task lands in its lease's space
        (DESIGN §5, §14); an operator names the space (422 naming `space`)."""
        links = links or TaskLinks()
        if actor.kind != "lease":
            if space is None:
                authz.require_role(actor, "member")  # who may file at all, before the body
                raise ValidationFailed("space: Field required (an operator names the space)")
            # `wake_creator` is meaningless without a creator lease: stored false.
            links = replace(links, wake_creator=False, creator_lease=None)
            return super().create_task(
                actor, space, title, workflow, body, properties, pool, max_attempts, not_before,
                links,
            )  # fmt: skip
        lease = self._lease(actor.lease_id or "")
        if lease.state.terminal:
            raise InvalidTransition(f"lease {lease.id} already ended {lease.state}")
        space = lease.space if space is None else space
        if space != lease.space:
            raise ValidationFailed(
                f"space: a lease's tasks land in its own space {lease.space!r}, not {space!r}"
            )
        # The filing acts as a member of the lease's space, and only of it.
        filer = Principal(kind="operator", token_id=actor.token_id, role="member", spaces=(space,))
        wake = True if links.wake_creator is None else links.wake_creator
        links = replace(links, wake_creator=wake, creator_lease=lease.id)
        return super().create_task(
            filer, space, title, workflow, body, properties, pool, max_attempts, not_before, links
        )

    def _link(self, task: Task, links: TaskLinks, pool: Any) -> tuple[Task, list[Any], bool]:
        task, ops, enqueue = super()._link(task, links, pool)
        creator = links.creator_lease
        return (
            replace(
                task, created_by_lease=creator, wake_creator=bool(creator and links.wake_creator)
            ),
            ops,
            enqueue,
        )

    # ------------------------------------------------------------ the claim gate

    def complete(self, actor: Principal, lease_id: str, body: dict[str, Any]) -> Lease:
        lease = self._own_lease(actor, lease_id)
        claimed = body.get("created_task_ids") or []
        if claimed and not lease.state.terminal:
            self._gate_created(lease, [str(x) for x in claimed])
        done: Lease = super().complete(actor, lease_id, body)  # type: ignore[misc]
        if not lease.state.terminal and done.state.terminal:
            self._scan_result(done, body.get("result"))
        return done

    def _gate_created(self, lease: Lease, claimed: list[str]) -> None:
        if len(claimed) > MAX_CREATED_TASK_IDS:
            raise ValidationFailed(f"created_task_ids: at most {MAX_CREATED_TASK_IDS}")
        bad: dict[str, str] = {}
        for task_id in dict.fromkeys(claimed):
            found = self.store.get_task(task_id) if len(task_id) <= 128 else None
            if found is None:
                bad[task_id] = "does not exist"
            elif found.space != lease.space:
                bad[task_id] = "is in another space"
            elif found.created_by_lease != lease.id:
                bad[task_id] = "was not created with this lease's token"
        if not bad:
            return
        self.store.put_event(
            self._event(
                lease,
                "task.completion.hallucination_blocked",
                {"task_ids": list(bad), "why": bad},
            )
        )
        self.counters["hallucination_blocked"] += 1
        named = ", ".join(f"{k} ({v})" for k, v in bad.items())
        raise UnverifiedCreatedTasks(
            f"created_task_ids: {named}; the lease is unchanged, send a corrected report"
        )

    def _scan_result(self, lease: Lease, result: Any) -> None:
        """Advisory: task-id-shaped strings in the result that name no task are recorded."""
        if result is None:
            return
        text = result if isinstance(result, str) else repr(result)
        found = list(dict.fromkeys(TASK_ID_SHAPE.findall(text[:MAX_SCANNED_CHARS])))
        missing = [x for x in found[:MAX_SCANNED_IDS] if self.store.get_task(x) is None]
        if missing:
            self.store.put_event(
                self._event(lease, "task.completion.hallucination_suspected", {"task_ids": missing})
            )
