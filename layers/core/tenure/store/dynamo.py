"""The DynamoDB adapter of the Store port: one table, conditional writes as fencing."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from tenure.core.errors import (
    AlreadyExists,
    CeilingReached,
    Conflict,
    NotFound,
    TenureError,
    ValidationFailed,
)
from tenure.core.model import Event, Job, Lease, Pool, Space, Task, Token, Worker, Workflow
from tenure.core.ports import Ceiling, Change, LeasePage, SweeperState
from tenure.core.states import REPORTABLE, LeaseState
from tenure.store import items
from tenure.store import keys as k

_ser = TypeSerializer()
_de = TypeDeserializer()


@dataclass
class Meter:
    """Capacity the store consumed, as DynamoDB reported it (indexes included)."""

    read_units: float = 0.0
    write_units: float = 0.0
    items_read: int = 0
    calls: list[str] = field(default_factory=list)

    def add(self, op: str, consumed: dict[str, Any] | list[dict[str, Any]] | None) -> None:
        self.calls.append(op)
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            self.read_units += float(entry.get("ReadCapacityUnits", 0) or 0)
            self.write_units += float(entry.get("WriteCapacityUnits", 0) or 0)
            if "ReadCapacityUnits" not in entry and "WriteCapacityUnits" not in entry:
                units = float(entry.get("CapacityUnits", 0) or 0)
                if op in ("get", "query", "batch_get"):
                    self.read_units += units
                else:
                    self.write_units += units

    def snapshot(self) -> tuple[float, float, int]:
        return self.read_units, self.write_units, self.items_read


def _dump(item: dict[str, Any]) -> dict[str, Any]:
    return {key: _ser.serialize(_to_dynamo(v)) for key, v in item.items() if v is not None}


def _load(raw: dict[str, Any]) -> dict[str, Any]:
    return {key: _from_dynamo(_de.deserialize(v)) for key, v in raw.items()}


def load_image(raw: dict[str, Any]) -> dict[str, Any]:
    """A stream record's image (DynamoDB JSON) as plain values."""
    return _load({key: _typed(v) for key, v in raw.items()})


