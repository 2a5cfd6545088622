"""The operator's lease list reads each lease through one of two indexes: its own by_space
entry, or (a task's first lease made with the task) its task's tasks_by_space entry. On
DynamoDB Local: such a first lease is written without a by_space entry while a requeued lease
keeps one; first leases made before the schema allowed it keep theirs; and every page, at
every size, with every filter, and under a small read budget, lists each lease exactly once,
newest first, with one cursor over both indexes that resumes only the space it came from."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from tenure.app.migrations import LISTED_BY_TASK_FROM_SCHEMA, SchemaState, migrate
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, SubjectKind
from tenure.domain.timeline import first_lease_id
from tenure.store import keys as k

from tests.conformance.contract import ALPHA, BETA, GAMMA, OTHER_SPACE, SPACE, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal


def _raw(rig: Rig, lease_id: str) -> dict[str, Any]:
    key = k.lease_key(lease_id)
    return rig.store.client.get_item(
        TableName=rig.store.table,
        Key={"PK": {"S": key["PK"]}, "SK": {"S": key["SK"]}},
        ConsistentRead=True,
    )["Item"]


def _file(rig: Rig, pool: str | None, space: str = SPACE) -> tuple[str, str | None]:
    task, lease = rig.svc.filing.create_task(ADMIN, space, "job", None, None, {}, pool, None)
    return task.id, lease.id if lease else None


def _requeue(rig: Rig, pool: str) -> tuple[str, str]:
    """Claim the oldest pending lease of `pool` and release it: (released, its successor)."""
    won = rig.svc.claims.claim(WORKER, pool, "w-1", "1.0", 0, None)
    assert won is not None
    released = won.lease.id
    rig.svc.reports.release(lease_principal(released), released, {"reason": "moving"})
    after = rig.store.get_lease(released)
    assert after is not None and after.state is LeaseState.CANCELLED
    successors = [
        x for x in rig.store.queue_candidates(pool, 50) if _lease(rig, x).previous_lease_id
    ]
    successor = next(x for x in successors if _lease(rig, x).previous_lease_id == released)
    return released, successor


def _lease(rig: Rig, lease_id: str) -> Lease:
    lease = rig.store.get_lease(lease_id)
    assert lease is not None
    return lease


def _walk(
    rig: Rig, limit: int, state: LeaseState | None, pool: str | None
) -> tuple[list[str], list[int]]:
    ids: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(400):
        page = rig.store.list_leases(SPACE, limit, cursor, state, pool)
        ids.extend(x.id for x in page.leases)
        sizes.append(len(page.leases))
        cursor = page.next_cursor
        if cursor is None:
            return ids, sizes
    raise AssertionError("the list never handed back a null cursor")


def _at_schema(rig: Rig, version: int) -> None:
    assert rig.store.save_schema(rig.store.schema_state(), SchemaState(version=version, step=1))
    rig.clock.advance(31)  # the schema row is read again after the pools' cache time


def test_a_first_lease_has_no_space_entry_and_its_requeued_successor_has_one(rig: Rig) -> None:
    make_world(rig.svc)
    task_id, first = _file(rig, ALPHA)
    assert first == first_lease_id(task_id)
    row = _raw(rig, first)
    assert k.SPACE_PK not in row and k.SPACE_SK not in row
    assert _lease(rig, first).via_task is True
    rig.clock.advance(1)
    released, successor = _requeue(rig, ALPHA)
    assert released == first
    assert k.SPACE_PK in _raw(rig, successor)
    assert k.SPACE_PK not in _raw(rig, first)  # its own later writes add none
    page = rig.store.list_leases(SPACE, 50, None, None, None)
    assert [x.id for x in page.leases] == [successor, first]
    assert page.next_cursor is None
    for limit in (1, 2):
        assert _walk(rig, limit, None, None)[0] == [successor, first]
    assert _walk(rig, 1, LeaseState.CANCELLED, None)[0] == [first]
    assert _walk(rig, 1, LeaseState.PENDING, ALPHA)[0] == [successor]


def test_below_the_schema_a_first_lease_keeps_its_space_entry(rig: Rig) -> None:
    # A lease list of the release before reads the by_space entries only: while it may still
    # be serving, a first lease is listed there as before.
    make_world(rig.svc)
    _at_schema(rig, LISTED_BY_TASK_FROM_SCHEMA - 1)
    _, old = _file(rig, ALPHA)
    assert old is not None and k.SPACE_PK in _raw(rig, old)
    assert _lease(rig, old).via_task is None
    assert [o.status for o in migrate(rig.store)][-1] == "applied"
    rig.clock.advance(31)
    _, new = _file(rig, ALPHA)
    assert new is not None and k.SPACE_PK not in _raw(rig, new)
    assert [x.id for x in rig.store.list_leases(SPACE, 10, None, None, None).leases] == [new, old]


def _mixed_space(rig: Rig) -> list[Lease]:
    """A space holding first leases of both forms, tasks with no lease, requeued leases,
    leases in three states over two pools, millisecond ties, and another space's leases:
    every lease of OPS, newest first by (created_at, id)."""
    make_world(rig.svc)
    ids: list[str] = []
    _at_schema(rig, LISTED_BY_TASK_FROM_SCHEMA - 1)
    for i in range(7):  # old form: a by_space entry each
        _, lease_id = _file(rig, ALPHA if i % 2 else BETA)
        assert lease_id is not None
        ids.append(lease_id)
        _file(rig, None)  # a task with no run: listed by nothing
        if i % 3:
            rig.clock.advance(0.001)
    rig.clock.advance(1)
    ids.extend(_requeue(rig, BETA)[1:])  # an old form first lease's successor
    assert [o.status for o in migrate(rig.store)][-1] == "applied"
    rig.clock.advance(31)
    for i in range(12):  # new form: listed through the task
        _, lease_id = _file(rig, ALPHA if i % 3 else BETA)
        assert lease_id is not None
        ids.append(lease_id)
        if i % 4 == 0:
            _file(rig, None)
        if i % 2:
            rig.clock.advance(0.001)
    _file(rig, GAMMA, space=OTHER_SPACE)  # another space never shows
    for _ in range(3):
        rig.clock.advance(0.002)
        ids.append(_requeue(rig, ALPHA)[1])
    for _ in range(3):
        won = rig.svc.claims.claim(WORKER, ALPHA, "w-2", "1.0", 0, None)
        assert won is not None
    leases = [_lease(rig, x) for x in ids]
    listed = {x.id for x in leases}
    # Leases released by _requeue are in OPS too.
    for lease in list(leases):
        if lease.previous_lease_id and lease.previous_lease_id not in listed:
            leases.append(_lease(rig, lease.previous_lease_id))
            listed.add(lease.previous_lease_id)
    return sorted(leases, key=lambda x: (x.created_at, x.id), reverse=True)


def test_every_page_size_and_filter_lists_each_lease_once_newest_first(rig: Rig) -> None:
    leases = _mixed_space(rig)
    by_task = [x for x in leases if x.via_task]
    by_entry = [x for x in leases if not x.via_task]
    assert len(by_task) == 12 and len(by_entry) == 7 + 1 + 3
    assert all(k.SPACE_PK not in _raw(rig, x.id) for x in by_task)
    assert all(k.SPACE_PK in _raw(rig, x.id) for x in by_entry)
    assert len({x.created_at for x in leases}) < len(leases)  # ties exist
    states = {x.state for x in leases}
    assert {LeaseState.PENDING, LeaseState.DISPATCHED, LeaseState.CANCELLED} <= states
    filters: list[tuple[LeaseState | None, str | None]] = [
        (None, None),
        (LeaseState.PENDING, None),
        (LeaseState.PENDING, ALPHA),
        (None, BETA),
        (LeaseState.DISPATCHED, None),
        (LeaseState.CANCELLED, BETA),
        (LeaseState.LOST, None),
    ]
    for state, pool in filters:
        want = [
            x.id
            for x in leases
            if (state is None or x.state is state) and (pool is None or x.pool == pool)
        ]
        for limit in range(1, len(leases) + 2):
            ids, sizes = _walk(rig, limit, state, pool)
            assert ids == want, (limit, state, pool)
            assert all(size == limit for size in sizes[:-1]), (limit, state, pool, sizes)
            assert sizes[-1] <= limit


def test_a_small_read_budget_cuts_pages_short_but_never_repeats_or_skips(rig: Rig) -> None:
    leases = _mixed_space(rig)
    rig.store.list_budget = 4
    for state, pool in ((None, None), (LeaseState.PENDING, ALPHA), (None, BETA)):
        want = [
            x.id
            for x in leases
            if (state is None or x.state is state) and (pool is None or x.pool == pool)
        ]
        for limit in (1, 2, 3, 5, 50):
            ids, sizes = _walk(rig, limit, state, pool)
            assert ids == want, (limit, state, pool)
            assert max(sizes) <= limit


def _cursor(doc: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def test_another_spaces_cursor_or_a_forged_one_is_refused(rig: Rig) -> None:
    make_world(rig.svc)
    for _ in range(3):
        _file(rig, ALPHA)
        _file(rig, GAMMA, space=OTHER_SPACE)
    ours = rig.store.list_leases(SPACE, 1, None, None, None).next_cursor
    theirs = rig.store.list_leases(OTHER_SPACE, 1, None, None, None).next_cursor
    assert ours is not None and theirs is not None
    assert len(rig.store.list_leases(SPACE, 10, ours, None, None).leases) == 2
    position = json.loads(base64.urlsafe_b64decode(ours + "=" * (-len(ours) % 4)))["p"]
    forged = [
        theirs,  # another space's cursor: a place in another list
        _cursor({"p": position.partition("/")[2]}),  # no space at all
        _cursor({"p": "SEC/" + position.partition("/")[2]}),
        _cursor({"p": "OPS/not-a-place"}),
        _cursor({"k": position}),
    ]
    for cursor in forged:
        with pytest.raises(ValidationFailed):
            rig.store.list_leases(SPACE, 10, cursor, None, None)
        with pytest.raises(ValidationFailed):
            rig.svc.operator.list_leases(ADMIN, SPACE, 10, cursor, None, None)


def test_each_call_reads_a_bounded_number_of_items_over_both_indexes(rig: Rig) -> None:
    # A filter nothing matches makes a call read as far as it may: index entries of both
    # indexes within the budget (one more a source at most), and the rows of those entries.
    leases = _mixed_space(rig)
    budget = 6
    rig.store.list_budget = budget
    cursor: str | None = None
    calls = 0
    while True:
        before = rig.store.meter.items_read
        page = rig.store.list_leases(SPACE, 50, cursor, LeaseState.LOST, None)
        assert page.leases == []
        assert rig.store.meter.items_read - before <= 2 * (budget + 2)
        calls += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    # 23 leases and 10 tasks with no run: 40 index entries (29 tasks' and 11 leases' own),
    # more than one call's worth.
    assert len(leases) == 23 and calls >= 40 // (budget + 2)


def test_leases_of_no_task_are_found_past_any_number_of_task_leases_in_one_bounded_call(
    rig: Rig,
) -> None:
    # Without the task kind the list reads only by_space entries: a space subject's lease
    # behind twelve newer first leases (listed through their tasks) is found by one call under
    # a budget of four, which the unfiltered list's first call does not reach.
    make_world(rig.svc)
    rig.svc.addresses.add_address(ADMIN, SPACE, "help@example.com")
    trigger = {"topic": "email.received", "match": {"to": "help@example.com"}}
    rule = rig.svc.rules.create_rule(ADMIN, SPACE, "tidy", BETA, {"kind": "space"}, trigger)
    minted = rig.svc.firings.fire_rule(ADMIN, rule.id)
    assert isinstance(minted, Lease) and minted.task_id is None
    rig.clock.advance(1)
    for _ in range(12):
        _file(rig, ALPHA)
    rig.clock.advance(1)
    requeued = _requeue(rig, ALPHA)[1]  # a task's lease with a by_space entry: read, not kept
    rig.store.list_budget = 4
    untasked = frozenset({SubjectKind.WORKFLOW, SubjectKind.SPACE})
    before = rig.store.meter.items_read
    page = rig.store.list_leases(SPACE, 10, None, None, None, untasked)
    assert ([x.id for x in page.leases], page.next_cursor) == ([minted.id], None)
    # Its by_space entry and the requeued lease's, and their two rows: no task's entry.
    assert rig.store.meter.items_read - before == 4
    ids, _ = _walk(rig, 10, None, None)
    assert ids.index(minted.id) == len(ids) - 1 and requeued in ids
    assert rig.store.list_leases(SPACE, 10, None, None, None).next_cursor is not None
