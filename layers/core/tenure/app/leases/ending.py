"""The value a final report's `contribute` stages pass along: the lease as read, the lease
as the report ends it, and the other rows the report's one commit writes. The ended lease is
a field of its own, so a stage that adds a lease row (a retry's next run) can never be taken
for it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from tenure.app.kernel import over
from tenure.app.ports import Change
from tenure.domain.model import Lease
from tenure.domain.states import ReportKind


@dataclass(frozen=True)
class Ending:
    before: Lease  # the lease row the report was judged on
    ended: Lease  # the row the report writes in its place
    kind: ReportKind
    report: dict[str, Any]  # as it will be stored (after the `resolve` stages)
    rows: Change = field(default_factory=Change)  # every other row of the commit

    def with_rows(self, more: Change) -> Ending:
        """This ending with `more`'s rows added after the ones it has."""
        rows = self.rows
        joined = {f.name: [*getattr(rows, f.name), *getattr(more, f.name)] for f in fields(Change)}
        return replace(self, rows=Change(**joined))

    def change(self) -> Change:
        """The one commit: the ended lease over the row it was judged on, first, then the
        other rows."""
        return replace(self.rows, leases=[over(self.before, self.ended), *self.rows.leases])
