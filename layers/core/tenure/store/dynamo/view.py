"""One object over every port of the adapter, for the callers that still take one store
(`compose()` until it takes `Rows`, the CLI's local stack and benches, the tests)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from tenure.app.rows import Rows
from tenure.store.calls import Retry
from tenure.store.dynamo.rows import rows_on
from tenure.store.dynamo.setup import create_table, enable_ttl
from tenure.store.reads import PagedReads
from tenure.store.table import Table

# The paged reads' budgets: a test lowers them on the one object (store.reads).
_BUDGETS = frozenset({"list_budget", "worker_budget", "timeline_cap"})


class OneTable:
    """Every port of `ports` (the adapter's Rows) answered by one object: a method is looked
    up on each port in turn. Transitional: a caller that can take `Rows` takes `ports`."""

    def __init__(self, client: Any, table: str, retry: Retry | None = None) -> None:
        rows = Table(client, table, retry)
        reads = PagedReads(rows)
        object.__setattr__(self, "client", client)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "meter", rows.meter)
        object.__setattr__(self, "retry", rows.retry)
        object.__setattr__(self, "reads", reads)
        object.__setattr__(self, "ports", rows_on(rows, reads))
        object.__setattr__(self, "_each", [getattr(self.ports, f.name) for f in fields(Rows)])

    client: Any
    table: str
    rows: Table
    meter: Any
    retry: Retry
    reads: PagedReads
    ports: Rows

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _BUDGETS:
            return getattr(self.reads, name)
        for port in self.__dict__.get("_each", ()):
            found = getattr(port, name, None)
            if found is not None:
                return found
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _BUDGETS:
            setattr(self.reads, name, value)
        else:
            object.__setattr__(self, name, value)

    def create_table(self) -> None:
        create_table(self.client, self.table)

    def enable_ttl(self) -> None:
        enable_ttl(self.client, self.table)
