"""The adapter composed: one object per port of `Rows`, every one on the same Table."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from tenure.app.rows import Rows
from tenure.store.calls import Retry
from tenure.store.dynamo.claims import DynamoClaims
from tenure.store.dynamo.commit import DynamoCommitter
from tenure.store.dynamo.graph import DynamoGraph
from tenure.store.dynamo.leases import DynamoLeases
from tenure.store.dynamo.pools import DynamoPools
from tenure.store.dynamo.queues import DynamoQueues
from tenure.store.dynamo.requests import DynamoRequests
from tenure.store.dynamo.spaces import DynamoSpaces
from tenure.store.dynamo.sweeper import DynamoSweeper
from tenure.store.dynamo.tasks import DynamoTasks
from tenure.store.dynamo.timeline import DynamoTimeline
from tenure.store.dynamo.tokens import DynamoTokens
from tenure.store.dynamo.workers import DynamoWorkers
from tenure.store.event_waits import EventWaitRows
from tenure.store.inputs import InputReads
from tenure.store.reads import PagedReads
from tenure.store.retention import RetentionRows
from tenure.store.schema import SchemaRows
from tenure.store.table import Table

if TYPE_CHECKING:
    from tenure.app.rules.ports import RuleStore


def dynamo_rows(client: Any, table: str, retry: Retry | None = None) -> Rows:
    """Every port of the store on the DynamoDB table `table`, read and written through
    `client` with one retry bound and one meter."""
    return rows_on(Table(client, table, retry))


def rows_on(table: Table, reads: PagedReads | None = None) -> Rows:
    """Every port of the store on `table`; the paged reads (whose budgets a test may lower)
    shared by the ports that page."""
    reads = reads or PagedReads(table)
    schema = SchemaRows(table)
    retention = RetentionRows(table)
    return Rows(
        spaces=DynamoSpaces(table),
        pools=DynamoPools(table),
        tasks=DynamoTasks(table, reads, InputReads(table), schema),
        graph=DynamoGraph(table),
        event_waits=EventWaitRows(table),
        tokens=DynamoTokens(table),
        schema=schema,
        leases=DynamoLeases(table, reads),
        queues=DynamoQueues(table),
        workers=DynamoWorkers(table, reads),
        timeline=DynamoTimeline(table, reads),
        committer=DynamoCommitter(table),
        claims=DynamoClaims(table),
        requests=DynamoRequests(table),
        sweeper=DynamoSweeper(table),
        retention=retention,
        attachments=retention,
        rules=cast("RuleStore", OnFirstUse(lambda: _rules(table))),
    )


def _rules(table: Table) -> RuleStore:
    from tenure.store.dynamo.rules import DynamoRules  # and the rules' domain with it

    return DynamoRules(table)


class OnFirstUse:
    """A port built when one of its methods is first read: the rules' port (and the rules'
    domain it loads, ~12 ms of CPU) is never used by the worker function's routes, whose cold
    start is measured (`tenure bench coldstart`). Locked: the local stack serves from
    threads."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._port: Any = None
        self._lock = threading.Lock()

    def built(self) -> Any:
        """The port itself, built now if it was not yet."""
        if self._port is None:
            with self._lock:
                if self._port is None:
                    self._port = self._make()
        return self._port

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not the port's (and no recursion before __init__ ran)
            raise AttributeError(name)
        return getattr(self.built(), name)
