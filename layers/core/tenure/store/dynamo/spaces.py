"""Space rows, their list partition, and workflows."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import Settings, SpacePage
from tenure.domain.errors import AlreadyExists, Conflict, NotFound
from tenure.domain.model import Space, Workflow
from tenure.store import codec, conditions, cursors, expressions, items

# `keys` is this module's name for a batch of row keys, so the key builders are `k`.
from tenure.store import keys as k
from tenure.store.dynamo.settings import update_row
from tenure.store.table import Table


class DynamoSpaces:
    """The SpaceRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def put_space(self, space: Space) -> None:
        # The space and its list row land together: a space is never missing from the list.
        rows = (
            {**k.space_key(space.key), **items.space_item(space)},
            {**k.listed_space_key(space.key), "entity": "space_listed"},
        )
        ops = [
            {
                "Put": {
                    "TableName": self.table.name,
                    "Item": codec.dump(row),
                    "ConditionExpression": conditions.IS_NEW,
                }
            }
            for row in rows
        ]
        try:
            self.table.transact(ops)
        except Conflict as lost:
            raise AlreadyExists(f"space {space.key} already exists") from lost

    def get_space(self, key: str) -> Space | None:
        row = self.table.get(k.space_key(key))
        return items.space_from(row) if row else None

    def list_spaces(
        self, limit: int, cursor: str | None, only: tuple[str, ...] | None = None
    ) -> SpacePage:
        position = cursors.decode(cursor, "spaces", k.LISTED_SPACE_SHAPE) if cursor else ""
        if only is not None:
            keys = sorted(key for key in set(only) if k.listed_space_position(key) > position)
        else:
            request: dict[str, Any] = {
                "KeyConditionExpression": expressions.IN_PARTITION,
                "ExpressionAttributeValues": codec.values(pk=k.SPACES_PK),
                # One more than the page: a next page is promised only when it holds a space.
                "Limit": limit + 1,
                # Consistent: a space is listed right after it is made.
                "ConsistentRead": True,
            }
            if position:
                request["ExclusiveStartKey"] = codec.dump({k.PK: k.SPACES_PK, k.SK: position})
            out = self.table.query(**request)
            keys = [k.listed_space_of(codec.load(r)) for r in out.get("Items", [])]
        page = keys[:limit]
        rows = self.table.batch_get([k.space_key(key) for key in page]) if page else []
        spaces = tuple(sorted((items.space_from(r) for r in rows), key=lambda sp: sp.key))
        after = (
            cursors.encode("spaces", k.listed_space_position(page[-1]))
            if len(keys) > limit
            else None
        )
        return SpacePage(spaces, after)

    def update_space(self, key: str, settings: Settings) -> Space:
        missing = NotFound(f"space {key!r} does not exist")
        return items.space_from(update_row(self.table, k.space_key(key), settings, missing))

    def put_workflow(self, workflow: Workflow) -> None:
        self.table.put_new(
            {**k.workflow_key(workflow.space, workflow.slug), **items.workflow_item(workflow)},
            f"workflow {workflow.slug} in space {workflow.space}",
        )

    def get_workflow(self, space: str, slug: str) -> Workflow | None:
        row = self.table.get(k.workflow_key(space, slug))
        return items.workflow_from(row) if row else None
