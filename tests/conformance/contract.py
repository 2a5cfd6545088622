"""The store contract, written once and run on every Store: the in-memory fake (tests/unit),
moto (tests/aws) and DynamoDB Local (tests/conformance), so the three cannot drift.

A test module subclasses `StoreContract` and provides a `make_rig` fixture: a callable that
returns a `ContractRig` on a fresh table of its engine.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import pytest
from tenure.app.leases.claims import Claimed
from tenure.app.migrations import LISTED_BY_TASK_FROM_SCHEMA, SchemaState, migrate
from tenure.app.ports import (
    WORKER_RETENTION_S,
    AbsencePush,
    Change,
    ClaimRecord,
    DueEntry,
    JobWrite,
    LeaseWrite,
    SweeperState,
)
from tenure.app.rows import Store
from tenure.app.tenure import Tenure
from tenure.domain.errors import AlreadyExists, Conflict, NotFound, StaleLease, ValidationFailed
from tenure.domain.fencing import DEADLINE_SLACK, hash_token
from tenure.domain.model import (
    Event,
    Lease,
    Pool,
    Space,
    Task,
    Token,
    Worker,
    Workflow,
    first_job_id,
)
from tenure.domain.states import LeaseState, PoolKind, SubjectKind
from tenure.triggers.stream import react
from tenure.wiring import ManualClock

from tests.conftest import ADMIN, WORKER, lease_principal

SPACE = "OPS"
OTHER_SPACE = "SEC"
ALPHA, BETA, GAMMA = "alpha", "beta", "gamma"  # alpha and beta in OPS, gamma in SEC
TOLERATION_MS = 300_000  # the pool default toleration (300 s)


class ContractStore(Store, Protocol):
    # The per-call page budgets, lowered by the tests that watch them bite.
    list_budget: int
    worker_budget: int
    timeline_cap: int


@dataclass
class ContractRig:
    store: ContractStore
    clock: ManualClock
    svc: Tenure
    drain: Callable[[], int]  # deliver the table's stream to the reactor (timeline events)
    # Every stream record so far, for re-delivery; None where there is no stream (the fake
    # plays its reactor inside commit).
    records: Callable[[], list[dict[str, Any]]] | None


MakeRig = Callable[[], ContractRig]


def read_stream(ddb: Any, streams: Any, table: str) -> list[dict[str, Any]]:
    """Every record on the table's stream, read from the start of each shard."""
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    records: list[dict[str, Any]] = []
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            out = streams.get_records(ShardIterator=iterator, Limit=1000)
            if not out.get("Records"):
                break
            records.extend(out["Records"])
            iterator = out.get("NextShardIterator")
    return records


# ------------------------------------------------------------------------------ helpers


def world(r: ContractRig) -> None:
    make_world(r.svc)


def make_world(svc: Tenure) -> None:
    """Spaces OPS and SEC; pools alpha and beta in OPS, gamma in SEC (pool defaults)."""
    svc.spaces.create_space(ADMIN, SPACE, "Operations", None)
    svc.spaces.create_space(ADMIN, OTHER_SPACE, "Security", None)
    for name, space in ((ALPHA, SPACE), (BETA, SPACE), (GAMMA, OTHER_SPACE)):
        svc.pools.create_pool(
            ADMIN, Pool(name=name, space=space, kind=PoolKind.COMMAND, created_at=0)
        )


def enqueue(r: ContractRig, pool: str = ALPHA, space: str = SPACE) -> tuple[Task, Lease]:
    task, lease = r.svc.filing.create_task(
        ADMIN, space, f"work for {pool}", None, None, {}, pool, None
    )
    assert lease is not None
    return task, lease


def claim(r: ContractRig, pool: str = ALPHA, worker: str = "w-1") -> Claimed:
    won = r.svc.claims.claim(WORKER, pool, worker, "1.0", 0, None)
    assert won is not None, f"nothing to claim in {pool}"
    return won


def stored(r: ContractRig, lease_id: str) -> Lease:
    lease = r.store.get_lease(lease_id)
    assert lease is not None, f"lease {lease_id} has no row"
    return lease


def stored_task(r: ContractRig, task_id: str) -> Task:
    task = r.store.get_task(task_id)
    assert task is not None, f"task {task_id} has no row"
    return task


def timeline_of(r: ContractRig, task: Task) -> list[tuple[int, str, str | None, int | None]]:
    r.drain()
    return [(e.at, e.type, e.lease_id, e.fence) for e in r.store.timeline("task", task.id, None)]


def walk_timeline(
    store: Store, task_id: str, limit: int, newest_first: bool, pages: int = 60
) -> list[Event]:
    """Every page of a task's timeline until next_cursor is null (at most `pages` pages)."""
    got: list[Event] = []
    cursor: str | None = None
    for _ in range(pages):
        page = store.timeline_page("task", task_id, limit, cursor, newest_first)
        assert len(page.events) <= limit
        got.extend(page.events)
        cursor = page.next_cursor
        if cursor is None:
            return got
    raise AssertionError(f"the timeline did not end within {pages} pages")


def walk(
    r: ContractRig,
    limit: int,
    state: LeaseState | None = None,
    pool: str | None = None,
    subjects: frozenset[SubjectKind] | None = None,
) -> tuple[list[str], list[int]]:
    """Every page of list_leases until next_cursor is null: (ids in order, page sizes)."""
    ids: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(200):
        page = r.store.list_leases(SPACE, limit, cursor, state, pool, subjects)
        ids.extend(lease.id for lease in page.leases)
        sizes.append(len(page.leases))
        assert all(
            (state is None or lease.state is state)
            and (pool is None or lease.pool == pool)
            and (subjects is None or lease.subject_kind in subjects)
            for lease in page.leases
        )
        cursor = page.next_cursor
        if cursor is None:
            return ids, sizes
    raise AssertionError("list_leases never handed back a null cursor")


