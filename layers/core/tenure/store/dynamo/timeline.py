"""Events on a subject's timeline: the reads are the paged reads' (store.reads), the writes
are here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tenure.app.ports import EventPage
from tenure.domain.model import Event, Lease
from tenure.store import conditions, items, keys
from tenure.store.reads import PagedReads
from tenure.store.table import Table


def event_put(table: Table, event: Event) -> dict[str, Any]:
    """A timeline event's put, only if new, alone or as one item of a transaction."""
    key = keys.event_key(event.subject_kind, event.subject_id, event.at, event.id)
    return table.put_op({**key, **items.event_item(event)}, conditions.IS_NEW)


class DynamoTimeline:
    """The TimelineRows port on one table."""

    def __init__(self, table: Table, reads: PagedReads) -> None:
        self.table = table
        self.reads = reads

    def timeline(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int | None,
        held: Sequence[Lease] = (),
    ) -> list[Event]:
        return self.reads.timeline(subject_kind, subject_id, limit, held)

    def timeline_page(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int,
        cursor: str | None,
        newest_first: bool = False,
        reclaimed: Callable[[Lease], int | None] | None = None,
    ) -> EventPage:
        return self.reads.timeline_page(
            subject_kind, subject_id, limit, cursor, newest_first, reclaimed=reclaimed
        )

    def put_event(self, event: Event) -> None:
        self.table.put_one(event_put(self.table, event)["Put"])

    def put_anchor(self, event: Event) -> None:
        key = keys.anchor_key(event.subject_kind, event.subject_id, event.at, event.id)
        self.table.put_one(
            self.table.put_op({**key, **items.event_item(event)}, conditions.IS_NEW)["Put"]
        )