def _typed(value: dict[str, Any]) -> dict[str, Any]:
    # The streams API hands an empty map back as a bare {} (its type tag dropped).
    if not value:
        return {"M": {}}
    if "M" in value:
        return {"M": {key: _typed(v) for key, v in value["M"].items()}}
    if "L" in value:
        return {"L": [_typed(v) for v in value["L"]]}
    return value


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {key: _to_dynamo(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _from_dynamo(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    if isinstance(value, set):
        return sorted(_from_dynamo(v) for v in value)
    return value


def _values(**kw: Any) -> dict[str, Any]:
    return {f":{name}": _ser.serialize(_to_dynamo(v)) for name, v in kw.items()}


# ClientError codes that mean "a condition did not hold" (STYLE: one table, never message
# text). Each write names the domain error that failure is for it: AlreadyExists for a create,
# NotFound for a counter on a missing row, Conflict for a fenced lease write.
_CONDITION_FAILED = {
    "ConditionalCheckFailedException",
    "TransactionConflictException",
    "TransactionCanceledException",
}


def _translate(err: ClientError, failed: TenureError) -> Exception:
    """The domain error a failed call is; anything not in the table stays the ClientError."""
    code = err.response["Error"]["Code"]
    if code not in _CONDITION_FAILED:
        return err
    reasons = err.response.get("CancellationReasons") or []
    if reasons:
        failed.details["reasons"] = [r.get("Code") for r in reasons]
        failed.details["old"] = [_load(dict(r["Item"])) if r.get("Item") else None for r in reasons]
    return failed


class DynamoStore:
    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table
        self.meter = Meter()

    # ------------------------------------------------------------------ primitives

    def _get(self, key: dict[str, str], consistent: bool = True) -> dict[str, Any] | None:
        out = self.client.get_item(
            TableName=self.table,
            Key=_dump(key),
            ConsistentRead=consistent,
            ReturnConsumedCapacity="INDEXES",
        )
        self.meter.add("get", out.get("ConsumedCapacity"))
        if "Item" not in out:
            return None
        self.meter.items_read += 1
        return _load(out["Item"])

    def _write(self, op: str, failed: TenureError, **request: Any) -> dict[str, Any]:
        """One write call: metered, and a failed condition raised as `failed`."""
        call = {
            "put": self.client.put_item,
            "update": self.client.update_item,
            "transact": self.client.transact_write_items,
        }[op]
        try:
            out = call(**request, ReturnConsumedCapacity="INDEXES")
        except ClientError as err:
            raise _translate(err, failed) from err
        self.meter.add(op, out.get("ConsumedCapacity"))
        return dict(out)

    def _put_new(self, item: dict[str, Any], what: str) -> None:
        self._write(
            "put",
            AlreadyExists(f"{what} already exists"),
            TableName=self.table,
            Item=_dump(item),
            ConditionExpression=k.IS_NEW,
        )

    def _transact(self, ops: list[dict[str, Any]]) -> None:
        self._write("transact", Conflict("a conditional write lost"), TransactItems=ops)

    def _query(self, **kwargs: Any) -> dict[str, Any]:
        out = self.client.query(TableName=self.table, ReturnConsumedCapacity="INDEXES", **kwargs)
        self.meter.add("query", out.get("ConsumedCapacity"))
        self.meter.items_read += len(out.get("Items", []))
        return dict(out)

    def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        """Every row a query matches, page after page."""
        rows: list[dict[str, Any]] = []
        while True:
            out = self._query(**kwargs)
            rows.extend(_load(r) for r in out.get("Items", []))
            if not out.get("LastEvaluatedKey"):
                return rows
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def _partition(self, pk: str) -> list[dict[str, Any]]:
        return self._query_all(
            KeyConditionExpression=f"{k.PK} = :pk", ExpressionAttributeValues=_values(pk=pk)
        )

    def _batch_get(self, item_keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        pending = [_dump(key) for key in item_keys]
        while pending:
            chunk, pending = pending[:100], pending[100:]
            request: dict[str, Any] = {self.table: {"Keys": chunk, "ConsistentRead": True}}
            while request:
                out = self.client.batch_get_item(
                    RequestItems=request, ReturnConsumedCapacity="INDEXES"
                )
                self.meter.add("batch_get", out.get("ConsumedCapacity"))
                rows = out.get("Responses", {}).get(self.table, [])
                self.meter.items_read += len(rows)
                found.extend(_load(r) for r in rows)
                request = out.get("UnprocessedKeys") or {}
        return found

    # -------------------------------------------------------------- set-up resources

    def put_space(self, space: Space) -> None:
        self._put_new({**k.space_key(space.key), **items.space_item(space)}, f"space {space.key}")

    def get_space(self, key: str) -> Space | None:
        row = self._get(k.space_key(key))
        return items.space_from(row) if row else None

    def next_task_number(self, space: str) -> int:
        out = self._write(
            "update",
            NotFound(f"space {space!r} does not exist"),
            TableName=self.table,
            Key=_dump(k.space_key(space)),
            UpdateExpression="ADD task_seq :one",
            ConditionExpression=k.EXISTS,
            ExpressionAttributeValues=_values(one=1),
            ReturnValues="UPDATED_NEW",
        )
        return int(_load(dict(out["Attributes"]))["task_seq"])

    def put_workflow(self, workflow: Workflow) -> None:
        self._put_new(
            {**k.workflow_key(workflow.space, workflow.slug), **items.workflow_item(workflow)},
            f"workflow {workflow.slug} in space {workflow.space}",
        )

    def get_workflow(self, space: str, slug: str) -> Workflow | None:
        row = self._get(k.workflow_key(space, slug))
        return items.workflow_from(row) if row else None

    def put_pool(self, pool: Pool) -> None:
        self._put_new({**k.pool_key(pool.name), **items.pool_item(pool)}, f"pool {pool.name}")

    def get_pool(self, name: str) -> Pool | None:
        row = self._get(k.pool_key(name), consistent=False)
        return items.pool_from(row) if row else None

    def list_pools(self) -> list[Pool]:
        return [items.pool_from(r) for r in self._partition(k.POOLS_PK)]

    def put_token(self, token: Token) -> None:
        ops = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": _dump({**k.token_name_key(token.name), "token_id": token.id}),
                    "ConditionExpression": k.IS_NEW,
                }
            },
            {
                "Put": {
                    "TableName": self.table,
                    "Item": _dump({**k.token_key(token.token_hash), **items.token_item(token)}),
                    "ConditionExpression": k.IS_NEW,
                }
            },
        ]
        try:
            self._transact(ops)
        except Conflict as lost:
            raise AlreadyExists(f"token {token.name} already exists") from lost

    def get_token(self, token_hash: str) -> Token | None:
        row = self._get(k.token_key(token_hash), consistent=False)
        return items.token_from(row) if row else None

    # ------------------------------------------------------------- tasks, jobs, leases

    def get_task(self, task_id: str) -> Task | None:
        row = self._get(k.task_key(task_id))
        return items.task_from(row) if row else None

    def get_job(self, job_id: str) -> Job | None:
        row = self._get(k.job_key(job_id))
        return items.job_from(row) if row else None

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None:
        row = self._get(k.lease_key(lease_id), consistent=consistent)
        return items.lease_from(row) if row else None

    def get_leases(self, lease_ids: Iterable[str]) -> dict[str, Lease]:
        rows = self._batch_get([k.lease_key(i) for i in dict.fromkeys(lease_ids)])
        return {lease.id: lease for lease in map(items.lease_from, rows)}

    def put_worker(self, worker: Worker) -> None:
        item = {**k.worker_key(worker.pool, worker.worker_id), **items.worker_item(worker)}
        out = self.client.put_item(
            TableName=self.table, Item=_dump(item), ReturnConsumedCapacity="INDEXES"
        )
        self.meter.add("put", out.get("ConsumedCapacity"))

    def get_worker(self, pool: str, worker_id: str) -> Worker | None:
        row = self._get(k.worker_key(pool, worker_id), consistent=False)
        return items.worker_from(row) if row else None

    def list_workers(self, pool: str) -> list[Worker]:
        return [items.worker_from(r) for r in self._partition(k.workers_pk(pool))]

    def queue_candidates(self, pool: str, limit: int, due_by: int | None = None) -> list[str]:
        condition, values = f"{k.QUEUE_PK} = :q", {"q": k.queue_pk(pool)}
        if due_by is not None:
            condition += f" AND {k.QUEUE_SK} <= :due"
            values["due"] = k.queue_due_bound(due_by)
        out = self._query(
            IndexName=k.QUEUE_INDEX,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=_values(**values),
            Limit=limit,
        )
        return [k.lease_id_of(_load(row)) for row in out.get("Items", [])]

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
    ) -> LeasePage:
        start = _decode_cursor(space, cursor) if cursor else None
        found: list[Lease] = []
        page_size = max(limit + 1, 25)
        while True:
            kwargs: dict[str, Any] = {
                "IndexName": k.SPACE_INDEX,
                "KeyConditionExpression": f"{k.SPACE_PK} = :s",
                "ExpressionAttributeValues": _values(s=k.space_list_pk(space)),
                "ScanIndexForward": False,
                "Limit": page_size,
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            out = self._query(**kwargs)
            ordered = [k.lease_id_of(_load(row)) for row in out.get("Items", [])]
            by_id = self.get_leases(ordered) if ordered else {}
            for lease_id in ordered:
                lease = by_id.get(lease_id)
                if lease is None:
                    continue
                if (state is None or lease.state is state) and (pool is None or lease.pool == pool):
                    found.append(lease)
                if len(found) > limit:
                    last = found[limit - 1]
                    return LeasePage(found[:limit], _encode_cursor(last))
            start = out.get("LastEvaluatedKey")
            if not start:
                return LeasePage(found, None)

    def timeline(self, subject_kind: str, subject_id: str, limit: int | None) -> list[Event]:
        pk = k.timeline_pk(subject_kind, subject_id)
        if limit is None:
            return [items.event_from(r) for r in self._partition(pk)]
        out = self._query(
            KeyConditionExpression=f"{k.PK} = :pk",
            ExpressionAttributeValues=_values(pk=pk),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [items.event_from(_load(r)) for r in reversed(out.get("Items", []))]

    # ------------------------------------------------------------------------ writes

    def commit(self, change: Change) -> None:
        ops: list[dict[str, Any]] = []
        for lw in change.leases:
            item = {**k.lease_key(lw.new.id), **_lease_row(lw.new)}
            if lw.expect is None:
                ops.append(self._put_op(item, k.IS_NEW))
            else:
                state, fence = lw.expect
                condition, values = (
                    k.LEASE_IS_AT,
                    {"expect_state": state.value, "expect_fence": fence},
                )
                if lw.seen is not None:
                    condition += f" AND {k.SAME_VERSION}"
                    values["expect_version"] = lw.seen.version
                    if lw.seen.deadline is None:
                        condition += f" AND {k.NO_DEADLINE}"
                    else:
                        condition += f" AND {k.SAME_DEADLINE}"
                        values["expect_deadline"] = lw.seen.deadline
                ops.append(
                    self._put_op(item, condition, names=k.STATE_NAMES, values=_values(**values))
                )
        for jw in change.jobs:
            item = {**k.job_key(jw.new.id), **items.job_item(jw.new)}
            if jw.expect_fence is None:
                ops.append(self._put_op(item, k.IS_NEW))
            else:
                ops.append(
                    self._put_op(item, k.JOB_FENCE_IS, values=_values(expect_fence=jw.expect_fence))
                )
        for tw in change.tasks:
            item = {**k.task_key(tw.new.id), **items.task_item(tw.new)}
            if tw.create:
                ops.append(self._put_op(item, k.IS_NEW))
            elif tw.expect_job_id is None:
                ops.append(self._put_op(item, k.TASK_HAS_NO_JOB))
            else:
                ops.append(
                    self._put_op(item, k.TASK_JOB_IS, values=_values(expect_job=tw.expect_job_id))
                )
        for job_id, lease_id in change.job_checks:
            ops.append(
                {
                    "ConditionCheck": {
                        "TableName": self.table,
                        "Key": _dump(k.job_key(job_id)),
                        "ConditionExpression": k.JOB_LEASE_IS,
                        "ExpressionAttributeValues": _values(expect_lease=lease_id),
                    }
                }
            )
        first_ceiling = len(ops)
        for ceiling in change.ceilings:
            ops.append(self._ceiling_op(ceiling))
        if len(ops) == 1:
            self._put_single(ops[0]["Put"])
            return
        try:
            self._transact(ops)
        except Conflict as lost:
            reasons = lost.details.get("reasons") or []
            if any(r == "ConditionalCheckFailed" for r in reasons[first_ceiling:]) and not any(
                r == "ConditionalCheckFailed" for r in reasons[:first_ceiling]
            ):
                raise CeilingReached("a ceiling is full", **lost.details) from lost
            raise

    def _ceiling_op(self, ceiling: Ceiling) -> dict[str, Any]:
        key = k.pool_key(ceiling.name) if ceiling.scope == "pool" else k.space_key(ceiling.name)
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": _dump(key),
            "UpdateExpression": f"ADD {k.ACTIVE} :delta",
            "ExpressionAttributeValues": _values(delta=ceiling.delta),
        }
        if ceiling.delta > 0 and ceiling.limit is not None:
            update["ConditionExpression"] = k.BELOW_CEILING
            update["ExpressionAttributeValues"].update(_values(limit=ceiling.limit))
        return {"Update": update}

    def held_count(self, scope: str, name: str) -> int:
        key = k.pool_key(name) if scope == "pool" else k.space_key(name)
        row = self._get(key, consistent=False)
        return int((row or {}).get(k.ACTIVE, 0))

    def _put_op(
        self,
        item: dict[str, Any],
        condition: str,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": _dump(item),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if names:
            put["ExpressionAttributeNames"] = names
        if values:
            put["ExpressionAttributeValues"] = values
        return {"Put": put}

    def _put_single(self, put: dict[str, Any]) -> None:
        self._write("put", Conflict("a conditional write lost"), **put)

    def renew(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        """Move a held lease's deadline; touches no index key (see keys.DUE_INDEX)."""
        self._set_on_lease(
            lease.id,
            expect,
            {
                "deadline": lease.deadline,
                "heartbeat_at": lease.heartbeat_at,
                "lease_seconds": lease.lease_seconds,
            },
        )

    def _set_on_lease(
        self,
        lease_id: str,
        expect: tuple[LeaseState, int],
        fields: dict[str, Any],
        deadline_was: int | None = None,
    ) -> None:
        """SET some attributes of a held lease, fenced on (state, fence) [and its deadline]."""
        state, fence = expect
        condition, extra = k.LEASE_IS_AT, {}
        if deadline_was is not None:
            condition, extra = (
                f"{condition} AND {k.SAME_DEADLINE}",
                {"expect_deadline": deadline_was},
            )
        self._write(
            "update",
            Conflict("lease moved on"),
            TableName=self.table,
            Key=_dump(k.lease_key(lease_id)),
            UpdateExpression="SET " + ", ".join(f"{name} = :{name}" for name in fields),
            ConditionExpression=condition,
            ExpressionAttributeNames=k.STATE_NAMES,
            ExpressionAttributeValues=_values(
                **fields, expect_state=state.value, expect_fence=fence, **extra
            ),
        )

    def due_leases(self, pool: str, now: int | None) -> list[str]:
        condition = f"{k.DUE_PK} = :p" + (f" AND {k.DUE_AT} <= :now" if now is not None else "")
        values = _values(p=k.due_pk(pool), **({"now": now} if now is not None else {}))
        rows = self._query_all(
            IndexName=k.DUE_INDEX,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return [k.lease_id_of(r) for r in rows]

    def count_held(self, pool: str, at_most: int) -> int:
        """Count a pool's held leases, reading no more than `at_most` index entries."""
        out = self._query(
            IndexName=k.DUE_INDEX,
            KeyConditionExpression=f"{k.DUE_PK} = :p",
            ExpressionAttributeValues=_values(p=k.due_pk(pool)),
            Select="COUNT",
            Limit=at_most,
        )
        self.meter.items_read += int(out.get("ScannedCount", 0))
        return int(out.get("Count", 0))

    def move_deadline(self, lease: Lease, seen: Lease) -> None:
        self._set_on_lease(
            lease.id,
            (seen.state, seen.fence),
            {"deadline": lease.deadline, k.DUE_AT: lease.due_at},
            deadline_was=seen.deadline,
        )

    def reindex(self, lease: Lease, expect: tuple[LeaseState, int]) -> None:
        self._set_on_lease(lease.id, expect, {k.DUE_AT: lease.due_at})

    def get_sweeper_state(self) -> SweeperState:
        row = self._get(k.SWEEPER_KEY)
        if row is None:
            return SweeperState()
        return SweeperState(last_pass_at=row.get("last_pass_at"), hold_until=row.get("hold_until"))

    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None:
        item = {**k.SWEEPER_KEY, "last_pass_at": state.last_pass_at, "hold_until": state.hold_until}
        if expect_last is None:
            put = self._put_op(item, k.IS_NEW)["Put"]
        else:
            put = self._put_op(item, k.SWEEP_AFTER, values=_values(expect_last=expect_last))["Put"]
        self._put_single(put)

    def put_event(self, event: Event) -> None:
        key = k.event_key(event.subject_kind, event.subject_id, event.at, event.id)
        self._put_single(self._put_op({**key, **items.event_item(event)}, k.IS_NEW)["Put"])

    # ----------------------------------------------------------------- table set-up

    def create_table(self) -> None:
        try:
            self.client.create_table(**k.table_definition(self.table))
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceInUseException":
                raise
        self.client.get_waiter("table_exists").wait(TableName=self.table)


def _lease_row(lease: Lease) -> dict[str, Any]:
    row = items.lease_item(lease)
    row.update(k.space_list_keys(lease.space, lease.created_at, lease.id))
    if lease.state is LeaseState.PENDING:
        row.update(
            k.queue_keys(lease.pool, k.queue_at(lease.created_at, lease.not_before), lease.id)
        )
    if lease.state in REPORTABLE and lease.due_at is not None:
        row[k.DUE_PK] = k.due_pk(lease.pool)
    else:
        row.pop(k.DUE_AT, None)
    return row


def _encode_cursor(last: Lease) -> str:
    position = k.space_list_keys(last.space, last.created_at, last.id)[k.SPACE_SK]
    return base64.urlsafe_b64encode(json.dumps({"p": position}).encode()).decode().rstrip("=")


def _decode_cursor(space: str, cursor: str) -> dict[str, Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        position = json.loads(base64.urlsafe_b64decode(padded.encode()))["p"]
        _, lease_id = str(position).split("#", 1)
    except (ValueError, KeyError, TypeError, binascii.Error) as bad:
        raise ValidationFailed("cursor: not a cursor this API handed out") from bad
    return _dump(
        {
            **k.lease_key(lease_id),
            k.SPACE_PK: k.space_list_pk(space),
            k.SPACE_SK: position,
        }
    )
