"""The DynamoDB rows of a lease's detail: its attachments, the ended index, the reclaim mark."""

from __future__ import annotations

from tenure.app.ports import Attachment
from tenure.domain.errors import CeilingReached, Conflict
from tenure.domain.model import Lease
from tenure.store import codec, conditions, expressions, items, keys
from tenure.store.table import Table


class RetentionRows:
    """A lease's detail rows, on the table's metered, retried primitives."""

    def __init__(self, rows: Table) -> None:
        self.rows = rows

    def put_attachment(self, attachment: Attachment, cap: int, quota_bytes: int) -> None:
        row = {
            **keys.attachment_key(attachment.lease_id, attachment.id),
            **items.attachment_item(attachment),
        }
        ops = [
            {
                "Update": {
                    "TableName": self.rows.name,
                    "Key": codec.dump(keys.attachment_count_key(attachment.lease_id)),
                    "UpdateExpression": expressions.COUNT_ATTACHMENT,
                    "ConditionExpression": conditions.WITHIN_ATTACHMENT_QUOTA,
                    "ExpressionAttributeValues": codec.values(
                        one=1,
                        cap=cap,
                        size=attachment.byte_size,
                        room=quota_bytes - attachment.byte_size,
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": self.rows.name,
                    "Item": codec.dump(row),
                    "ConditionExpression": conditions.IS_NEW,
                }
            },
        ]
        try:
            self.rows.write("transact", Conflict("an attachment write lost"), TransactItems=ops)
        except Conflict as lost:
            if (lost.details.get("reasons") or [None])[0] == "ConditionalCheckFailed":
                old = (lost.details.get("old") or [None])[0] or {}
                if int(old.get("attachments", 0)) < cap:
                    raise CeilingReached(
                        f"a lease adds at most {quota_bytes} bytes of attachments", quota=True
                    ) from lost
                raise CeilingReached(f"a lease keeps at most {cap} attachments") from lost
            raise

    def count_log_containers(self, lease_id: str, containers: list[str], cap: int) -> set[str]:
        """Add `containers` to the lease's log containers, all or none, while it keeps at
        most `cap`: one conditional write, the containers already there costing no room.
        The set only grows, so a lost condition is judged on the row read after it: past the
        cap (CeilingReached), or another request counted some of these meanwhile (go on with
        the rest). Answers those this call added."""
        pending = sorted(set(containers))
        for _ in range(cap + 1):  # each lost round saw the set grow; it cannot pass the cap
            if not pending:
                return set()
            names = {f"c{i}": name for i, name in enumerate(pending)}
            known = " AND ".join(f"contains(containers, :{name})" for name in names)
            try:
                out = self.rows.write(
                    "update",
                    Conflict("the lease's log containers changed"),
                    TableName=self.rows.name,
                    Key=codec.dump(keys.log_containers_key(lease_id)),
                    UpdateExpression=expressions.COUNT_CONTAINERS,
                    ConditionExpression=f"({conditions.WITHIN_LOG_CONTAINERS}) OR ({known})",
                    ExpressionAttributeValues=codec.values(
                        new=set(pending), room=cap - len(pending), **names
                    ),
                    # The old row tells which were new (UPDATED_OLD would do on AWS, but moto
                    # answers it with nothing for an ADD); what is returned costs no units.
                    ReturnValues="ALL_OLD",
                )
            except Conflict:
                row = self.rows.get(keys.log_containers_key(lease_id)) or {}
                counted = set(row.get("containers") or ())
                new = [name for name in pending if name not in counted]
                if len(counted) + len(new) > cap:
                    raise CeilingReached(
                        f"a lease keeps the logs of at most {cap} containers"
                    ) from None
                pending = new
                continue
            before = codec.load(out.get("Attributes") or {}).get("containers") or ()
            return set(pending) - set(before)
        # Not reached: every lost round above saw the set grow, and it stops at the cap.
        raise Conflict("the lease's log containers kept changing")

    def list_attachments(self, lease_id: str) -> list[Attachment]:
        # Bounded by the per-lease cap (put_attachment); one page of 1 MB holds far more.
        out = self.rows.query(
            KeyConditionExpression=expressions.WITH_PREFIX,
            ExpressionAttributeValues=codec.values(
                pk=keys.lease_pk(lease_id), prefix=keys.ATTACHMENT_PREFIX
            ),
            ConsistentRead=True,
        )
        rows = [codec.load(r) for r in out.get("Items", [])]
        found = [items.attachment_from(r) for r in rows]
        return sorted(found, key=lambda a: (a.created_at, a.id))

    def get_attachment(self, lease_id: str, attachment_id: str) -> Attachment | None:
        row = self.rows.get(keys.attachment_key(lease_id, attachment_id))
        return items.attachment_from(row) if row else None

    def set_attachment_status(self, attachment: Attachment, status: str) -> None:
        self.rows.write(
            "update",
            Conflict("the attachment is gone"),
            TableName=self.rows.name,
            Key=codec.dump(keys.attachment_key(attachment.lease_id, attachment.id)),
            UpdateExpression=expressions.SET_STATUS,
            ConditionExpression=conditions.EXISTS,
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=codec.values(status=status),
        )

    def delete_attachments(self, lease_id: str, attachment_ids: list[str]) -> None:
        for attachment_id in attachment_ids:
            self.rows.write(
                "delete",
                Conflict("unreachable: an unconditional delete"),
                TableName=self.rows.name,
                Key=codec.dump(keys.attachment_key(lease_id, attachment_id)),
            )

    # -------------------------------------------------------------------- retention

    def ended_leases(self, pool: str, ended_before: int, limit: int) -> list[str]:
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        out = self.rows.query(
            IndexName=keys.ENDED_INDEX,
            KeyConditionExpression=expressions.ENDED_BY,
            ExpressionAttributeValues=codec.values(p=keys.ended_pk(pool), before=ended_before),
            Limit=limit,
        )
        return [keys.lease_id_of(codec.load(r)) for r in out.get("Items", [])]

    def ended_since(self, pool: str, since: int, limit: int) -> list[str]:
        if limit < 1:
            raise ValueError("a page needs a limit of at least 1")
        out = self.rows.query(
            IndexName=keys.ENDED_INDEX,
            KeyConditionExpression=expressions.ENDED_SINCE,
            ExpressionAttributeValues=codec.values(p=keys.ended_pk(pool), since=since),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [keys.lease_id_of(codec.load(r)) for r in out.get("Items", [])]

    def mark_reclaimed(self, lease: Lease) -> None:
        fields = {
            "reclaimed_at": lease.reclaimed_at,
            "version": lease.version,
            "event_type": lease.event_type,
            "event_data": lease.event_data or {},
            "updated_at": lease.updated_at,
        }
        self.rows.write(
            "update",
            Conflict(f"lease {lease.id} was reclaimed already"),
            TableName=self.rows.name,
            Key=codec.dump(keys.lease_key(lease.id)),
            UpdateExpression=expressions.set_each(fields),
            ConditionExpression=conditions.NOT_RECLAIMED,
            ExpressionAttributeValues=codec.values(**fields),
        )

    def keep_detail(self, lease: Lease) -> None:
        self._keep_detail(lease)

    def mark_keeps_detail(self, lease: Lease) -> bool:
        """keep_detail for a migration, which counts what it wrote: False when the lease was
        marked already (or reclaimed)."""
        try:
            self._keep_detail(lease, only_if_absent=True)
        except Conflict:
            return False
        return True

    def _keep_detail(self, lease: Lease, only_if_absent: bool = False) -> None:
        # No new version: the stream tells no event for it, and a whole-row write of the lease
        # read before it loses its condition (conditions.KEEPS_NO_DETAIL) instead of dropping it.
        # `only_if_absent`: a lease marked already loses the condition too (the migration's
        # count of what it wrote).
        condition = conditions.NOT_RECLAIMED
        if only_if_absent:
            condition = f"{condition} AND {conditions.KEEPS_NO_DETAIL}"
        self.rows.write(
            "update",
            Conflict(f"lease {lease.id} was reclaimed, or keeps detail already"),
            TableName=self.rows.name,
            Key=codec.dump(keys.lease_key(lease.id)),
            UpdateExpression=expressions.INDEX_ENDED,
            ConditionExpression=condition,
            ExpressionAttributeValues=codec.values(p=keys.ended_pk(lease.pool)),
        )

    def unindex_ended(self, lease_id: str) -> None:
        self.rows.write(
            "update",
            Conflict("the lease is gone"),
            TableName=self.rows.name,
            Key=codec.dump(keys.lease_key(lease_id)),
            UpdateExpression=expressions.UNINDEX_ENDED,
            ConditionExpression=conditions.EXISTS,
        )
