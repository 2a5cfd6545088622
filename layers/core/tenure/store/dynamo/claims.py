"""What a claim_id named, and a worker token's waiting-claim slots."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import ClaimRecord, RecordWrite
from tenure.domain.errors import Conflict
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.table import Table


def record_op(table_name: str, rw: RecordWrite) -> dict[str, Any]:
    """A claim record's write: new (only if it is), or moved on from `previous`."""
    claim = rw.record
    key = keys.claim_key(claim.pool, claim.claimant, claim.worker_id, claim.claim_id)
    if rw.previous is None:
        return {
            "Put": {
                "TableName": table_name,
                "Item": codec.dump({**key, **items.claim_item(rw.record)}),
                "ConditionExpression": conditions.IS_NEW,
            }
        }
    # Only the lease and the row's lifetime move; the key's parts stay as written.
    return {
        "Update": {
            "TableName": table_name,
            "Key": codec.dump(key),
            "UpdateExpression": expressions.MOVE_CLAIM,
            "ConditionExpression": conditions.CLAIM_NAMES,
            "ExpressionAttributeValues": codec.values(
                lease=rw.record.lease_id, keep=rw.record.expires_at, expect_lease=rw.previous
            ),
        }
    }


class DynamoClaims:
    """The ClaimRecords port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str, consistent: bool = True
    ) -> ClaimRecord | None:
        # Consistent by default: the retry of a claim whose answer was lost may come at once.
        # A record past its expires_at (TTL deletes lazily) still names its lease: that lease
        # has ended by then, which the service sees when it reads it.
        key = keys.claim_key(pool, claimant, worker_id, claim_id)
        row = self.table.get(key, consistent=consistent)
        return items.claim_from(row) if row else None

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        op = record_op(self.table.name, RecordWrite(record, previous))
        if previous is None:
            self.table.write(
                "put", Conflict("a claim with this claim_id is under way"), **op["Put"]
            )
        else:
            failed = Conflict("the claim's record was moved on by another call")
            self.table.write("update", failed, **op["Update"])

    def wait_slots(self, token_id: str) -> dict[int, int]:
        return keys.wait_slots_of(self.table.get(keys.wait_slots_key(token_id)) or {})

    def take_wait_slot(self, token_id: str, slot: int, now_ms: int, until_ms: int) -> None:
        self.table.write(
            "update",
            Conflict("the wait slot is held"),
            TableName=self.table.name,
            Key=codec.dump(keys.wait_slots_key(token_id)),
            UpdateExpression=expressions.TAKE_SLOT,
            ConditionExpression=conditions.WAIT_SLOT_FREE,
            ExpressionAttributeNames={"#slot": keys.wait_slot_attribute(slot)},
            ExpressionAttributeValues=codec.values(
                now=now_ms, until=until_ms, keep=until_ms // 1000 + keys.WAIT_SLOTS_KEEP_SECONDS
            ),
        )

    def free_wait_slot(self, token_id: str, slot: int, until_ms: int) -> None:
        self.table.write(
            "update",
            Conflict("the wait slot is no longer this claim's"),
            TableName=self.table.name,
            Key=codec.dump(keys.wait_slots_key(token_id)),
            UpdateExpression=expressions.FREE_SLOT,
            ConditionExpression=conditions.WAIT_SLOT_IS_OURS,
            ExpressionAttributeNames={"#slot": keys.wait_slot_attribute(slot)},
            ExpressionAttributeValues=codec.values(until=until_ms),
        )
