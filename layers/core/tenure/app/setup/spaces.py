"""Spaces: making and listing them, their workflows, and archiving them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.ports import Settings, SpacePage
from tenure.app.rows import PoolRows, SchemaRows, SpaceRows, TimelineRows
from tenure.app.schema_versions import SCHEMA_VERSION
from tenure.app.setup.pool_gates import copy_gates
from tenure.domain import authz
from tenure.domain.events import SPACE_ARCHIVED, SPACE_UNARCHIVED
from tenure.domain.model import Event, Principal, Space, Workflow

if TYPE_CHECKING:
    from tenure.app.catalog import Catalog
    from tenure.app.ports import Clock, Ids

# GET /spaces reads at most this many spaces a page.
MAX_SPACE_PAGE = 100


class Spaces:
    """Spaces and their workflows: making them, listing the spaces a caller may see, and
    archiving and unarchiving a space."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        clock: Clock,
        ids: Ids,
        pools: PoolRows,
        schema: SchemaRows,
        spaces: SpaceRows,
        timeline: TimelineRows,
    ) -> None:
        self.catalog = catalog
        self.clock = clock
        self.ids = ids
        self.pools = pools  # the space's pools say whether it is archived
        self.schema = schema
        self.spaces = spaces
        self.timeline = timeline

    def create_space(self, actor: Principal, key: str, name: str, max_active: int | None) -> Space:
        authz.require_operator(actor, "admin")
        space = Space(key=key, name=name, max_active=max_active, created_at=self.clock.now_ms())
        self.spaces.put_space(space)
        return space

    def list_spaces(self, actor: Principal, limit: int, cursor: str | None) -> SpacePage:
        """One page of the spaces the caller may see, by key: every space for a token of the
        whole instance, the spaces it is limited to for one limited to spaces (so a space it
        holds no scope in is never shown, nor told to exist)."""
        authz.require_role(actor, "read")
        limit = max(1, min(limit, MAX_SPACE_PAGE))
        page = self.spaces.list_spaces(limit, cursor, actor.spaces)
        # Spaces made before the list had rows are missing from it until a migrate: the
        # answer says so, as GET /tokens does (a limited token's page reads no list row).
        behind = self.schema.schema_state().version < SCHEMA_VERSION
        return page._replace(schema_behind=behind and actor.spaces is None)

    def create_workflow(
        self, actor: Principal, space: str, slug: str, name: str, description: str | None
    ) -> Workflow:
        authz.require_operator(actor, "admin", space)
        self.catalog.space(space)
        wf = Workflow(
            space=space,
            slug=slug,
            name=name,
            description=description,
            created_at=self.clock.now_ms(),
        )
        self.spaces.put_workflow(wf)
        return wf

    def archive_space(self, actor: Principal, key: str) -> Space:
        return self._set_archived(actor, key, True)

    def unarchive_space(self, actor: Principal, key: str) -> Space:
        return self._set_archived(actor, key, False)

    def _set_archived(self, actor: Principal, key: str, archived: bool) -> Space:
        authz.require_operator(actor, "admin", key)
        space = self.catalog.fresh_space(key)
        if space.archived == archived:
            return space
        updated = self.spaces.update_space(
            key,
            Settings(set={"archived": archived, "archived_changed_at": self.clock.now_ms()}),
        )
        self.catalog.remember_space(updated)
        # Every pool of the space says so before the answer: a claim reads its pool row alone.
        copy_gates(self.pools, self.catalog, {"space_archived": archived}, key)
        self.timeline.put_event(
            Event(
                id=self.ids.new_id("ev"),
                subject_kind="space",
                subject_id=key,
                type=SPACE_ARCHIVED if archived else SPACE_UNARCHIVED,
                at=self.clock.now_ms(),
            )
        )
        return updated