def _cursor(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


# ----------------------------------------------------------------------------- contract


class StoreContract:
    # ---------------------------------------------------------- conditional lease writes

    def test_lease_write_expecting_the_wrong_state_is_refused_and_changes_nothing(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        before = stored(r, lease.id)
        moved = replace(before, state=LeaseState.DISPATCHED, worker_id="intruder", version=2)
        with pytest.raises(Conflict):
            r.store.commit(Change(leases=[LeaseWrite(moved, expect=(LeaseState.RUNNING, 1))]))
        assert stored(r, lease.id) == before
        assert r.store.queue_candidates(ALPHA, 10) == [lease.id]

    def test_lease_write_expecting_an_older_fence_is_refused_and_changes_nothing(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        won = claim(r)
        before = stored(r, lease.id)
        assert before.fence == 1
        ended = replace(before, state=LeaseState.COMPLETED, version=before.version + 1)
        with pytest.raises(Conflict):
            r.store.commit(Change(leases=[LeaseWrite(ended, expect=(LeaseState.DISPATCHED, 0))]))
        with pytest.raises(Conflict):
            r.store.commit(Change(leases=[LeaseWrite(ended, expect=(LeaseState.DISPATCHED, 2))]))
        after = stored(r, lease.id)
        assert after == before
        assert after.state is LeaseState.DISPATCHED
        assert after.token_hash == hash_token(won.token)

    def test_transaction_with_one_failed_condition_writes_none_of_its_rows(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        claim(r)
        held = stored(r, lease.id)
        job = r.svc.kernel.job_of(held)
        assert job is not None and job.fence == 1
        # The lease's condition holds; the job's (fence 7) does not: nothing may land.
        ended = replace(held, state=LeaseState.LOST, version=held.version + 1)
        successor = replace(held, id="lease_successor", state=LeaseState.PENDING, fence=2)
        change = Change(
            leases=[LeaseWrite(ended, expect=(held.state, held.fence)), LeaseWrite(successor)],
            jobs=[JobWrite(replace(job, fence=2, lease_id=successor.id), expect_fence=7)],
        )
        with pytest.raises(Conflict):
            r.store.commit(change)
        assert stored(r, lease.id) == held
        assert r.store.get_lease("lease_successor") is None
        assert r.svc.kernel.job_of(held) == job
        assert r.store.queue_candidates(ALPHA, 10) == []

    def test_a_tasks_first_job_has_no_row_until_its_first_change_which_lands_once(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        task, lease = enqueue(r)
        assert lease.job_id == first_job_id(task.id) == stored_task(r, task.id).job_id
        assert r.store.get_job(lease.job_id) is None  # filing wrote no row for it
        job = r.svc.kernel.job_of(lease)
        assert job is not None and (job.fence, job.lease_id, job.attempt) == (1, lease.id, 1)
        ended = replace(lease, state=LeaseState.LOST, version=lease.version + 1)

        def hand_on(successor_id: str) -> Change:
            successor = replace(lease, id=successor_id, fence=2, version=1)
            return Change(
                leases=[
                    LeaseWrite(ended, expect=(lease.state, lease.fence)),
                    LeaseWrite(successor),
                ],
                jobs=[JobWrite(replace(job, fence=2, lease_id=successor_id), expect_fence=1)],
            )

        stale_check = Change(
            leases=[LeaseWrite(replace(lease, id="lease_probe", fence=1, version=1))],
            job_checks=[(job.id, lease.id)],
        )
        r.store.commit(hand_on("lease_first_hand"))
        row = r.store.get_job(job.id)
        assert row is not None and (row.fence, row.lease_id) == (2, "lease_first_hand")
        # Whoever read the job as its first lease implies it now loses: the row exists.
        second = hand_on("lease_second_hand")
        second = replace(second, leases=second.leases[1:])  # only the job's condition stands
        with pytest.raises(Conflict):
            r.store.commit(second)
        with pytest.raises(Conflict):
            r.store.commit(stale_check)
        assert r.store.get_lease("lease_second_hand") is None
        assert r.store.get_lease("lease_probe") is None
        assert r.svc.kernel.newest_lease(stored_task(r, task.id)).id == "lease_first_hand"  # type: ignore[union-attr]

    def test_a_job_check_on_a_first_job_holds_while_it_has_no_row(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        probe = replace(lease, id="lease_probe", fence=1, version=1)
        r.store.commit(Change(leases=[LeaseWrite(probe)], job_checks=[(lease.job_id, lease.id)]))
        assert r.store.get_lease("lease_probe") is not None
        other = replace(lease, id="lease_other_probe", fence=1, version=1)
        with pytest.raises(Conflict):  # on another lease than its first, no row does not do
            r.store.commit(
                Change(leases=[LeaseWrite(other)], job_checks=[(lease.job_id, "lease_elsewhere")])
            )

    def test_renew_and_deadline_move_refuse_a_lease_that_moved_on(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        claim(r)
        held = stored(r, lease.id)
        later = replace(held, deadline=(held.deadline or 0) + 60_000, due_at=held.deadline)
        with pytest.raises(Conflict):
            r.store.renew(later, expect=(LeaseState.RUNNING, held.fence))
        with pytest.raises(Conflict):
            r.store.renew(later, expect=(held.state, held.fence + 1))
        with pytest.raises(Conflict):
            r.store.reindex(later, expect=(LeaseState.PENDING, held.fence))
        with pytest.raises(Conflict):  # the absence push moves only the deadline it read
            r.store.move_deadline(later, seen=replace(held, deadline=(held.deadline or 0) - 1))
        assert stored(r, lease.id) == held
        r.store.renew(later, expect=(held.state, held.fence))
        assert stored(r, lease.id).deadline == later.deadline

    # ------------------------------------------------------------------ creation

    def test_creating_a_lease_writes_it_once_and_a_second_create_is_refused(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        first = stored(r, lease.id)
        twin = replace(first, id=f"{lease.id}x", created_at=first.created_at + 5)
        r.store.commit(Change(leases=[LeaseWrite(twin)]))
        assert stored(r, twin.id) == twin
        again = replace(first, worker_id="someone", attempt=9)
        with pytest.raises(Conflict):
            r.store.commit(Change(leases=[LeaseWrite(again)]))
        assert stored(r, lease.id) == first

    def test_spaces_pools_and_workflows_are_created_once(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        ops = r.store.get_space(SPACE)
        alpha = r.store.get_pool(ALPHA)
        assert ops is not None and alpha is not None
        with pytest.raises(AlreadyExists):
            r.store.put_space(replace(ops, name="Hijacked"))
        with pytest.raises(AlreadyExists):
            r.store.put_pool(replace(alpha, space=OTHER_SPACE, toleration_seconds=5))
        wf = Workflow(space=SPACE, slug="triage", name="Triage", created_at=1)
        r.store.put_workflow(wf)
        with pytest.raises(AlreadyExists):
            r.store.put_workflow(replace(wf, name="Other"))
        assert r.store.get_space(SPACE) == ops
        assert r.store.get_pool(ALPHA) == alpha
        assert r.store.get_workflow(SPACE, "triage") == wf
        assert {p.name for p in r.store.list_pools()} == {ALPHA, BETA, GAMMA}

    def test_the_pool_list_never_reads_past_the_cap(
        self, make_rig: MakeRig, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        r = make_rig()
        world(r)  # three pools
        for module in ("tenure.store.dynamo.pools", "tests.unit.fake_store"):
            monkeypatch.setattr(f"{module}.POOL_CAP", 2)
        assert len(r.store.list_pools()) == 2  # three pools exist: the read stops at two

    def test_token_names_are_unique_and_a_refused_token_leaves_no_trace(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        first = Token(id="tok_1", name="ci", kind="operator", token_hash="h1", created_at=1)
        r.store.put_token(first)
        same_name = replace(first, id="tok_2", token_hash="h2")
        with pytest.raises(AlreadyExists):
            r.store.put_token(same_name)
        assert r.store.get_token("h2") is None
        # The same secret under a new name is refused too, and does not reserve the name.
        same_hash = replace(first, id="tok_3", name="deploy")
        with pytest.raises(AlreadyExists):
            r.store.put_token(same_hash)
        assert r.store.get_token("h1") == first
        r.store.put_token(replace(first, id="tok_4", name="deploy", token_hash="h4"))
        stored_token = r.store.get_token("h4")
        assert stored_token is not None and stored_token.name == "deploy"

    def test_tokens_are_listed_by_id_in_pages_revoked_once_and_touched_once_a_minute(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        for i in range(3):
            kind = "worker" if i == 1 else "operator"
            r.store.put_token(
                Token(
                    id=f"tok_{i}",
                    name=f"t{i}",
                    kind=kind,
                    token_hash=f"h{i}",
                    created_at=1,
                    expires_at=10_000 if i == 2 else None,
                )
            )
        first = r.store.list_tokens(None, 2, None)
        assert [t.id for t in first.tokens] == ["tok_0", "tok_1"]
        assert first.next_cursor is not None
        rest = r.store.list_tokens(None, 2, first.next_cursor)
        assert [t.id for t in rest.tokens] == ["tok_2"] and rest.tokens[0].expires_at == 10_000
        assert [t.id for t in r.store.list_tokens("worker", 10, None).tokens] == ["tok_1"]
        assert r.store.revoke_token("h0", 50) is True
        assert r.store.revoke_token("h0", 60) is False
        found = r.store.get_token_by_id("tok_0")
        assert found is not None and found.revoked_at == 50
        assert r.store.get_token_by_id("tok_nope") is None
        r.store.touch_token("h1", 1_000, 0)
        r.store.touch_token("h1", 2_000, 999)  # noted at 1_000, after 999: kept
        touched = r.store.get_token("h1")
        assert touched is not None and touched.last_used_at == 1_000
        r.store.touch_token("h1", 70_000, 10_000)
        again = r.store.get_token("h1")
        assert again is not None and again.last_used_at == 70_000

    def test_a_token_and_its_event_are_one_write_and_a_refused_one_writes_neither(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        token = Token(id="tok_1", name="ci", kind="operator", token_hash="h1", created_at=1)
        made = replace(_event("instance", 1, "ev_1"), subject_kind="instance", type="t.made")
        r.store.put_token(token, made)
        with pytest.raises(AlreadyExists):
            r.store.put_token(replace(token, id="tok_2", token_hash="h2"), _event("x", 2, "ev_2"))
        assert r.store.timeline("task", "x", 10) == []
        revoked = replace(made, id="ev_3", at=3, type="t.revoked")
        assert r.store.revoke_token("h1", 3, revoked) is True
        assert r.store.revoke_token("h1", 4, replace(revoked, id="ev_4", at=4)) is False
        events = r.store.timeline("instance", "instance", 10)
        assert [e.id for e in events] == ["ev_1", "ev_3"]

    def test_spaces_are_listed_by_key_in_pages_and_a_limited_read_sees_its_own_alone(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        for key in ("ZED", "ABC", "MID", "ABD"):
            r.store.put_space(Space(key=key, name=key.lower(), created_at=1, max_active=2))
        with pytest.raises(AlreadyExists):
            r.store.put_space(Space(key="MID", name="again", created_at=2))
        first = r.store.list_spaces(2, None)
        assert [s.key for s in first.spaces] == ["ABC", "ABD"] and first.next_cursor
        assert first.spaces[0] == Space(key="ABC", name="abc", created_at=1, max_active=2)
        rest = r.store.list_spaces(2, first.next_cursor)
        assert [s.key for s in rest.spaces] == ["MID", "ZED"]
        assert rest.next_cursor is None  # a full last page promises no empty one after it
        assert [s.name for s in rest.spaces] == ["mid", "zed"]  # the refused put left MID be
        mine = r.store.list_spaces(5, None, ("ZED", "NOPE", "ABD"))
        assert [s.key for s in mine.spaces] == ["ABD", "ZED"] and mine.next_cursor is None
        one = r.store.list_spaces(1, None, ("ZED", "ABD"))
        assert [s.key for s in one.spaces] == ["ABD"] and one.next_cursor
        assert [s.key for s in r.store.list_spaces(1, one.next_cursor, ("ZED", "ABD")).spaces] == [
            "ZED"
        ]
        with pytest.raises(ValidationFailed):
            r.store.list_spaces(2, "bm9wZQ")

    def test_the_migration_reads_spaces_in_pages_and_lists_only_what_is_missing(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        store: Any = r.store
        for key in ("AAA", "BBB", "CCC"):
            r.store.put_space(Space(key=key, name=key, created_at=1))
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(1000):  # a Scan page may hold no space at all: follow the cursor
            spaces, cursor = store.scan_spaces(cursor, 2)
            seen.extend(s.key for s in spaces)
            if cursor is None:
                break
        assert sorted(seen) == ["AAA", "BBB", "CCC"]
        assert store.listed_space_keys(["AAA", "CCC", "NOPE"]) == {"AAA", "CCC"}
        assert store.list_space(Space(key="AAA", name="AAA", created_at=1)) is False

    def test_a_key_finds_its_task_by_its_derived_id_or_by_the_key_row_the_migration_writes(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        store: Any = r.store
        task, _ = enqueue(r)
        assert r.svc.task_keys.task_id(ADMIN, task.key) == task.id
        assert store.task_id_by_key(task.key) is None  # a derived id needs no key row
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(1000):
            tasks, cursor = store.scan_tasks(cursor, 2)
            seen.extend(t.id for t in tasks)
            if cursor is None:
                break
        assert seen == [task.id]
        old = replace(task, id="task_0190aabbccdd0011223344", key=f"{SPACE}-999")
        assert store.keyed_tasks([old.key]) == set()
        assert store.key_task(old) is True and store.key_task(old) is False
        assert store.keyed_tasks([old.key, task.key]) == {old.key}
        assert store.task_id_by_key(old.key) == old.id

    def test_the_migration_reads_tokens_in_pages_and_writes_only_what_is_missing(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        store: Any = r.store
        for i in range(3):
            token = Token(
                id=f"tok_{i}", name=f"t{i}", kind="operator", token_hash=f"h{i}", created_at=1
            )
            r.store.put_token(token)
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(1000):  # a Scan page may hold no token at all: follow the cursor
            tokens, cursor = store.scan_tokens(cursor, 2)
            seen.extend(t.id for t in tokens)
            if cursor is None:
                break
        assert sorted(seen) == ["tok_0", "tok_1", "tok_2"]
        assert store.listed_token_ids(["tok_0", "tok_2", "tok_nope"]) == {"tok_0", "tok_2"}
        got = r.store.get_token("h0")
        assert got is not None and store.list_token(got) is False  # listed already

        assert store.schema_state() == SchemaState()
        first = SchemaState(version=0, migration="m", cursor="c1", step=1)
        assert store.save_schema(SchemaState(), first) is True
        assert store.save_schema(SchemaState(), first) is False  # another run moved it
        assert store.schema_state() == first
        done = SchemaState(version=1, step=2)
        assert store.save_schema(first, done) is True and store.schema_state() == done

    def test_task_numbers_count_up_per_space_and_need_an_existing_space(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        assert [r.store.next_task_number(SPACE) for _ in range(3)] == [1, 2, 3]
        assert r.store.next_task_number(OTHER_SPACE) == 1
        assert r.store.next_task_number(SPACE) == 4
        with pytest.raises(NotFound):
            r.store.next_task_number("NOPE")
        assert r.store.get_space("NOPE") is None
        task, _ = enqueue(r, space=OTHER_SPACE, pool=GAMMA)
        assert task.key == f"{OTHER_SPACE}-2"
        stored_task = r.store.get_task(task.id)
        assert stored_task is not None and stored_task.key == f"{OTHER_SPACE}-2"

    # ------------------------------------------------------------------- the queue

    def test_queue_holds_only_pending_leases_of_its_pool_oldest_first(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        alpha_ids = []
        for _ in range(4):
            alpha_ids.append(enqueue(r, ALPHA)[1].id)
            enqueue(r, BETA)
            r.clock.advance(1)
        assert r.store.queue_candidates(ALPHA, 16) == alpha_ids
        assert r.store.queue_candidates(ALPHA, 2) == alpha_ids[:2]
        assert len(r.store.queue_candidates(BETA, 16)) == 4
        assert r.store.queue_candidates(GAMMA, 16) == []
        # A held lease and a cancelled one leave it; the order of the rest is kept.
        won = claim(r, ALPHA)
        cancelled = next(i for i in alpha_ids if i != won.lease.id)
        r.svc.operator.cancel(ADMIN, cancelled)
        rest = [i for i in alpha_ids if i not in (won.lease.id, cancelled)]
        assert r.store.queue_candidates(ALPHA, 16) == rest
        assert stored(r, won.lease.id).state is LeaseState.DISPATCHED
        assert stored(r, cancelled).state is LeaseState.CANCELLED
        assert all(stored(r, i).state is LeaseState.PENDING for i in rest)

    def test_claim_takes_the_lease_out_of_the_queue_and_stores_only_the_token_hash(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        won = claim(r)
        assert won.lease.id == lease.id
        assert r.store.queue_candidates(ALPHA, 16) == []
        assert r.svc.claims.claim(WORKER, ALPHA, "w-2", None, 0, None) is None
        row = stored(r, lease.id)
        assert row.state is LeaseState.DISPATCHED
        assert row.worker_id == "w-1"
        assert row.token_hash == hash_token(won.token)
        assert won.token not in json.dumps(row.__dict__, default=str)

    # ------------------------------------------------------------ the operator's list

    def _seed_list(self, r: ContractRig) -> list[Lease]:
        """30 leases in OPS over two pools and three states, newest first by (created_at, id).

        Some pairs share a millisecond, so the id must break the tie.
        """
        created = []
        for i in range(30):
            created.append(enqueue(r, ALPHA if i % 3 else BETA)[1].id)
            if i % 4:
                r.clock.advance(0.001)
        enqueue(r, GAMMA, space=OTHER_SPACE)  # another space never shows
        for _ in range(6):
            claim(r, ALPHA)
        for _ in range(2):
            claim(r, BETA)
        pending = r.store.queue_candidates(ALPHA, 3)
        for lease_id in pending:
            r.svc.operator.cancel(ADMIN, lease_id)
        leases = [stored(r, i) for i in created]
        return sorted(leases, key=lambda x: (x.created_at, x.id), reverse=True)

    def test_list_leases_is_newest_first_and_filters_by_state_and_pool(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        leases = self._seed_list(r)
        assert len({x.created_at for x in leases}) < len(leases)  # ties exist
        counts = {s: sum(x.state is s for x in leases) for s in LeaseState}
        assert counts[LeaseState.DISPATCHED] == 8
        assert counts[LeaseState.CANCELLED] == 3
        assert counts[LeaseState.PENDING] == 19
        for state in (LeaseState.PENDING, LeaseState.DISPATCHED, LeaseState.CANCELLED, None):
            for pool in (ALPHA, BETA, None):
                page = r.store.list_leases(SPACE, 100, None, state, pool)
                want = [
                    x.id
                    for x in leases
                    if (state is None or x.state is state) and (pool is None or x.pool == pool)
                ]
                assert [x.id for x in page.leases] == want, (state, pool)
                assert page.next_cursor is None
        assert r.store.list_leases(SPACE, 100, None, LeaseState.LOST, None).leases == []

    def test_list_leases_by_subject_kind_lists_each_kind_once_newest_first_on_full_pages(
        self, make_rig: MakeRig
    ) -> None:
        # Leases of a workflow and of the space, minted by rules, between leases of tasks.
        r = make_rig()
        world(r)
        r.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly", None)
        r.svc.addresses.add_address(ADMIN, SPACE, "help@example.com")
        trigger = {"topic": "email.received", "match": {"to": "help@example.com"}}
        subjects = ({"kind": "workflow", "slug": "nightly"}, {"kind": "space"})
        for i in range(6):
            enqueue(r, BETA if i % 2 else ALPHA)
            rule = r.svc.rules.create_rule(ADMIN, SPACE, f"r{i}", ALPHA, subjects[i % 2], trigger)
            r.svc.firings.fire_rule(ADMIN, rule.id)
            if i % 3:
                r.clock.advance(0.001)
        enqueue(r, BETA)
        leases = r.store.list_leases(SPACE, 100, None, None, None).leases
        assert len(leases) == 13
        kinds = SubjectKind.WORKFLOW, SubjectKind.SPACE, SubjectKind.TASK
        for kept in ({kinds[0], kinds[1]}, {kinds[0]}, {kinds[2]}, {kinds[2], kinds[1]}):
            want = [x.id for x in leases if x.subject_kind in kept]
            for limit in (1, 2, 5, 50):
                ids, sizes = walk(r, limit, subjects=frozenset(kept))
                assert ids == want, (limit, kept)
                assert all(size == limit for size in sizes[:-1]), (limit, kept, sizes)
        pending = [x.id for x in leases if x.subject_kind is not SubjectKind.TASK]
        only = frozenset(kinds[:2])
        assert walk(r, 50, LeaseState.PENDING, ALPHA, only)[0] == pending

    def test_list_leases_pages_with_a_cursor_never_repeating_or_skipping(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        leases = self._seed_list(r)
        cases: list[tuple[int, LeaseState | None, str | None]] = [
            (1, None, None),
            (7, None, None),
            (29, None, None),
            (30, None, None),
            (31, None, None),
            (1, LeaseState.PENDING, ALPHA),
            (4, LeaseState.PENDING, ALPHA),
            (3, None, BETA),
            (2, LeaseState.DISPATCHED, None),
        ]
        for limit, state, pool in cases:
            want = [
                x.id
                for x in leases
                if (state is None or x.state is state) and (pool is None or x.pool == pool)
            ]
            ids, sizes = walk(r, limit, state, pool)
            assert ids == want, (limit, state, pool)
            assert all(size <= limit for size in sizes)
            # Every page but the last is full.
            assert all(size == limit for size in sizes[:-1]), (limit, state, pool, sizes)

    def test_list_leases_shows_first_leases_of_either_form_and_requeued_ones_once_each(
        self, make_rig: MakeRig
    ) -> None:
        # First leases filed before the schema let them be listed through their tasks, first
        # leases filed after, tasks with no run, and a requeued task's two leases: each lease
        # once, newest first, at every page size and with a filter.
        r = make_rig()
        world(r)
        assert r.store.save_schema(
            r.store.schema_state(), SchemaState(version=LISTED_BY_TASK_FROM_SCHEMA - 1, step=1)
        )
        r.clock.advance(31)  # the schema row is read again after the pools' cache time
        created = [enqueue(r, ALPHA)[1].id for _ in range(3)]
        r.svc.filing.create_task(ADMIN, SPACE, "no run", None, None, {}, None, None)
        migrate(r.store)
        r.clock.advance(31)
        for i in range(4):
            created.append(enqueue(r, BETA if i % 2 else ALPHA)[1].id)
            r.svc.filing.create_task(ADMIN, SPACE, "no run", None, None, {}, None, None)
            if i % 2:
                r.clock.advance(0.001)
        r.clock.advance(1)
        won = claim(r, BETA)
        r.svc.reports.release(lease_principal(won.lease.id), won.lease.id, {"reason": "moving"})
        created.extend(r.store.queue_candidates(BETA, 5))
        leases = sorted(
            {x.id: x for x in (stored(r, i) for i in created)}.values(),
            key=lambda x: (x.created_at, x.id),
            reverse=True,
        )
        assert len(leases) == 8
        assert [x.previous_lease_id for x in leases].count(won.lease.id) == 1
        for state, pool in ((None, None), (LeaseState.PENDING, None), (None, BETA)):
            want = [
                x.id
                for x in leases
                if (state is None or x.state is state) and (pool is None or x.pool == pool)
            ]
            for limit in range(1, len(leases) + 2):
                ids, sizes = walk(r, limit, state, pool)
                assert ids == want, (limit, state, pool)
                assert all(size == limit for size in sizes[:-1]), (limit, state, pool, sizes)

    @pytest.mark.parametrize(
        "cursor",
        [
            "not a cursor!",
            "%%%%",
            base64.urlsafe_b64encode(b"not json").decode(),
            _cursor({"q": "0000000000001#lease_x"}),
            _cursor({"p": "no-separator"}),
            _cursor({"p": 17}),
            _cursor(["p"]),
            _cursor("p"),
        ],
    )
    def test_list_leases_refuses_a_cursor_it_did_not_hand_out(
        self, make_rig: MakeRig, cursor: str
    ) -> None:
        r = make_rig()
        world(r)
        enqueue(r)
        with pytest.raises(ValidationFailed):
            r.store.list_leases(SPACE, 10, cursor, None, None)

    # ------------------------------------------------------------------- timeline

    def test_every_transition_appears_once_on_the_subject_timeline(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        pool = r.store.get_pool(ALPHA)
        assert pool is not None
        expected: list[tuple[int, str, str | None, int | None]] = []

        def now() -> int:
            return r.clock.now_ms()

        task, first = enqueue(r)
        expected.append((now(), "lease.created", first.id, 1))
        r.clock.advance(1)
        claim(r)
        expected.append((now(), "lease.claimed", first.id, 1))
        r.clock.advance(1)
        r.svc.reports.start(lease_principal(first.id), first.id)
        expected.append((now(), "lease.started", first.id, 1))
        # Past the slack, this heartbeat writes the deadline: not a transition, no event.
        r.clock.advance(TOLERATION_MS * DEADLINE_SLACK / 1000 + 30)
        before_beat = stored(r, first.id)
        r.svc.reports.heartbeat(lease_principal(first.id), first.id, None)
        assert stored(r, first.id).deadline != before_beat.deadline
        r.clock.advance(1)
        r.svc.reports.release(lease_principal(first.id), first.id, {"reason": "shutting down"})
        second_id = r.store.queue_candidates(ALPHA, 1)[0]
        expected += [
            (now(), "lease.released", first.id, 1),
            (now(), "lease.created", second_id, 2),
        ]
        r.clock.advance(1)
        claim(r)
        expected.append((now(), "lease.claimed", second_id, 2))
        r.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
        lost = r.svc.recovery.expire(stored(r, second_id), pool)
        assert lost is not None and lost.state is LeaseState.LOST
        third_id = r.store.queue_candidates(ALPHA, 1)[0]
        expected += [
            (now(), "lease.lost", second_id, 2),
            (now(), "lease.created", third_id, 3),
        ]
        r.clock.advance(1)
        with pytest.raises(StaleLease):
            r.svc.reports.complete(lease_principal(second_id), second_id, {"outcome": "success"})
        expected.append((now(), "lease.stale_report", second_id, 2))
        r.clock.advance(1)
        claim(r)
        expected.append((now(), "lease.claimed", third_id, 3))
        r.clock.advance(1)
        r.svc.reports.complete(lease_principal(third_id), third_id, {"outcome": "success"})
        expected.append((now(), "lease.completed", third_id, 3))

        other_task, other = enqueue(r)
        r.clock.advance(1)
        r.svc.operator.cancel(ADMIN, other.id)

        events = timeline_of(r, task)
        assert sorted(events) == sorted(expected)
        assert [e[0] for e in events] == sorted(e[0] for e in events)  # oldest first
        assert [e[1] for e in timeline_of(r, other_task)] == ["lease.created", "lease.cancelled"]
        # The rows say the same as their events.
        assert stored(r, first.id).end_reason is not None
        assert stored(r, first.id).state is LeaseState.CANCELLED
        assert stored(r, second_id).state is LeaseState.LOST
        assert stored(r, third_id).state is LeaseState.COMPLETED
        assert [stored(r, i).fence for i in (first.id, second_id, third_id)] == [1, 2, 3]

    def test_a_task_timeline_of_many_leases_pages_alike_both_ways(self, make_rig: MakeRig) -> None:
        # Four leases one after another (released, lost, completed; then a second run),
        # with a pause and resume, a stale report and the task's own events between them:
        # every page size, oldest or newest first, walks the same events the whole
        # timeline holds, whichever of them are rows of their own and which the lease rows
        # tell (their stamps).
        r = make_rig()
        world(r)
        pool = r.store.get_pool(ALPHA)
        assert pool is not None
        task, first = enqueue(r)
        for step in (
            lambda: claim(r),
            lambda: r.svc.reports.start(lease_principal(first.id), first.id),
            lambda: r.svc.operator.pause(ADMIN, first.id),
            lambda: r.svc.operator.resume(ADMIN, first.id),
            lambda: r.svc.reports.release(lease_principal(first.id), first.id, {}),
        ):
            r.clock.advance(1)
            step()
        second_id = r.store.queue_candidates(ALPHA, 1)[0]
        r.clock.advance(1)
        claim(r)
        r.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
        assert r.svc.recovery.expire(stored(r, second_id), pool) is not None
        third_id = r.store.queue_candidates(ALPHA, 1)[0]
        r.clock.advance(1)
        with pytest.raises(StaleLease):
            r.svc.reports.complete(lease_principal(second_id), second_id, {})
        for step in (
            lambda: r.svc.graph.pause_task(ADMIN, task.id),
            lambda: r.svc.graph.resume_task(ADMIN, task.id),
            lambda: claim(r),
            lambda: r.svc.reports.start(lease_principal(third_id), third_id),
            lambda: r.svc.reports.complete(lease_principal(third_id), third_id, {}),
            lambda: r.svc.filing.enqueue(ADMIN, task.id, ALPHA),
        ):
            r.clock.advance(1)
            step()
        fourth = stored(r, r.store.queue_candidates(ALPHA, 1)[0])
        for step in (
            lambda: claim(r),
            lambda: r.svc.reports.heartbeat(lease_principal(fourth.id), fourth.id, None),
            lambda: r.svc.reports.complete(lease_principal(fourth.id), fourth.id, {}),
        ):
            r.clock.advance(1)
            step()
        r.drain()
        whole = r.store.timeline("task", task.id, None)
        by_lease: dict[str | None, list[str]] = {}
        for event in whole:
            by_lease.setdefault(event.lease_id, []).append(event.type)
        # (A lease's end and its successor's creation share a millisecond: their order is
        # their ids', so each lease's events are compared on their own.)
        assert by_lease == {
            first.id: [
                "lease.created",
                "lease.claimed",
                "lease.started",
                "lease.paused",
                "lease.resumed",
                "lease.released",
            ],
            second_id: ["lease.created", "lease.claimed", "lease.lost", "lease.stale_report"],
            third_id: ["lease.created", "lease.claimed", "lease.started", "lease.completed"],
            fourth.id: ["lease.created", "lease.claimed", "lease.started", "lease.completed"],
            None: ["task.paused", "task.resumed"],
        }
        assert len({e.id for e in whole}) == len(whole)
        assert [e.at for e in whole] == sorted(e.at for e in whole)
        for newest_first in (False, True):
            want = whole[::-1] if newest_first else whole
            for limit in (1, 2, 3, 4, 7, len(whole), len(whole) + 5):
                got = walk_timeline(r.store, task.id, limit, newest_first, len(whole) + 2)
                assert got == want, (newest_first, limit)
        assert r.store.timeline("task", task.id, 5) == whole[-5:]

    def test_redelivered_stream_records_write_no_second_event(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        task, lease = enqueue(r)
        r.clock.advance(1)
        claim(r)
        r.clock.advance(1)
        r.svc.reports.complete(lease_principal(lease.id), lease.id, {"outcome": "success"})
        r.drain()
        before = r.store.timeline("task", task.id, None)
        assert [e.type for e in before] == ["lease.created", "lease.claimed", "lease.completed"]
        assert len({e.id for e in before}) == 3
        if r.records is None:
            pytest.skip("no table stream here: the reactor runs inside commit")
        records = r.records()
        lease_records = [
            rec
            for rec in records
            if rec["dynamodb"].get("NewImage", {}).get("entity") == {"S": "lease"}
        ]
        assert lease_records, "the stream carried no records"
        for record in records:  # Lambda delivers at least once: every record, again
            react(r.store, record)
        r.drain()
        assert r.store.timeline("task", task.id, None) == before

    # ------------------------------------------------------------------ due index

    def test_due_index_holds_only_held_leases(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        pool = r.store.get_pool(ALPHA)
        assert pool is not None
        _, a = enqueue(r)
        _, b = enqueue(r)
        assert r.store.due_leases(ALPHA, None) == []
        claim(r, worker="w-a")
        claim(r, worker="w-b")
        assert sorted(r.store.due_leases(ALPHA, None)) == sorted([a.id, b.id])
        assert r.store.due_leases(BETA, None) == []
        r.svc.reports.start(lease_principal(a.id), a.id)
        r.svc.operator.pause(ADMIN, a.id)
        r.svc.operator.cancel(ADMIN, b.id)  # cancelling: still held until its worker answers
        assert stored(r, a.id).state is LeaseState.PAUSED
        assert stored(r, b.id).state is LeaseState.CANCELLING
        assert sorted(r.store.due_leases(ALPHA, None)) == sorted([a.id, b.id])
        r.svc.reports.complete(lease_principal(b.id), b.id, {"outcome": "success"})
        assert stored(r, b.id).state is LeaseState.CANCELLED
        assert r.store.due_leases(ALPHA, None) == [a.id]
        r.clock.advance(TOLERATION_MS * (1 + DEADLINE_SLACK) / 1000 + 1)
        assert r.svc.recovery.expire(stored(r, a.id), pool) is not None
        assert stored(r, a.id).state is LeaseState.LOST
        # The lost lease left; its pending successor is not held, so it is not there either.
        assert r.store.due_leases(ALPHA, None) == []
        assert len(r.store.queue_candidates(ALPHA, 16)) == 1

    def test_due_index_answers_by_the_indexed_due_at(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        claim(r)
        held = stored(r, lease.id)
        assert held.due_at is not None and held.due_at == held.deadline
        assert r.store.due_leases(ALPHA, held.due_at - 1) == []
        assert r.store.due_leases(ALPHA, held.due_at) == [lease.id]
        # A heartbeat moves the deadline but never the indexed due_at (no index write).
        r.clock.advance(120)
        r.svc.reports.heartbeat(lease_principal(lease.id), lease.id, None)
        beat = stored(r, lease.id)
        assert beat.deadline is not None and beat.deadline > held.deadline
        assert beat.due_at == held.due_at
        assert r.store.due_leases(ALPHA, held.due_at) == [lease.id]
        # The sweeper's re-index moves due_at up to the deadline.
        r.store.reindex(replace(beat, due_at=beat.deadline), (beat.state, beat.fence))
        assert r.store.due_leases(ALPHA, held.due_at) == []
        assert r.store.due_leases(ALPHA, beat.deadline) == [lease.id]

    def test_an_event_is_written_once_and_a_second_put_is_refused(self, make_rig: MakeRig) -> None:
        r = make_rig()
        events = [_event("task_1", at, f"ev_{at}") for at in (3, 1, 2)]
        for event in events:
            r.store.put_event(event)
        for event in events:  # what makes a redelivered stream record harmless
            with pytest.raises(Conflict):
                r.store.put_event(replace(event, type="lease.rewritten"))
        assert r.store.timeline("task", "task_1", None) == sorted(events, key=lambda e: e.at)

    # ------------------------------------------------------------ bounded, paged reads

    def test_a_filtered_list_reads_at_most_its_budget_and_resumes_after_what_it_examined(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        leases = self._seed_list(r)
        r.store.list_budget = 5
        for limit, state, pool in [
            (2, LeaseState.CANCELLED, None),  # 3 of 30: most pages find nothing
            (4, LeaseState.PENDING, ALPHA),
            (1, None, BETA),
            (3, None, None),
            (9, None, None),  # more than the budget: a page holds at most 5
        ]:
            want = [
                x.id
                for x in leases
                if (state is None or x.state is state) and (pool is None or x.pool == pool)
            ]
            ids, sizes = walk(r, limit, state, pool)
            assert ids == want, (limit, state, pool)
            assert all(size <= min(limit, 5) for size in sizes), sizes
            if state is not None or pool is not None:
                # No page examined more than 5 entries, so walking 30 took at least 6 pages,
                # some of them empty yet with a cursor to go on.
                assert len(sizes) >= 30 // 5, sizes
        _, sizes = walk(r, 2, LeaseState.CANCELLED, None)
        assert 0 in sizes[:-1]

    def test_timeline_pages_both_ways_with_a_cursor(self, make_rig: MakeRig) -> None:
        r = make_rig()
        events = [_event("task_1", 1000 + i // 2, f"ev_{i:02d}") for i in range(7)]  # ties
        for event in events:
            r.store.put_event(event)
        r.store.put_event(_event("task_2", 1000, "ev_other"))
        for newest_first in (False, True):
            want = events[::-1] if newest_first else events
            for limit in (1, 3, 7, 8):
                got = walk_timeline(r.store, "task_1", limit, newest_first, 20)
                assert got == want, (newest_first, limit)
        assert r.store.timeline_page("task", "nothing", 5, None).next_cursor is None
        assert r.store.timeline("task", "task_1", 3) == events[-3:]
        assert r.store.timeline("task", "task_1", None) == events

    def test_timeline_without_a_limit_answers_at_most_the_cap_newest_oldest_first(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        events = [_event("task_1", 1000 + i, f"ev_{i:02d}") for i in range(6)]
        for event in events:
            r.store.put_event(event)
        r.store.timeline_cap = 4
        assert r.store.timeline("task", "task_1", None) == events[-4:]
        assert r.store.timeline("task", "task_1", 5) == events[-4:]  # a limit is capped too
        assert r.store.timeline("task", "task_1", 2) == events[-2:]

    def test_workers_past_their_retention_are_not_listed_and_the_list_pages(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        now = r.clock.now_ms()
        day_ms = WORKER_RETENTION_S * 1000
        fresh = [f"w-{i}" for i in range(7)]
        for i, worker_id in enumerate(fresh):
            r.store.note_worker(Worker(pool=ALPHA, worker_id=worker_id, last_seen=now - i))
            # Stale rows in between, as TTL would leave them until it gets round to them.
            stale = Worker(pool=ALPHA, worker_id=f"{worker_id}-old", last_seen=now - 2 * day_ms)
            r.store.note_worker(stale)
        r.store.note_worker(Worker(pool=BETA, worker_id="w-beta", last_seen=now))
        listed = r.store.list_workers(ALPHA, now_ms=now)
        assert [w.worker_id for w in listed] == fresh
        assert listed[1] == Worker(pool=ALPHA, worker_id="w-1", last_seen=now - 1)
        everything = r.store.list_workers(ALPHA, now_ms=now - 2 * day_ms)
        assert len(everything) == 14
        assert [w.worker_id for w in r.store.list_workers(ALPHA, 2, now)] == fresh[:2]
        assert [w.worker_id for w in r.store.list_workers(BETA, now_ms=now)] == ["w-beta"]
        # A day after its last sighting a worker is gone, whether TTL deleted it yet or not.
        assert r.store.list_workers(ALPHA, now_ms=now + day_ms) == []
        r.store.worker_budget = 3
        for limit in (1, 2, 5):
            got: list[str] = []
            cursor: str | None = None
            pages = 0
            while pages < 30:
                pages += 1
                page = r.store.worker_page(ALPHA, limit, cursor, now)
                assert len(page.workers) <= limit
                got.extend(w.worker_id for w in page.workers)
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert got == fresh, limit
            assert pages >= 14 // 3, (limit, pages)  # at most 3 rows examined per page

    def test_a_worker_noted_again_keeps_each_field_not_heard(self, make_rig: MakeRig) -> None:
        r = make_rig()
        now = r.clock.now_ms()
        refusing, sealed = {"state": "refusing"}, {"state": "unreachable", "reason": "sealed"}
        whole = Worker(ALPHA, "w-1", now, "1.0", runtime=refusing, credentials=sealed)
        r.store.note_worker(whole)  # every field heard
        assert r.store.get_worker(ALPHA, "w-1") == whole
        r.store.note_worker(Worker(ALPHA, "w-1", now + 5), frozenset())  # a sign of life alone
        assert r.store.get_worker(ALPHA, "w-1") == replace(whole, last_seen=now + 5)
        ok = {"state": "ok"}
        r.store.note_worker(Worker(ALPHA, "w-1", now + 7, runtime=ok), frozenset({"runtime"}))
        assert r.store.get_worker(ALPHA, "w-1") == replace(whole, last_seen=now + 7, runtime=ok)
        # A version heard as none is removed; the words not heard stay.
        r.store.note_worker(Worker(ALPHA, "w-1", now + 9), frozenset({"worker_version"}))
        stored = replace(whole, last_seen=now + 9, worker_version=None, runtime=ok)
        assert r.store.get_worker(ALPHA, "w-1") == stored
        assert r.store.list_workers(ALPHA, now_ms=now + 9) == [stored]

    def test_due_leases_can_be_bounded(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        for worker in ("w-a", "w-b", "w-c"):
            enqueue(r)
            r.clock.advance(1)
            claim(r, worker=worker)
        every = r.store.due_leases(ALPHA, None)
        assert len(every) == 3
        by_due = sorted(every, key=lambda i: stored(r, i).due_at or 0)
        assert every == by_due  # earliest deadline first
        assert r.store.due_leases(ALPHA, None, limit=2) == by_due[:2]
        assert (
            r.store.due_leases(ALPHA, r.clock.now_ms() + 2 * TOLERATION_MS, limit=1) == by_due[:1]
        )

    def test_the_due_index_reads_in_pages_after_an_entry_even_one_that_moved_since(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        for worker in ("w-a", "w-b", "w-c", "w-d", "w-e"):
            enqueue(r)
            if worker in ("w-b", "w-d"):  # two pairs claimed at one instant: equal due_at
                r.clock.advance(1)
            claim(r, worker=worker)
        held = [stored(r, i) for i in r.store.due_leases(ALPHA, None)]
        every = r.store.due_page(ALPHA, None, 10)
        # By due_at; entries with one due_at in the store's own order (not the lease id's).
        assert sorted(every) == sorted(DueEntry(x.due_at or 0, x.id) for x in held)
        assert [e.due_at for e in every] == sorted(x.due_at or 0 for x in held)
        assert len({e.due_at for e in every}) == 3 and len(every) == 5
        assert r.store.due_page(ALPHA, None, 2) == every[:2]
        assert r.store.due_page(ALPHA, every[1], 2) == every[2:4]
        assert r.store.due_page(ALPHA, every[3], 2) == every[4:]
        assert r.store.due_page(ALPHA, every[4], 2) == []
        assert r.store.due_page(BETA, None, 2) == []
        # The entry a page ended at moves later in the index (an absence push): the next page
        # goes on from where it was, and meets it again at its new place.
        first = stored(r, every[1].lease_id)
        later = (first.deadline or 0) + 3_600_000
        r.store.move_deadline(replace(first, deadline=later, due_at=later), seen=first)
        assert r.store.due_page(ALPHA, every[1], 10) == [*every[2:], DueEntry(later, first.id)]
        with pytest.raises(ValueError):
            r.store.due_page(ALPHA, None, 0)

    def test_an_absence_push_marks_the_lease_it_moves_and_moves_it_once_for_that_absence(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        claim(r)
        held = stored(r, lease.id)
        assert held.pushed_for is None  # a row never pushed reads as unmarked
        found_at = r.clock.now_ms() + 900_000
        to = (held.deadline or 0) + 900_000
        pushed = replace(held, deadline=to, due_at=to, pushed_for=found_at)
        r.store.move_deadline(pushed, seen=held)
        assert stored(r, lease.id) == pushed
        with pytest.raises(Conflict):  # marked for that absence already: not moved again
            r.store.move_deadline(replace(pushed, deadline=to + 1, due_at=to + 1), seen=pushed)
        assert stored(r, lease.id) == pushed
        # Another absence moves it once more; the lease's own writes keep the mark.
        again = replace(pushed, deadline=to + 60_000, due_at=to + 60_000, pushed_for=found_at + 1)
        r.store.move_deadline(again, seen=pushed)
        assert stored(r, lease.id).pushed_for == found_at + 1
        r.svc.reports.start(lease_principal(lease.id), lease.id)
        r.svc.reports.heartbeat(lease_principal(lease.id), lease.id, 60)
        beat = stored(r, lease.id)
        assert beat.state is LeaseState.RUNNING and beat.lease_seconds == 60
        assert beat.pushed_for == found_at + 1

    @pytest.mark.parametrize("read", ["leases", "timeline", "workers"])
    def test_every_paged_read_refuses_a_cursor_of_another_read(
        self, make_rig: MakeRig, read: str
    ) -> None:
        r = make_rig()
        foreign = {
            "leases": _cursor({"t": "EV#0000000000001#ev_1"}),
            "timeline": _cursor({"w": "WORKER#w-1"}),
            "workers": _cursor({"p": "0000000000001#lease_1"}),
        }[read]
        for cursor in (foreign, "not a cursor!", _cursor({"p": 1, "t": 2}), _cursor([])):
            with pytest.raises(ValidationFailed, match=r"^cursor: "):
                if read == "leases":
                    r.store.list_leases(SPACE, 5, cursor, None, None)
                elif read == "timeline":
                    r.store.timeline_page("task", "task_1", 5, cursor)
                else:
                    r.store.worker_page(ALPHA, 5, cursor)

    # -------------------------------------------------------------- claim records

    def test_a_claim_record_is_written_once_and_moves_on_only_from_the_lease_it_names(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        # A worker's claim_id is its own string: far longer than a key may be, hashed.
        claim_id = "retry-" + "x" * 3000
        record = ClaimRecord(
            pool=ALPHA,
            claimant="tok_worker",
            worker_id="w-1",
            claim_id=claim_id,
            lease_id="lease_first",
            expires_at=r.clock.now_ms() // 1000 + 3600,
        )
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id) is None
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id, consistent=False) is None
        r.store.point_claim(record, previous=None)
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id) == record
        # A claim's first look is a copy (a replica caught up here): the same record.
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id, consistent=False) == record
        # A second new record under the same key loses: two calls with one claim_id meet here.
        with pytest.raises(Conflict):
            r.store.point_claim(replace(record, lease_id="lease_other"), previous=None)
        # Moved on only from the lease it names now.
        second = replace(record, lease_id="lease_second", expires_at=record.expires_at + 60)
        with pytest.raises(Conflict):
            r.store.point_claim(second, previous="lease_other")
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id) == record
        r.store.point_claim(second, previous="lease_first")
        assert r.store.find_claim(ALPHA, "tok_worker", "w-1", claim_id) == second
        with pytest.raises(Conflict):  # a rival that read the first lease comes too late
            r.store.point_claim(replace(record, lease_id="lease_third"), previous="lease_first")
        # Every part of the key counts: another pool, claimant, worker or claim_id is free.
        for other in (
            replace(record, pool=BETA),
            replace(record, claimant="tok_other"),
            replace(record, worker_id="w-2"),
            replace(record, claim_id=claim_id + "y"),
        ):
            assert (
                r.store.find_claim(other.pool, other.claimant, other.worker_id, other.claim_id)
                is None
            )

    def test_the_sweeper_state_keeps_its_pass_and_per_pool_holds(self, make_rig: MakeRig) -> None:
        rig = make_rig()
        store = rig.store
        assert store.get_sweeper_state() == SweeperState()
        store.put_sweeper_state(SweeperState(last_pass_at=1_000), expect_last=None)
        with pytest.raises(Conflict):  # a second "first pass" loses
            store.put_sweeper_state(SweeperState(last_pass_at=2_000), expect_last=None)
        held = SweeperState(2_000, {ALPHA: 9_000, BETA: 12_000})
        store.put_sweeper_state(held, expect_last=1_000)
        assert store.get_sweeper_state() == held
        with pytest.raises(Conflict):  # only from the pass it read
            store.put_sweeper_state(SweeperState(3_000), expect_last=1_000)
        store.put_sweeper_state(SweeperState(3_000), expect_last=2_000)
        assert store.get_sweeper_state() == SweeperState(3_000, {})

    def test_the_sweeper_state_keeps_each_pool_s_unfinished_absence_push(
        self, make_rig: MakeRig
    ) -> None:
        store = make_rig().store
        store.put_sweeper_state(SweeperState(last_pass_at=1_000), expect_last=None)
        pushing = {
            ALPHA: AbsencePush(at=901_000, gap_ms=900_000),
            BETA: AbsencePush(
                at=901_000,
                gap_ms=600_000,
                earlier=((241_000, 120_000), (301_000, 60_000)),
                after=DueEntry(1_200_000, "lease_b7"),
            ),
        }
        found = SweeperState(901_000, {BETA: 950_000}, ttl_cursor=15, absences=pushing)
        store.put_sweeper_state(found, expect_last=1_000)
        assert store.get_sweeper_state() == found
        with pytest.raises(Conflict):  # a pass that read the state before it cannot undo it
            store.put_sweeper_state(SweeperState(961_000), expect_last=1_000)
        walked = replace(pushing[BETA], after=DueEntry(1_500_000, "lease_b9"))
        one_left = replace(found, last_pass_at=961_000, absences={BETA: walked})
        store.put_sweeper_state(one_left, expect_last=901_000)
        assert store.get_sweeper_state() == one_left
        store.put_sweeper_state(replace(one_left, absences={}), expect_last=961_000)
        assert store.get_sweeper_state().absences == {}

    def test_a_wait_slot_is_taken_while_free_or_run_out_and_given_back_only_by_its_holder(
        self, make_rig: MakeRig
    ) -> None:
        store = make_rig().store
        assert store.wait_slots("tok-a") == {}
        store.take_wait_slot("tok-a", 3, now_ms=1_000, until_ms=21_000)
        store.take_wait_slot("tok-a", 0, now_ms=1_000, until_ms=6_000)
        assert store.wait_slots("tok-a") == {0: 6_000, 3: 21_000}
        assert store.wait_slots("tok-b") == {}  # each token has its own slots
        with pytest.raises(Conflict):  # held until later than now
            store.take_wait_slot("tok-a", 3, now_ms=21_000, until_ms=40_000)
        # Run out: a claim that died waiting leaves its slot to the next one after its time.
        store.take_wait_slot("tok-a", 3, now_ms=21_001, until_ms=41_001)
        with pytest.raises(Conflict):  # the first holder's slot is another claim's now
            store.free_wait_slot("tok-a", 3, until_ms=21_000)
        assert store.wait_slots("tok-a") == {0: 6_000, 3: 41_001}
        store.free_wait_slot("tok-a", 3, until_ms=41_001)
        store.free_wait_slot("tok-a", 0, until_ms=6_000)
        assert store.wait_slots("tok-a") == {}
        with pytest.raises(Conflict):  # given back once
            store.free_wait_slot("tok-a", 0, until_ms=6_000)
        store.take_wait_slot("tok-a", 0, now_ms=7_000, until_ms=9_000)  # free again
        assert store.wait_slots("tok-a") == {0: 9_000}


def _event(subject_id: str, at: int, event_id: str) -> Event:
    return Event(
        id=event_id,
        subject_kind="task",
        subject_id=subject_id,
        type="lease.created",
        at=at,
        lease_id="lease_1",
        fence=1,
        data={"n": at},
    )
