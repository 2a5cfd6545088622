"""The DynamoDB adapter of the Store port: one table, conditional writes as fencing."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from tenure.app.migrations import SchemaState
from tenure.app.ports import (
    DELEGATED_CEILING,
    INSTANCE_CEILING,
    KEY_CEILING,
    OWN_LIMIT_CEILINGS,
    POOL_CAP,
    RATE_CEILING,
    TREE_CEILING,
    WORKER_RETENTION_S,
    WORKERS_CAP,
    Attachment,
    Ceiling,
    Change,
    ClaimRecord,
    EventPage,
    Filed,
    GraphOp,
    HoldOp,
    LeasePage,
    RecordWrite,
    SchedulerState,
    Settings,
    SpacePage,
    SweeperState,
    TaskEntry,
    TaskPage,
    TokenPage,
    WorkerPage,
    split_ceiling,
)
from tenure.domain.errors import (
    AlreadyExists,
    CeilingReached,
    Conflict,
    NotFound,
    TenureError,
)
from tenure.domain.model import (
    Event,
    Instance,
    Job,
    KeptEvent,
    Lease,
    Pool,
    PoolVersion,
    Space,
    Task,
    TaskGraph,
    Token,
    Worker,
    Workflow,
    implied_pair,
    may_be_implied,
)
from tenure.domain.states import REPORTABLE, TERMINAL, LeaseState
from tenure.store import cursors, items
from tenure.store import keys as k
from tenure.store.calls import Retry
from tenure.store.codec import dump as _dump
from tenure.store.codec import load as _load
from tenure.store.codec import load_image as load_image  # the reactor reads stream images
from tenure.store.codec import values as _values
from tenure.store.event_waits import EventWaitRows
from tenure.store.inputs import InputReads
from tenure.store.reads import PagedReads
from tenure.store.retention import RetentionRows
from tenure.store.schema import SchemaRows
from tenure.store.table import Table
from tenure.store.task_numbers import TaskNumberBlocks


class DynamoStore:
    """The Store port on one DynamoDB table. The paged reads, the retention rows and the schema
    rows are collaborators of their own, each on the same metered primitives (`rows`); the
    store hands their calls on."""

    def __init__(self, client: Any, table: str, retry: Retry | None = None) -> None:
        self.client = client
        self.table = table
        self.rows = Table(client, table, retry)
        self.meter = self.rows.meter
        self.retry = self.rows.retry
        self.reads = PagedReads(self.rows)
        self.retention = RetentionRows(self.rows)
        self.schema = SchemaRows(self.rows)
        self.inputs = InputReads(self.rows)
        self.event_rows = EventWaitRows(self.rows)
        self.task_numbers = TaskNumberBlocks(self._reserve_task_numbers)

    # ------------------------------------------ what the collaborators above answer

    @property
    def list_budget(self) -> int:
        return self.reads.list_budget

    @list_budget.setter
    def list_budget(self, value: int) -> None:
        self.reads.list_budget = value

    @property
    def worker_budget(self) -> int:
        return self.reads.worker_budget

    @worker_budget.setter
    def worker_budget(self, value: int) -> None:
        self.reads.worker_budget = value

    @property
    def timeline_cap(self) -> int:
        return self.reads.timeline_cap

    @timeline_cap.setter
    def timeline_cap(self, value: int) -> None:
        self.reads.timeline_cap = value

    def list_workers(
        self, pool: str, limit: int = WORKERS_CAP, now_ms: int | None = None
    ) -> list[Worker]:
        return self.reads.list_workers(pool, limit, now_ms)

    def worker_page(
        self, pool: str, limit: int, cursor: str | None, now_ms: int | None = None
    ) -> WorkerPage:
        return self.reads.worker_page(pool, limit, cursor, now_ms)

    def list_leases(
        self,
        space: str,
        limit: int,
        cursor: str | None,
        state: LeaseState | None,
        pool: str | None,
    ) -> LeasePage:
        return self.reads.list_leases(space, limit, cursor, state, pool)

    def task_page(self, space: str, limit: int, cursor: str | None) -> TaskPage:
        return self.reads.task_page(space, limit, cursor)

    def newest_children(self, task_id: str, limit: int) -> list[str]:
        return self.inputs.newest_children(task_id, limit)

    def task_entries(self, task_ids: list[str]) -> dict[str, TaskEntry]:
        return self.inputs.task_entries(task_ids)

    def put_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        self.event_rows.put_event_wait(space, name, key, task_id, block_id)

    def event_waits(self, space: str, name: str, key: str, limit: int) -> list[tuple[str, str]]:
        return self.event_rows.event_waits(space, name, key, limit)

    def drop_event_wait(self, space: str, name: str, key: str, task_id: str, block_id: str) -> None:
        self.event_rows.drop_event_wait(space, name, key, task_id, block_id)

    def put_kept_event(self, event: KeptEvent) -> None:
        self.event_rows.put_kept_event(event)

    def kept_event(self, space: str, name: str, key: str) -> KeptEvent | None:
        return self.event_rows.kept_event(space, name, key)

    def timeline(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int | None,
        held: Sequence[Lease] = (),
    ) -> list[Event]:
        return self.reads.timeline(subject_kind, subject_id, limit, held)

    def timeline_page(
        self,
        subject_kind: str,
        subject_id: str,
        limit: int,
        cursor: str | None,
        newest_first: bool = False,
        reclaimed: Callable[[Lease], int | None] | None = None,
    ) -> EventPage:
        return self.reads.timeline_page(
            subject_kind, subject_id, limit, cursor, newest_first, reclaimed=reclaimed
        )

    def put_attachment(self, attachment: Attachment, cap: int, quota_bytes: int) -> None:
        self.retention.put_attachment(attachment, cap, quota_bytes)

    def count_log_containers(self, lease_id: str, containers: list[str], cap: int) -> set[str]:
        return self.retention.count_log_containers(lease_id, containers, cap)

    def list_attachments(self, lease_id: str) -> list[Attachment]:
        return self.retention.list_attachments(lease_id)

    def get_attachment(self, lease_id: str, attachment_id: str) -> Attachment | None:
        return self.retention.get_attachment(lease_id, attachment_id)

    def set_attachment_status(self, attachment: Attachment, status: str) -> None:
        self.retention.set_attachment_status(attachment, status)

    def delete_attachments(self, lease_id: str, attachment_ids: list[str]) -> None:
        self.retention.delete_attachments(lease_id, attachment_ids)

    def ended_leases(self, pool: str, ended_before: int, limit: int) -> list[str]:
        return self.retention.ended_leases(pool, ended_before, limit)

    def ended_since(self, pool: str, since: int, limit: int) -> list[str]:
        return self.retention.ended_since(pool, since, limit)

    def mark_reclaimed(self, lease: Lease) -> None:
        self.retention.mark_reclaimed(lease)

    def unindex_ended(self, lease_id: str) -> None:
        self.retention.unindex_ended(lease_id)

    def keep_detail(self, lease: Lease) -> None:
        self.retention.keep_detail(lease)

    def schema_state(self) -> SchemaState:
        return self.schema.schema_state()

    def save_schema(self, expect: SchemaState, new: SchemaState) -> bool:
        return self.schema.save_schema(expect, new)

    def scan_tokens(self, cursor: str | None, limit: int) -> tuple[list[Token], str | None]:
        return self.schema.scan_tokens(cursor, limit)

    def listed_token_ids(self, token_ids: list[str]) -> set[str]:
        return self.schema.listed_token_ids(token_ids)

    def scan_spaces(self, cursor: str | None, limit: int) -> tuple[list[Space], str | None]:
        return self.schema.scan_spaces(cursor, limit)

    def listed_space_keys(self, keys: list[str]) -> set[str]:
        return self.schema.listed_space_keys(keys)

    def list_space(self, space: Space) -> bool:
        return self.schema.list_space(space)

    def scan_tasks(self, cursor: str | None, limit: int) -> tuple[list[Task], str | None]:
        return self.schema.scan_tasks(cursor, limit)

    def keyed_tasks(self, keys: list[str]) -> set[str]:
        return self.schema.keyed_tasks(keys)

    def key_task(self, task: Task) -> bool:
        return self.schema.key_task(task)

    def children_marked(self, task_ids: list[str]) -> set[str]:
        return self.schema.children_marked(task_ids)

    def mark_children(self, task_id: str) -> bool:
        return self.schema.mark_children(task_id)

    def list_token(self, token: Token) -> bool:
        return self.schema.list_token(token)

    def scan_held_leases(self, cursor: str | None, limit: int) -> tuple[list[Lease], str | None]:
        return self.schema.scan_held_leases(cursor, limit)

    def mark_keeps_detail(self, lease: Lease) -> bool:
        try:
            self.retention.keep_detail(lease, only_if_absent=True)
        except Conflict:
            return False
        return True

    # -------------------------------------------------------------- set-up resources

    def put_space(self, space: Space) -> None:
        # The space and its list row land together: a space is never missing from the list.
        rows = (
            {**k.space_key(space.key), **items.space_item(space)},
            {**k.listed_space_key(space.key), "entity": "space_listed"},
        )
        ops = [
            {"Put": {"TableName": self.table, "Item": _dump(row), "ConditionExpression": k.IS_NEW}}
            for row in rows
        ]
        try:
            self.rows.transact(ops)
        except Conflict as lost:
            raise AlreadyExists(f"space {space.key} already exists") from lost

    def get_space(self, key: str) -> Space | None:
        row = self.rows.get(k.space_key(key))
        return items.space_from(row) if row else None

    def list_spaces(
        self, limit: int, cursor: str | None, only: tuple[str, ...] | None = None
    ) -> SpacePage:
        position = cursors.decode(cursor, "spaces", k.LISTED_SPACE_SHAPE) if cursor else ""
        if only is not None:
            keys = sorted(key for key in set(only) if f"SPACE#{key}" > position)
        else:
            request: dict[str, Any] = {
                "KeyConditionExpression": f"{k.PK} = :pk",
                "ExpressionAttributeValues": _values(pk=k.SPACES_PK),
                # One more than the page: a next page is promised only when it holds a space.
                "Limit": limit + 1,
                # Consistent: a space is listed right after it is made.
                "ConsistentRead": True,
            }
            if position:
                request["ExclusiveStartKey"] = _dump({k.PK: k.SPACES_PK, k.SK: position})
            out = self.rows.query(**request)
            keys = [str(_load(r)[k.SK]).removeprefix("SPACE#") for r in out.get("Items", [])]
        page = keys[:limit]
        rows = self.rows.batch_get([k.space_key(key) for key in page]) if page else []
        spaces = tuple(sorted((items.space_from(r) for r in rows), key=lambda sp: sp.key))
        after = cursors.encode("spaces", f"SPACE#{page[-1]}") if len(keys) > limit else None
        return SpacePage(spaces, after)

    def next_task_number(self, space: str) -> int:
        """A number no other task of `space` gets: from this instance's block for the space,
        reserving the next block on the space row when it has none left (one write a block,
        not one a task). Unique in the space and increasing within this instance; not in
        filing order across instances, and a block left unfinished is a gap."""
        return self.task_numbers.next(space)

    def _reserve_task_numbers(self, space: str, count: int) -> int:
        out = self.rows.write(
            "update",
            NotFound(f"space {space!r} does not exist"),
            TableName=self.table,
            Key=_dump(k.space_key(space)),
            UpdateExpression="ADD task_seq :count",
            ConditionExpression=k.EXISTS,
            ExpressionAttributeValues=_values(count=count),
            ReturnValues="UPDATED_NEW",
        )
        return int(_load(dict(out["Attributes"]))["task_seq"])

    def task_id_by_key(self, key: str) -> str | None:
        row = self.rows.get(k.task_key_row(key), consistent=False)
        return str(row["task_id"]) if row else None

    def put_workflow(self, workflow: Workflow) -> None:
        self.rows.put_new(
            {**k.workflow_key(workflow.space, workflow.slug), **items.workflow_item(workflow)},
            f"workflow {workflow.slug} in space {workflow.space}",
        )

    def get_workflow(self, space: str, slug: str) -> Workflow | None:
        row = self.rows.get(k.workflow_key(space, slug))
        return items.workflow_from(row) if row else None

    def put_pool(self, pool: Pool) -> None:
        self.rows.put_new({**k.pool_key(pool.name), **items.pool_item(pool)}, f"pool {pool.name}")

    def get_pool(self, name: str) -> Pool | None:
        # Consistent: a pool is used right after it is created (1 read unit, and the service
        # caches pools, so this is paid once per pool per process).
        row = self.rows.get(k.pool_key(name))
        return items.pool_from(row) if row else None

    def list_pools(self) -> list[Pool]:
        return [items.pool_from(r) for r in self.rows.partition(k.POOLS_PK, POOL_CAP)]

    def put_token(self, token: Token, event: Event | None = None) -> None:
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
            {
                "Put": {
                    "TableName": self.table,
                    "Item": _dump({**k.token_id_key(token.id), **items.token_item(token)}),
                    "ConditionExpression": k.IS_NEW,
                }
            },
        ]
        if event is not None:
            ops.append(self._event_put(event))
        try:
            self.rows.transact(ops)
        except Conflict as lost:
            raise AlreadyExists(f"token {token.name} already exists") from lost

    def get_token(self, token_hash: str) -> Token | None:
        # Consistent: a token is used right after it is handed out.
        row = self.rows.get(k.token_key(token_hash))
        return items.token_from(row) if row else None

    def get_token_by_id(self, token_id: str) -> Token | None:
        listed = self.rows.get(k.token_id_key(token_id))
        return self.get_token(str(listed["token_hash"])) if listed else None

    def list_tokens(self, kind: str | None, limit: int, cursor: str | None) -> TokenPage:
        request: dict[str, Any] = {
            "KeyConditionExpression": f"{k.PK} = :pk",
            "ExpressionAttributeValues": _values(pk=k.TOKENS_PK),
            "Limit": limit,
        }
        if cursor:
            position = cursors.decode(cursor, "tokens", k.TOKEN_ID_SHAPE)
            request["ExclusiveStartKey"] = _dump({k.PK: k.TOKENS_PK, k.SK: position})
        out = self.rows.query(**request)
        listed = [_load(r) for r in out.get("Items", [])]
        # The listed rows are write-once; revocation and last use are on the token rows.
        rows = self.rows.batch_get([k.token_key(str(r["token_hash"])) for r in listed], False)
        by_hash = {str(r["token_hash"]): items.token_from(r) for r in rows}
        tokens = tuple(
            by_hash[h]
            for h in (str(r["token_hash"]) for r in listed)
            if h in by_hash and (kind is None or by_hash[h].kind == kind)
        )
        last = out.get("LastEvaluatedKey")
        after = cursors.encode("tokens", str(_load(last)[k.SK])) if last and listed else None
        return TokenPage(tokens, after)

    def revoke_token(self, token_hash: str, at: int, event: Event | None = None) -> bool:
        update = {
            "TableName": self.table,
            "Key": _dump(k.token_key(token_hash)),
            "UpdateExpression": "SET revoked_at = :at",
            "ConditionExpression": k.TOKEN_NOT_REVOKED,
            "ExpressionAttributeValues": _values(at=at),
        }
        try:
            if event is None:
                self.rows.write("update", Conflict("the token was revoked already"), **update)
            else:
                # The event's id is new, so only the token's condition can lose.
                self.rows.transact([{"Update": update}, self._event_put(event)])
        except Conflict:
            return False
        return True

    def touch_token(self, token_hash: str, at: int, before: int) -> None:
        try:
            self.rows.write(
                "update",
                Conflict("the token's use was noted already"),
                TableName=self.table,
                Key=_dump(k.token_key(token_hash)),
                UpdateExpression="SET last_used_at = :at",
                ConditionExpression=k.TOKEN_USE_IS_OLD,
                ExpressionAttributeValues=_values(at=at, before=before),
            )
        except Conflict:
            return

    # ------------------------------------------------------------- tasks, jobs, leases

    def get_task(self, task_id: str, consistent: bool = True) -> Task | None:
        row = self.rows.get(k.task_key(task_id), consistent=consistent)
        # A voided id (void_task) holds a row of its own kind, which is no task.
        return items.task_from(row) if row and row.get("entity") == "task" else None

    def void_task(self, task_id: str, keep_until: int) -> bool:
        item = {**k.task_key(task_id), "entity": k.VOID_TASK, k.TTL_ATTRIBUTE: keep_until}
        put = self._put_op(item, k.IS_NEW_OR_VOID, values=_values(void=k.VOID_TASK))
        try:
            self._put_single(put["Put"])
        except Conflict:
            return False  # the task is there
        return True

    def get_job(self, job_id: str, consistent: bool = True) -> Job | None:
        row = self.rows.get(k.job_key(job_id), consistent=consistent)
        return items.job_from(row) if row else None

    def get_lease(self, lease_id: str, consistent: bool = True) -> Lease | None:
        row = self.rows.get(k.lease_key(lease_id), consistent=consistent)
        return items.lease_from(row) if row else None

    def get_leases(self, lease_ids: Iterable[str], consistent: bool = True) -> dict[str, Lease]:
        rows = self.rows.batch_get([k.lease_key(i) for i in dict.fromkeys(lease_ids)], consistent)
        return {lease.id: lease for lease in map(items.lease_from, rows)}

    def put_worker(self, worker: Worker) -> None:
        item = {
            **k.worker_key(worker.pool, worker.worker_id),
            **items.worker_item(worker),
            k.TTL_ATTRIBUTE: worker.last_seen // 1000 + WORKER_RETENTION_S,
        }
        self.rows.call("put", self.client.put_item, TableName=self.table, Item=_dump(item))

    def get_worker(self, pool: str, worker_id: str) -> Worker | None:
        row = self.rows.get(k.worker_key(pool, worker_id), consistent=False)
        return items.worker_from(row) if row else None

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        condition, values = f"{k.QUEUE_PK} = :q", {"q": k.queue_pk(pool, priority)}
        if due_by is not None:
            condition += f" AND {k.QUEUE_SK} <= :due"
            values["due"] = k.queue_due_bound(due_by)
        out = self.rows.query(
            IndexName=k.QUEUE_INDEX,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=_values(**values),
            Limit=limit,
        )
        return [k.lease_id_of(_load(row)) for row in out.get("Items", [])]

    def queue_expiring(self, pool: str, now: int, limit: int) -> list[str]:
        # The pool's pending leases with a queue timeout sit in the due index under a key of
        # their own, at their expiry: the same read as the sweeper's deadlines.
        return self._due(k.queue_expiry_pk(pool), now, limit)

    def mark_queue(self, pool: str, mark: str, now: int) -> None:
        # A map attribute's entry can only be set once the map exists: set the entry, or
        # (the first mark) the whole map, each conditioned so neither overwrites the other.
        key = _dump(k.pool_key(pool))
        for _ in range(3):
            with contextlib.suppress(Conflict):
                self.rows.write(
                    "update",
                    Conflict("no marks yet"),
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET queue_marks.#p = :now",
                    ConditionExpression=k.QUEUE_MARKS_EXIST,
                    ExpressionAttributeNames={"#p": mark},
                    ExpressionAttributeValues=_values(now=now),
                )
                return
            with contextlib.suppress(Conflict):
                self.rows.write(
                    "update",
                    Conflict("marked meanwhile"),
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET queue_marks = :marks",
                    ConditionExpression=k.FIRST_QUEUE_MARK,
                    ExpressionAttributeValues=_values(marks={mark: now}),
                )
                return
        raise Conflict(f"pool {pool!r} could not be marked {mark!r}")

    def unmark_queue(self, pool: str, mark: str, marked_before: int) -> bool:
        try:
            self.rows.write(
                "update",
                Conflict("marked since"),
                TableName=self.table,
                Key=_dump(k.pool_key(pool)),
                UpdateExpression="REMOVE queue_marks.#p",
                ConditionExpression=k.QUEUE_MARK_OLDER,
                ExpressionAttributeNames={"#p": mark},
                ExpressionAttributeValues=_values(before=marked_before),
            )
        except Conflict:
            return False
        return True

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
                    if not lw.seen.keeps_detail:
                        # A first log stream or attachment marks the row without a new
                        # version (RetentionRows.keep_detail): never written over unseen.
                        condition += f" AND {k.KEEPS_NO_DETAIL}"
                    if lw.seen.deadline is None:
                        condition += f" AND {k.NO_DEADLINE}"
                    else:
                        condition += f" AND {k.SAME_DEADLINE}"
                        values["expect_deadline"] = lw.seen.deadline
                ops.append(
                    self._put_op(item, condition, names=k.STATE_NAMES, values=_values(**values))
                )
        # A new job that nothing names yet (`ahead`) is written on its own, before the rest,
        # sparing it the transaction (AWS bills a transaction's items twice): see JobWrite.
        ahead = [jw for jw in change.jobs if jw.ahead and jw.expect_fence is None]
        for jw in change.jobs:
            item = {**k.job_key(jw.new.id), **items.job_item(jw.new)}
            if jw in ahead:
                continue
            if jw.expect_fence is None:
                ops.append(self._put_op(item, k.IS_NEW))
            else:
                # A missing row of a task's first job is that job at fence 1.
                implied = jw.expect_fence == 1 and may_be_implied(jw.new)
                fenced = k.IMPLIED_JOB_FENCE_IS if implied else k.JOB_FENCE_IS
                ops.append(self._put_op(item, fenced, values=_values(expect_fence=jw.expect_fence)))
        for tw in change.tasks:
            item = {**k.task_key(tw.new.id), **_task_row(tw.new)}
            # A write that does not carry a cancel must not land on a cancelled task.
            kept = "" if tw.new.cancelled is not None else f" AND {k.TASK_NOT_CANCELLED}"
            if tw.create:
                ops.append(self._put_op(item, k.IS_NEW))
            elif tw.expect_version is not None:
                job_is, job = (
                    (k.TASK_HAS_NO_JOB, {})
                    if tw.expect_job_id is None
                    else (k.TASK_JOB_IS, {"expect_job": tw.expect_job_id})
                )
                values = _values(**job, expect_task_version=tw.expect_version)
                condition = f"{job_is} AND {k.TASK_VERSION_IS}{kept}"
                ops.append(self._put_op(item, condition, values=values))
            elif tw.expect_job_id is None:
                ops.append(self._put_op(item, k.TASK_HAS_NO_JOB + kept))
            else:
                ops.append(
                    self._put_op(
                        item, k.TASK_JOB_IS + kept, values=_values(expect_job=tw.expect_job_id)
                    )
                )
        for job_id, lease_id in change.job_checks:
            ops.append(
                {
                    "ConditionCheck": {
                        "TableName": self.table,
                        "Key": _dump(k.job_key(job_id)),
                        "ConditionExpression": (
                            k.IMPLIED_JOB_LEASE_IS
                            if implied_pair(job_id, lease_id)
                            else k.JOB_LEASE_IS
                        ),
                        "ExpressionAttributeValues": _values(expect_lease=lease_id),
                    }
                }
            )
        ops.extend(self._graph_op(g) for g in change.graph)
        ops.extend(self._hold_op(h) for h in change.holds)
        ops.extend(self._record_op(rw) for rw in change.records)
        first_ceiling = len(ops)
        for ceiling in change.ceilings:
            ops.append(self._ceiling_op(ceiling))
        for jw in ahead:
            first = self._put_op({**k.job_key(jw.new.id), **items.job_item(jw.new)}, k.IS_NEW)
            self._put_single(first["Put"])
        if not ops:
            return
        if len(ops) == 1 and "Put" in ops[0]:
            self._put_single(ops[0]["Put"])
            return
        try:
            self.rows.transact(ops)
        except Conflict as lost:
            reasons = lost.details.get("reasons") or []
            if any(r == "ConditionalCheckFailed" for r in reasons[first_ceiling:]) and not any(
                r == "ConditionalCheckFailed" for r in reasons[:first_ceiling]
            ):
                # Which one: a full key lets a claim move on to other keys, the rest do not.
                full = [
                    c
                    for c, r in zip(change.ceilings, reasons[first_ceiling:], strict=False)
                    if r == "ConditionalCheckFailed"
                ]
                raise CeilingReached(
                    "a ceiling is full", scope=full[0].scope, name=full[0].name, **lost.details
                ) from lost
            raise

    def find_claim(
        self, pool: str, claimant: str, worker_id: str, claim_id: str
    ) -> ClaimRecord | None:
        # Consistent: the retry of a claim whose answer was lost may come at once. A record
        # past its expires_at (TTL deletes lazily) still names its lease: that lease has ended
        # by then, which the service sees when it reads it.
        row = self.rows.get(k.claim_key(pool, claimant, worker_id, claim_id))
        return items.claim_from(row) if row else None

    def point_claim(self, record: ClaimRecord, previous: str | None) -> None:
        op = self._record_op(RecordWrite(record, previous))
        if previous is None:
            self.rows.write("put", Conflict("a claim with this claim_id is under way"), **op["Put"])
        else:
            failed = Conflict("the claim's record was moved on by another call")
            self.rows.write("update", failed, **op["Update"])

    def _record_op(self, rw: RecordWrite) -> dict[str, Any]:
        """A claim record's write: new (only if it is), or moved on from `previous`."""
        key = _claim_key(rw.record)
        if rw.previous is None:
            return {
                "Put": {
                    "TableName": self.table,
                    "Item": _dump({**key, **items.claim_item(rw.record)}),
                    "ConditionExpression": k.IS_NEW,
                }
            }
        # Only the lease and the row's lifetime move; the key's parts stay as written.
        return {
            "Update": {
                "TableName": self.table,
                "Key": _dump(key),
                "UpdateExpression": f"SET lease_id = :lease, {k.TTL_ATTRIBUTE} = :keep",
                "ConditionExpression": k.CLAIM_NAMES,
                "ExpressionAttributeValues": _values(
                    lease=rw.record.lease_id, keep=rw.record.expires_at, expect_lease=rw.previous
                ),
            }
        }

    def take_request(self, record: Filed, now_ms: int) -> Filed | None:
        key = k.request_key(record.key)
        row = {**key, "entity": "request", **dataclasses.asdict(record)}
        put = self._put_op(
            {k2: v for k2, v in row.items() if v is not None},
            k.TAKE_REQUEST,
            values=_values(now_s=now_ms // 1000, now_ms=now_ms),
        )
        try:
            self._put_single(put["Put"])
            return None
        except Conflict:
            held = self.rows.get(key)
        if held is None:  # dropped between the write and the read: the caller tries again
            raise Conflict("the idempotency record moved")
        return Filed(
            key=record.key,
            body_hash=str(held["body_hash"]),
            expires_at=int(held[k.TTL_ATTRIBUTE]),
            locked_until=int(held["locked_until"]),
            status=int(held["status"]) if "status" in held else None,
            answer=str(held["answer"]) if "answer" in held else None,
        )

    def finish_request(self, key: str, status: int, answer: str) -> None:
        self.rows.write(
            "update",
            Conflict("the request's record is gone"),
            TableName=self.table,
            Key=_dump(k.request_key(key)),
            UpdateExpression="SET #s = :status, answer = :answer",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=_values(status=status, answer=answer),
        )

    def drop_request(self, key: str) -> None:
        self.rows.write(
            "delete",
            Conflict("unreachable: the delete is unconditional"),
            TableName=self.table,
            Key=_dump(k.request_key(key)),
        )

    # --------------------------------------------------------------- waiting claims

    def wait_slots(self, token_id: str) -> dict[int, int]:
        return k.wait_slots_of(self.rows.get(k.wait_slots_key(token_id)) or {})

    def take_wait_slot(self, token_id: str, slot: int, now_ms: int, until_ms: int) -> None:
        self.rows.write(
            "update",
            Conflict("the wait slot is held"),
            TableName=self.table,
            Key=_dump(k.wait_slots_key(token_id)),
            UpdateExpression=f"SET #slot = :until, {k.TTL_ATTRIBUTE} = :keep",
            ConditionExpression=k.WAIT_SLOT_FREE,
            ExpressionAttributeNames={"#slot": k.wait_slot_attribute(slot)},
            ExpressionAttributeValues=_values(
                now=now_ms, until=until_ms, keep=until_ms // 1000 + k.WAIT_SLOTS_KEEP_SECONDS
            ),
        )

    def free_wait_slot(self, token_id: str, slot: int, until_ms: int) -> None:
        self.rows.write(
            "update",
            Conflict("the wait slot is no longer this claim's"),
            TableName=self.table,
            Key=_dump(k.wait_slots_key(token_id)),
            UpdateExpression="REMOVE #slot",
            ConditionExpression=k.WAIT_SLOT_IS_OURS,
            ExpressionAttributeNames={"#slot": k.wait_slot_attribute(slot)},
            ExpressionAttributeValues=_values(until=until_ms),
        )

    def _ceiling_op(self, ceiling: Ceiling) -> dict[str, Any]:
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": _dump(_ceiling_key(ceiling.scope, ceiling.name)),
            "UpdateExpression": f"ADD {k.ACTIVE} :delta",
            "ExpressionAttributeValues": _values(delta=ceiling.delta),
        }
        own_limit = ceiling.scope in OWN_LIMIT_CEILINGS
        if ceiling.delta > 0 and ceiling.limit is not None:
            update["ConditionExpression"] = k.BELOW_LIMIT if own_limit else k.BELOW_CEILING
            if own_limit:
                update["ExpressionAttributeValues"] = _values(
                    delta=ceiling.delta, limit=ceiling.limit
                )
        if ceiling.scope == RATE_CEILING:
            _, minute = split_ceiling(ceiling.name)
            keep = (int(minute) + 1) * 60 + k.RATE_COUNTER_KEEP_SECONDS
            update["UpdateExpression"] += f" SET {k.TTL_ATTRIBUTE} = :keep"
            update["ExpressionAttributeValues"] = {
                **update["ExpressionAttributeValues"],
                **_values(keep=keep),
            }
        return {"Update": update}

    def held_count(self, scope: str, name: str) -> int:
        row = self.rows.get(_ceiling_key(scope, name), consistent=False)
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
        self.rows.write("put", Conflict("a conditional write lost"), **put)

    def renew(self, lease: Lease, expect: tuple[LeaseState, int], move_due: bool = False) -> None:
        """Move a held lease's deadline; touches no index key (see keys.DUE_INDEX) unless
        `move_due`: a shortened lease moves its due_at entry earlier in the same write."""
        fields: dict[str, Any] = {
            "deadline": lease.deadline,
            "heartbeat_at": lease.heartbeat_at,
            "lease_seconds": lease.lease_seconds,
        }
        if move_due:
            fields[k.DUE_AT] = lease.due_at
        self._set_on_lease(lease.id, expect, fields)

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
        self.rows.write(
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

    def due_leases(self, pool: str, now: int | None, limit: int | None = None) -> list[str]:
        return self._due(k.due_pk(pool), now, limit)

    def _due(self, pk: str, now: int | None, limit: int | None) -> list[str]:
        """The lease ids under `pk` in the due index, due by `now` (all of them when None):
        one page of `limit`, or every page when no limit is given."""
        condition = f"{k.DUE_PK} = :p" + (f" AND {k.DUE_AT} <= :now" if now is not None else "")
        values = _values(p=pk, **({"now": now} if now is not None else {}))
        request: dict[str, Any] = {
            "IndexName": k.DUE_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if limit is None:
            rows = self.rows.query_all(**request)
        else:
            if limit < 1:
                raise ValueError("a page needs a limit of at least 1")
            rows = [_load(r) for r in self.rows.query(**request, Limit=limit).get("Items", [])]
        return [k.lease_id_of(r) for r in rows]

    def count_held(self, pool: str, at_most: int) -> int:
        """Count a pool's held leases, reading no more than `at_most` index entries."""
        out = self.rows.query(
            IndexName=k.DUE_INDEX,
            KeyConditionExpression=f"{k.DUE_PK} = :p",
            ExpressionAttributeValues=_values(p=k.due_pk(pool)),
            Select="COUNT",
            Limit=at_most,
        )
        return int(out.get("Count", 0))  # (the meter counted ScannedCount)

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
        row = self.rows.get(k.SWEEPER_KEY)
        if row is None:
            return SweeperState()
        holds = {str(pool): int(until) for pool, until in (row.get("holds") or {}).items()}
        waiting = {str(p): int(t) for p, t in (row.get("capacity_waiting") or {}).items()}
        return SweeperState(
            last_pass_at=row.get("last_pass_at"),
            holds=holds,
            capacity_waiting=waiting,
            ttl_cursor=int(row["ttl_cursor"]) if row.get("ttl_cursor") is not None else None,
        )

    def put_sweeper_state(self, state: SweeperState, expect_last: int | None) -> None:
        item = {
            **k.SWEEPER_KEY,
            "last_pass_at": state.last_pass_at,
            "holds": dict(state.holds),
            "capacity_waiting": dict(state.capacity_waiting),
            "ttl_cursor": state.ttl_cursor,
        }
        if expect_last is None:
            put = self._put_op(item, k.IS_NEW)["Put"]
        else:
            put = self._put_op(item, k.SWEEP_AFTER, values=_values(expect_last=expect_last))["Put"]
        self._put_single(put)

    def put_event(self, event: Event) -> None:
        self._put_single(self._event_put(event)["Put"])

    def put_anchor(self, event: Event) -> None:
        key = k.anchor_key(event.subject_kind, event.subject_id, event.at, event.id)
        self._put_single(self._put_op({**key, **items.event_item(event)}, k.IS_NEW)["Put"])

    def _event_put(self, event: Event) -> dict[str, Any]:
        """A timeline event's put, only if new, alone or as one item of a transaction."""
        key = k.event_key(event.subject_kind, event.subject_id, event.at, event.id)
        return self._put_op({**key, **items.event_item(event)}, k.IS_NEW)

    # ---------------------------------------------------------- pools, spaces, instance

    def _settings_update(self, settings: Settings) -> tuple[str, dict[str, str], dict[str, Any]]:
        """An UpdateExpression that SETs and REMOVEs only the named attributes (every name
        goes through a placeholder: `name` and the like are reserved words)."""
        names = {f"#a{i}": a for i, a in enumerate([*settings.set, *settings.remove])}
        placeholders = {a: p for p, a in names.items()}
        parts = []
        if settings.set:
            parts.append("SET " + ", ".join(f"{placeholders[a]} = :v_{a}" for a in settings.set))
        if settings.remove:
            parts.append("REMOVE " + ", ".join(placeholders[a] for a in settings.remove))
        values = {f"v_{a}": v for a, v in settings.set.items()}
        return " ".join(parts), names, values

    def _update_row(
        self,
        key: dict[str, str],
        settings: Settings,
        failed: TenureError,
        condition: str = k.EXISTS,
        **expect: Any,
    ) -> dict[str, Any]:
        expression, names, values = self._settings_update(settings)
        given = _values(**values, **expect)
        out = self.rows.write(
            "update",
            failed,
            TableName=self.table,
            Key=_dump(key),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            **({"ExpressionAttributeValues": given} if given else {}),
            ReturnValues="ALL_NEW",
        )
        return _load(dict(out["Attributes"]))

    def update_pool(
        self,
        name: str,
        settings: Settings,
        expect_version: int | None = None,
        superseded: PoolVersion | None = None,
    ) -> Pool:
        missing = NotFound(f"pool {name!r} does not exist")
        if expect_version is None:
            return items.pool_from(self._update_row(k.pool_key(name), settings, missing))
        if superseded is None:
            raise ValueError("a version change keeps the version it supersedes")
        expression, names, values = self._settings_update(settings)
        row = {
            **k.pool_version_key(name, superseded.version),
            **items.pool_version_item(superseded),
        }
        ops = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": _dump(k.pool_key(name)),
                    "UpdateExpression": expression,
                    "ConditionExpression": k.POOL_VERSION_IS,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": _values(**values, expect_version=expect_version),
                }
            },
            self._put_op(row, k.IS_NEW),
        ]
        self.rows.transact(ops)
        pool = self.get_pool(name)
        if pool is None:
            raise missing
        return pool

    def get_pool_version(self, pool: str, version: int) -> PoolVersion | None:
        # Eventually consistent: a superseded version never changes once written.
        row = self.rows.get(k.pool_version_key(pool, version), consistent=False)
        return items.pool_version_from(row) if row else None

    def update_space(self, key: str, settings: Settings) -> Space:
        missing = NotFound(f"space {key!r} does not exist")
        return items.space_from(self._update_row(k.space_key(key), settings, missing))

    def get_instance(self) -> Instance:
        row = self.rows.get(k.INSTANCE_KEY)
        return items.instance_from(row) if row else Instance()

    def update_instance(self, settings: Settings) -> Instance:
        # The row is made by its first update (no condition): it always exists in effect.
        expression, names, values = self._settings_update(settings)
        out = self.rows.write(
            "update",
            Conflict("the instance settings could not be written"),
            TableName=self.table,
            Key=_dump(k.INSTANCE_KEY),
            UpdateExpression=expression,
            **({"ExpressionAttributeNames": names} if names else {}),
            **({"ExpressionAttributeValues": _values(**values)} if values else {}),
            ReturnValues="ALL_NEW",
        )
        return items.instance_from(_load(dict(out.get("Attributes", {}))))

    # ----------------------------------------------------------------- table set-up

    def create_table(self) -> None:
        try:
            self.client.create_table(**k.table_definition(self.table))
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceInUseException":
                raise
        self.client.get_waiter("table_exists").wait(TableName=self.table)
        self.enable_ttl()

    def enable_ttl(self) -> None:
        """Turn on TTL (CreateTable cannot); the template's TimeToLiveSpecification says the
        same. Reads never rely on it: TTL deletes lazily, they filter on expires_at."""
        ttl = self.client.describe_time_to_live(TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
            return
        self.client.update_time_to_live(
            TableName=self.table, TimeToLiveSpecification=k.TTL_SPECIFICATION
        )

    # ------------------------------------------------ the task graph and the scheduler

    def _graph_op(self, g: GraphOp) -> dict[str, Any]:
        graph = _dump(k.task_graph_key(g.task_id))
        if g.op == "add":
            names = {f"#c{i}": name for i, (name, _) in enumerate(g.counts)}
            deltas: dict[str, int | None] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
            expression = "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(names)))
            copied = g.name == "succeeded_at"
            if g.name:
                expression += " SET #mark = :at"
                names["#mark"] = g.name
                deltas["at"] = g.at
            if copied:  # a parent's own success, copied from its lease with its first child
                expression += ", success_copied = :yes"
                deltas["yes"] = True
            added: dict[str, Any] = {
                "TableName": self.table,
                "Key": graph,
                "UpdateExpression": expression,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": _values(**deltas),
            }
            conditions = []
            if any(name == "children_total" and d > 0 for name, d in g.counts):
                conditions.append(k.NOT_CANCEL_REACHED)
            if copied:
                conditions.append(k.NOT_SUCCEEDED)
            if conditions:
                added["ConditionExpression"] = " AND ".join(f"({c})" for c in conditions)
            return {"Update": added}
        if g.op == "reach":
            names = {f"#c{i}": name for i, (name, _) in enumerate(g.counts)}
            reach: dict[str, Any] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
            expression = "SET cancel_reached_at = :at, cancel_root = :root"
            condition = k.NOT_CANCEL_REACHED
            if g.name:  # walked at once too: only while it still has no child
                expression += ", #walked = :at"
                names["#walked"] = g.name
                condition += f" AND {k.NO_CHILDREN}"
                reach["zero"] = 0
            if len(g.counts):
                expression += " ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(g.counts)))
            update_reach: dict[str, Any] = {
                "TableName": self.table,
                "Key": graph,
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeValues": _values(**reach, at=g.at, root=g.other),
            }
            if names:
                update_reach["ExpressionAttributeNames"] = names
            return {"Update": update_reach}
        if g.op == "usage":
            names = {f"#c{i}": name for i, (name, _) in enumerate(g.counts)}
            adds: dict[str, Any] = {f"c{i}": d for i, (_, d) in enumerate(g.counts)}
            expression = "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(names)))
            values = _values(**adds)
            values[":keys"] = {"SS": [g.name]}
            names["#keys"] = "usage_cost_keys"
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": graph,
                    "UpdateExpression": expression + ", #keys :keys",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                }
            }
        if g.op == "edge":
            item: dict[str, Any] = {
                **k.task_edge_key(g.task_id, g.name, g.other),
                "entity": "edge",
            }
            if g.at is not None:
                item["counted_at"] = g.at
            return self._put_op(item, k.IS_NEW)
        if g.op == "unedge":
            return {
                "Delete": {
                    "TableName": self.table,
                    "Key": _dump(k.task_edge_key(g.task_id, g.name, g.other)),
                    "ConditionExpression": k.EDGE_COUNTED
                    if g.at is not None
                    else k.EDGE_NOT_COUNTED,
                }
            }
        if g.op in ("met", "unmet"):
            return {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": graph,
                    "ConditionExpression": k.HAS_SUCCEEDED if g.op == "met" else k.NOT_SUCCEEDED,
                }
            }
        if g.op == "succeeded":
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": graph,
                    "UpdateExpression": (
                        "SET succeeded_at = :at, success_copied = :yes, succeeded_lease = :lease"
                    ),
                    "ConditionExpression": k.SUCCESS_DUE,
                    "ExpressionAttributeValues": _values(at=g.at, yes=True, lease=g.other),
                }
            }
        if g.op == "link":
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": graph,
                    "UpdateExpression": "SET linked_at = if_not_exists(linked_at, :at)",
                    "ConditionExpression": k.NOT_SUCCEEDED,
                    "ExpressionAttributeValues": _values(at=g.at),
                }
            }
        if g.op == "lease_open":
            ended = {state.value: state.value for state in TERMINAL}
            return {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": _dump(k.lease_key(g.other)),
                    "ConditionExpression": k.LEASE_OPEN,
                    "ExpressionAttributeNames": k.STATE_NAMES,
                    "ExpressionAttributeValues": _values(**ended),
                }
            }
        if g.op == "run_is":
            check: dict[str, Any] = {
                "TableName": self.table,
                "Key": _dump(k.task_key(g.task_id)),
                "ConditionExpression": k.TASK_JOB_IS if g.other else k.TASK_HAS_NO_JOB,
            }
            if g.other:
                check["ExpressionAttributeValues"] = _values(expect_job=g.other)
            return {"ConditionCheck": check}
        if g.op == "job_is":
            return {
                "ConditionCheck": {
                    "TableName": self.table,
                    "Key": _dump(k.job_key(g.name)),
                    "ConditionExpression": (
                        k.IMPLIED_JOB_LEASE_IS if implied_pair(g.name, g.other) else k.JOB_LEASE_IS
                    ),
                    "ExpressionAttributeValues": _values(expect_lease=g.other),
                }
            }
        if g.op == "mark":
            condition = k.AUTO_ENQUEUE_DUE if g.name == "auto_enqueued_at" else k.NOT_MARKED
            update: dict[str, Any] = {
                "TableName": self.table,
                "Key": graph,
                "UpdateExpression": "SET #mark = :at",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#mark": g.name},
                "ExpressionAttributeValues": _values(at=g.at),
            }
            return {"Update": update}
        if g.op == "advance":
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": graph,
                    "UpdateExpression": "SET #mark = :to",
                    "ConditionExpression": k.ADVANCES,
                    "ExpressionAttributeNames": {"#mark": g.name},
                    "ExpressionAttributeValues": _values(to=g.other),
                }
            }
        if g.op == "has_children":
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": _dump(k.task_key(g.task_id)),
                    "UpdateExpression": "SET has_children = :yes",
                    "ConditionExpression": k.EXISTS,
                    "ExpressionAttributeValues": _values(yes=True),
                }
            }
        raise ValueError(f"unknown graph op {g.op!r}")

    def _hold_op(self, h: HoldOp) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": _dump(k.SCHEDULER_KEY),
                "UpdateExpression": f"{'ADD' if h.add else 'DELETE'} #set :ids",
                "ExpressionAttributeNames": {"#set": k.HOLD_SETS[h.set_name]},
                "ExpressionAttributeValues": {":ids": {"SS": [h.task_id]}},
            }
        }

    def get_graph(self, task_id: str) -> TaskGraph:
        row = self.rows.get(k.task_graph_key(task_id))
        return items.graph_from(task_id, row or {})

    def get_graphs(self, task_ids: list[str], consistent: bool = False) -> dict[str, TaskGraph]:
        ids = list(dict.fromkeys(task_ids))
        rows = self.rows.batch_get([k.task_graph_key(t) for t in ids], consistent)
        found = {k.task_id_of(r): r for r in rows}
        return {t: items.graph_from(t, found.get(t, {})) for t in ids}

    def graph_edges(
        self, task_id: str, kind: str, limit: int, after: str | None = None
    ) -> list[str]:
        prefix = k.EDGE_PREFIX[kind]
        start = (
            {}
            if after is None
            else {"ExclusiveStartKey": _dump(k.task_edge_key(task_id, kind, after))}
        )
        out = self.rows.query(
            KeyConditionExpression=f"{k.PK} = :pk AND begins_with({k.SK}, :prefix)",
            ExpressionAttributeValues=_values(pk=f"TASK#{task_id}", prefix=prefix),
            Limit=limit,
            **start,
        )
        return [str(_load(r)[k.SK]).removeprefix(prefix) for r in out.get("Items", [])]

    def edges_counted(self, task_id: str, kind: str, others: list[str]) -> dict[str, bool]:
        if not others:
            return {}
        keys = [k.task_edge_key(task_id, kind, o) for o in dict.fromkeys(others)]
        rows = self.rows.batch_get(keys, True)
        prefix = k.EDGE_PREFIX[kind]
        return {
            str(row[k.SK]).removeprefix(prefix): row.get("counted_at") is not None for row in rows
        }

    def count_edge(self, task_id: str, kind: str, other: str, counter: str, at: int) -> bool:
        target = task_id if kind == "child" else other
        ops = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": _dump(k.task_edge_key(task_id, kind, other)),
                    "UpdateExpression": "SET counted_at = :at",
                    "ConditionExpression": k.EDGE_NOT_COUNTED,
                    "ExpressionAttributeValues": _values(at=at),
                }
            },
            {
                "Update": {
                    "TableName": self.table,
                    "Key": _dump(k.task_graph_key(target)),
                    "UpdateExpression": "ADD #counter :one",
                    "ExpressionAttributeNames": {"#counter": counter},
                    "ExpressionAttributeValues": _values(one=1),
                }
            },
        ]
        try:
            self.rows.transact(ops)
        except Conflict:
            return False
        return True

    def in_graph(self, task_id: str) -> bool:
        out = self.rows.query(
            KeyConditionExpression=f"{k.PK} = :pk AND {k.SK} BETWEEN :first AND :last",
            ExpressionAttributeValues=_values(
                pk=f"TASK#{task_id}", first=k.LINKED_FROM, last=k.LINKED_TO
            ),
            ConsistentRead=True,
            Limit=1,
        )
        return bool(out.get("Items"))

    def settle_graph(self, task_id: str, name: str, at: int, lease_id: str | None = None) -> bool:
        if name == "rollup_at":
            expression = "SET rollup_at = :at, succeeded_at = if_not_exists(succeeded_at, :at)"
            condition, values = k.ROLLUP_DUE, _values(at=at, zero=0)
        elif lease_id is not None:
            expression = "SET succeeded_at = :at, succeeded_lease = :lease"
            condition, values = k.SUCCESS_DUE, _values(at=at, lease=lease_id)
        else:
            expression, condition, values = "SET succeeded_at = :at", k.SUCCESS_DUE, _values(at=at)
        try:
            self._update_graph(task_id, expression, condition, values)
        except Conflict:
            if lease_id is not None and name != "rollup_at":
                # Not due (it succeeded before, or children are outstanding): the lease is
                # still the task's newest success, unless a later one is named already.
                with contextlib.suppress(Conflict):
                    self._update_graph(
                        task_id,
                        "SET succeeded_lease = :lease",
                        k.NEWER_SUCCESS,
                        _values(lease=lease_id),
                    )
            return False
        return True

    def _update_graph(
        self, task_id: str, expression: str, condition: str, values: dict[str, Any]
    ) -> None:
        self.rows.write(
            "update",
            Conflict("not due"),
            TableName=self.table,
            Key=_dump(k.task_graph_key(task_id)),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    def get_scheduler(self, consistent: bool = True) -> SchedulerState:
        row = self.rows.get(k.SCHEDULER_KEY, consistent=consistent) or {}
        return SchedulerState(
            paused=bool(row.get("paused", False)),
            paused_by=row.get("paused_by"),
            paused_at=row.get("paused_at"),
            paused_tasks=frozenset(row.get(k.HOLD_SETS["paused"]) or ()),
            attention=frozenset(row.get(k.HOLD_SETS["attention"]) or ()),
            blocked=frozenset(row.get(k.HOLD_SETS["blocked"]) or ()),
            cancelled=frozenset(row.get(k.HOLD_SETS["cancelled"]) or ()),
        )

    def set_scheduler_paused(self, paused: bool, by: str, at: int) -> None:
        self.rows.call(
            "update",
            self.client.update_item,
            TableName=self.table,
            Key=_dump(k.SCHEDULER_KEY),
            UpdateExpression="SET paused = :paused, paused_by = :by, paused_at = :at",
            ExpressionAttributeValues=_values(paused=paused, by=by, at=at),
        )

    def _queue_request(
        self, pool: str, created_before: int | None, priority: int | None = None
    ) -> dict[str, Any]:
        condition = f"{k.QUEUE_PK} = :q"
        values: dict[str, Any] = {"q": k.queue_pk(pool, priority)}
        if created_before is not None:
            condition += f" AND {k.QUEUE_SK} < :before"
            values["before"] = f"{created_before:013d}"
        return {
            "IndexName": k.QUEUE_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": _values(**values),
        }

    def count_queue(
        self, pool: str, created_before: int | None, at_most: int, priority: int | None = None
    ) -> int:
        out = self.rows.query(
            **self._queue_request(pool, created_before, priority), Select="COUNT", Limit=at_most
        )
        return int(out.get("Count", 0))

    def queue_page(
        self, pool: str, created_before: int | None, limit: int, priority: int | None = None
    ) -> list[str]:
        out = self.rows.query(**self._queue_request(pool, created_before, priority), Limit=limit)
        return [k.lease_id_of(_load(row)) for row in out.get("Items", [])]


def _lease_row(lease: Lease) -> dict[str, Any]:
    row = items.lease_item(lease)
    if not lease.via_task:  # else its task's list entry lists it (store.reads.list_leases)
        row.update(k.space_list_keys(lease.space, lease.created_at, lease.id))
    if lease.state is LeaseState.PENDING:
        at = k.queue_at(lease.created_at, lease.not_before)
        row.update(k.queue_keys(lease.pool, at, lease.id, lease.priority))
    if lease.state is LeaseState.PENDING and lease.queue_expires_at is not None:
        # The sweeper finds it by its expiry, in a partition of its own (app/leases/timeouts).
        row[k.DUE_PK] = k.queue_expiry_pk(lease.pool)
        row[k.DUE_AT] = lease.queue_expires_at
    elif lease.state in REPORTABLE and lease.due_at is not None:
        row[k.DUE_PK] = k.due_pk(lease.pool)
    else:
        row.pop(k.DUE_AT, None)
    if lease.keeps_detail and lease.reclaimed_at is None:
        # In the ended index once it has both keys: this one from the lease's first log
        # stream or attachment (or its ending, on an older table), `ended_at` from its end.
        row[k.ENDED_PK] = k.ended_pk(lease.pool)
    return row


def _task_row(task: Task) -> dict[str, Any]:
    # Every write of a task carries its list keys, unchanged from the first: the KEYS_ONLY
    # index is written when the task is filed and never again. A task filed before the index
    # existed joins the list with its next write.
    return {**items.task_item(task), **k.task_list_keys(task.space, task.created_at, task.id)}


def _ceiling_key(scope: str, name: str) -> dict[str, str]:
    if scope == INSTANCE_CEILING:
        return k.INSTANCE_KEY
    if scope == KEY_CEILING:
        return k.key_counter_key(*split_ceiling(name))
    if scope == RATE_CEILING:
        pool, minute = split_ceiling(name)
        return k.rate_counter_key(pool, int(minute))
    if scope in (DELEGATED_CEILING, TREE_CEILING):
        return k.delegation_counter_key(scope, name)
    return k.pool_key(name) if scope == "pool" else k.space_key(name)


def _claim_key(claim: ClaimRecord) -> dict[str, str]:
    return k.claim_key(claim.pool, claim.claimant, claim.worker_id, claim.claim_id)
