"""What the table's stream sets off. Each record's domain events are derived once
(domain/events.py `derive`), and each event type has its reactions, in order, in one table
filled in by compose(). Each reaction is conditional, so a redelivered record changes
nothing; a reaction that raises fails the record, and the stream delivers it again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from tenure.app.rows import GraphRows, TaskRows
from tenure.domain.events import DomainEvent, derive
from tenure.domain.model import Task
from tenure.records import record

E = TypeVar("E", bound=DomainEvent)


class Context:
    """One record's reads, shared by its reactions (a completion's task row, and whether the
    task is linked, are read once, together, whichever reaction asks first), and what they
    leave for the bus events after them."""

    def __init__(self, tasks: TaskRows, graph: GraphRows) -> None:
        self._tasks = tasks
        self._graph = graph
        # task id -> (the row as read, whether that read was consistent)
        self._read: dict[str, tuple[Task | None, bool]] = {}
        # task id -> whether it has a graph row or a dependent edge, read with its row
        self._linked: dict[str, bool] = {}
        # Set by the graph's success reaction: this lease's success is its task's completion
        # with no graph row change to tell it (app/tasks/graph.py after_lease).
        self.told_by_lease = False

    def task(self, task_id: str) -> Task | None:
        """The task as it is now (a consistent read, made once per record, after the
        record's write: whether the task is linked comes with it)."""
        seen = self._read.get(task_id)
        if seen is not None and seen[1]:
            return seen[0]
        found, linked = self._graph.linked_task(task_id)
        self._read[task_id] = (found, True)
        self._linked[task_id] = linked
        return found

    def linked(self, task_id: str) -> bool:
        """Whether the task has a graph row or a dependent edge, read consistently after the
        record's write, in the same read as its row."""
        if task_id not in self._linked:
            self.task(task_id)
        return self._linked[task_id]

    def task_as_filed(self, task_id: str) -> Task | None:
        """The task, for fields its filing wrote once and nothing rewrites: any copy has
        them right, so the row this record already read does, else an eventually
        consistent read (at half a read unit), else, for a copy not visible yet, a
        consistent one."""
        seen = self._read.get(task_id)
        if seen is not None and seen[0] is not None:
            return seen[0]
        found = self._tasks.get_task(task_id, consistent=False)
        if found is not None:
            self._read[task_id] = (found, False)
            return found
        return self.task(task_id)


# Reactions to one event type, typed by it (the table keeps them by type).
Entry = tuple[type[DomainEvent], tuple[Callable[[Any, Context], None], ...]]


def on(kind: type[E], *reactions: Callable[[E, Context], None]) -> Entry:
    """One row of the table: the reactions to events of type `kind`, in order. Typed here,
    where each reaction is checked against its event's type; the table keeps them by type."""
    return cast(Entry, (kind, reactions))


@record
class Reactions:
    tasks: TaskRows
    graph: GraphRows
    table: Mapping[type[DomainEvent], tuple[Callable[[Any, Context], None], ...]]

    @classmethod
    def of(cls, tasks: TaskRows, graph: GraphRows, *entries: Entry) -> Reactions:
        return cls(tasks, graph, dict(entries))

    def context(self) -> Context:
        return Context(self.tasks, self.graph)

    def react(self, entity: str, old: Any, new: Any) -> Context:
        """The reactions to one row change (`entity`: lease, task or graph; `old`: the row
        before, None when new), event by event in the order derive gives them."""
        context = self.context()
        for event in derive(entity, old, new):
            for reaction in self.table.get(type(event), ()):
                reaction(event, context)
        return context

    def react_to_rows(self, rows: Iterable[tuple[str, Any, Any]]) -> None:
        for entity, old, new in rows:
            self.react(entity, old, new)
