"""What the table's stream sets off: one table from the kind of row that changed to the
reactions it needs, in order. Each reaction is conditional, so a redelivered record changes
nothing; a reaction that raises fails the record, and the stream delivers it again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A reaction to one row change: (the row before, or None when it is new; the row after).
Reaction = Callable[[Any, Any], None]


@dataclass(frozen=True)
class Reactions:
    table: Mapping[str, tuple[Reaction, ...]]

    def react(self, entity: str, old: Any, new: Any) -> None:
        for reaction in self.table.get(entity, ()):
            reaction(old, new)

    def react_to_rows(self, rows: Iterable[tuple[str, Any, Any]]) -> None:
        for entity, old, new in rows:
            self.react(entity, old, new)
