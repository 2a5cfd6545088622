"""Task rows, their keys and numbers, and the space's task lists."""

from __future__ import annotations

from tenure.app.ports import TaskEntry, TaskPage
from tenure.domain.errors import Conflict, NotFound
from tenure.domain.model import Task
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.inputs import InputReads
from tenure.store.reads import PagedReads
from tenure.store.schema import SchemaRows
from tenure.store.table import Table
from tenure.store.task_numbers import TaskNumberBlocks


class DynamoTasks:
    """The TaskRows port on one table; the paged and input reads and the key rows are
    collaborators of their own on the same table."""

    def __init__(
        self, table: Table, reads: PagedReads, inputs: InputReads, schema: SchemaRows
    ) -> None:
        self.table = table
        self.reads = reads
        self.inputs = inputs
        self.schema = schema
        self.task_numbers = TaskNumberBlocks(self._reserve_task_numbers)

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None:
        row = self.table.get(keys.task_key(task_id), consistent=consistent)
        # A voided id (void_task) holds a row of its own kind, which is no task.
        return items.task_from(row) if row and row.get("entity") == "task" else None

    def void_task(self, task_id: str, keep_until: int) -> bool:
        item = {
            **keys.task_key(task_id),
            "entity": conditions.VOID_TASK,
            keys.TTL_ATTRIBUTE: keep_until,
        }
        put = self.table.put_op(
            item, conditions.IS_NEW_OR_VOID, values=codec.values(void=conditions.VOID_TASK)
        )
        try:
            self.table.put_one(put["Put"])
        except Conflict:
            return False  # the task is there
        return True

    def next_task_number(self, space: str) -> int:
        """A number no other task of `space` gets: from this instance's block for the space,
        reserving the next block on the space row when it has none left (one write a block,
        not one a task). Unique in the space and increasing within this instance; not in
        filing order across instances, and a block left unfinished is a gap."""
        return self.task_numbers.next(space)

    def _reserve_task_numbers(self, space: str, count: int) -> int:
        out = self.table.write(
            "update",
            NotFound(f"space {space!r} does not exist"),
            TableName=self.table.name,
            Key=codec.dump(keys.space_key(space)),
            UpdateExpression=expressions.RESERVE_TASK_NUMBERS,
            ConditionExpression=conditions.EXISTS,
            ExpressionAttributeValues=codec.values(count=count),
            ReturnValues="UPDATED_NEW",
        )
        return int(codec.load(dict(out["Attributes"]))["task_seq"])

    def task_id_by_key(self, key: str) -> str | None:
        row = self.table.get(keys.task_key_row(key), consistent=False)
        return str(row["task_id"]) if row else None

    def key_task(self, task: Task) -> bool:
        return self.schema.key_task(task)

    def task_page(self, space: str, limit: int, cursor: str | None) -> TaskPage:
        return self.reads.task_page(space, limit, cursor)

    def newest_children(self, task_id: str, limit: int) -> list[str]:
        return self.inputs.newest_children(task_id, limit)

    def task_entries(self, task_ids: list[str]) -> dict[str, TaskEntry]:
        return self.inputs.task_entries(task_ids)
