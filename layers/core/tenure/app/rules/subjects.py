"""Timelines of workflow and space subjects: the leases rules minted for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.rows import SpaceRows, TimelineRows
from tenure.domain import authz
from tenure.domain.errors import NotFound
from tenure.domain.model import Event, Principal
from tenure.domain.rules.rule import workflow_subject_id
from tenure.domain.states import SubjectKind

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# A subject's timeline grows with every firing: a read returns at most this many, newest.
MAX_ACTIVITY = 500


class Subjects:
    def __init__(self, kernel: Kernel, *, spaces: SpaceRows, timeline: TimelineRows) -> None:
        self.kernel = kernel
        self.spaces = spaces
        self.timeline = timeline

    def workflow_activity(self, actor: Principal, space: str, slug: str, limit: int) -> list[Event]:
        """The workflow subject's timeline, oldest first (its newest `limit` events)."""
        authz.require_operator(actor, "read", space)
        if len(slug) > 64 or self.spaces.get_workflow(space, slug) is None:
            raise NotFound(f"workflow {slug!r} does not exist in space {space!r}")
        subject_id = workflow_subject_id(space, slug)
        return self.timeline.timeline(SubjectKind.WORKFLOW, subject_id, min(limit, MAX_ACTIVITY))

    def space_activity(self, actor: Principal, key: str, limit: int) -> list[Event]:
        """The space subject's timeline, oldest first (its newest `limit` events)."""
        authz.require_operator(actor, "read", key)
        self.kernel.catalog.space(key)
        return self.timeline.timeline(SubjectKind.SPACE, key, min(limit, MAX_ACTIVITY))
