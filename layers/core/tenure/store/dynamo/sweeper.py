"""The sweeper's own state row and the dispatch controls' row (the scheduler row)."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import AbsencePush, DueEntry, SchedulerState, SweeperState
from tenure.store import codec, conditions, expressions, keys
from tenure.store.table import Table


class DynamoSweeper:
    """The SweeperRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def get_sweeper_state(self) -> SweeperState:
        row = self.table.get(keys.SWEEPER_KEY)
        if row is None:
            return SweeperState()
        holds = {str(pool): int(until) for pool, until in (row.get("holds") or {}).items()}
        waiting = {str(p): int(t) for p, t in (row.get("capacity_waiting") or {}).items()}
        absences = {  # a row from before absence pushes were kept has none pending
            str(p): _push_from(a) for p, a in (row.get("absences") or {}).items()
        }
        return SweeperState(
            last_pass_at=row.get("last_pass_at"),
            holds=holds,
            capacity_waiting=waiting,
            ttl_cursor=int(row["ttl_cursor"]) if row.get("ttl_cursor") is not None else None,
            absences=absences,
        )

    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None:
        item = {
            **keys.SWEEPER_KEY,
            "last_pass_at": state.last_pass_at,
            "holds": dict(state.holds),
            "capacity_waiting": dict(state.capacity_waiting),
            "ttl_cursor": state.ttl_cursor,
            "absences": {pool: _push_item(push) for pool, push in state.absences.items()},
        }
        if expect_last is None:
            put = self.table.put_op(item, conditions.IS_NEW)["Put"]
        else:
            put = self.table.put_op(
                item, conditions.SWEEP_AFTER, values=codec.values(expect_last=expect_last)
            )["Put"]
        self.table.put_one(put)

    def get_scheduler(self, consistent: bool = True) -> SchedulerState:
        row = self.table.get(keys.SCHEDULER_KEY, consistent=consistent) or {}
        return SchedulerState(
            paused=bool(row.get("paused", False)),
            paused_by=row.get("paused_by"),
            paused_at=row.get("paused_at"),
            paused_tasks=frozenset(row.get(keys.HOLD_SETS["paused"]) or ()),
            attention=frozenset(row.get(keys.HOLD_SETS["attention"]) or ()),
            blocked=frozenset(row.get(keys.HOLD_SETS["blocked"]) or ()),
            cancelled=frozenset(row.get(keys.HOLD_SETS["cancelled"]) or ()),
        )

    def set_scheduler_paused(self, paused: bool, by: str, at: int) -> None:
        self.table.call(
            "update",
            self.table.client.update_item,
            TableName=self.table.name,
            Key=codec.dump(keys.SCHEDULER_KEY),
            UpdateExpression=expressions.PAUSE,
            ExpressionAttributeValues=codec.values(paused=paused, by=by, at=at),
        )


def _push_item(push: AbsencePush) -> dict[str, Any]:
    item: dict[str, Any] = {"at": push.at, "gap_ms": push.gap_ms}
    if push.earlier:
        item["earlier"] = [[at, gap] for at, gap in push.earlier]
    if push.after is not None:
        item["after"] = {"due_at": push.after.due_at, "lease_id": push.after.lease_id}
    return item


def _push_from(item: dict[str, Any]) -> AbsencePush:
    """A push as `_push_item` keeps it; one kept before the walk had a place (no `after`)
    starts it from the beginning of the index."""
    after = item.get("after")
    return AbsencePush(
        at=int(item["at"]),
        gap_ms=int(item["gap_ms"]),
        earlier=tuple((int(at), int(gap)) for at, gap in item.get("earlier") or ()),
        after=DueEntry(int(after["due_at"]), str(after["lease_id"])) if after else None,
    )
