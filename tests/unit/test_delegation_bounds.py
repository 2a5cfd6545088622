"""What an agent may file, and how far a stop reaches.

A lease token files at most its pool's `max_delegated_per_lease` tasks, and a tree of
delegated tasks (every task filed with the lease token of a run of a task in it, down from one
task filed by a person) holds at most `max_delegated_per_tree` of them, counted in the filing's
own conditional write. A stopped creator stops every task it delegated, a page at a time, and a
child stopped so stops its own children in turn."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.autonomy.delegation import STOP_PAGE
from tenure.app.ports import DELEGATED_CEILING, TREE_CEILING, Change
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import DEFAULT_MAX_DELEGATED_PER_LEASE, DEFAULT_MAX_DELEGATED_PER_TREE
from tenure.domain.states import EndReason, LeaseState

from tests.unit.support import ADMIN, MEMBER, POOL, SPACE, Rig, as_lease
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)


def _delegate(rig: Rig, lease_id: str, pool: str | None = None) -> str:
    task, _ = rig.svc.filing.create_task(
        as_lease(lease_id), SPACE, "sub", None, None, {}, pool, None
    )
    return task.id


def _run(rig: Rig, task_id: str) -> Any:
    task = rig.store.get_task(task_id)
    return rig.svc.kernel.newest_lease(task) if task else None


def _open(rig: Rig, task_ids: list[str]) -> list[str]:
    return [t for t in task_ids if (run := _run(rig, t)) is not None and not run.state.terminal]


# ------------------------------------------------------------------ the bounds


def test_the_defaults_are_a_hundred_per_lease_and_a_thousand_per_tree(rig: Rig) -> None:
    pool = rig.svc.kernel.catalog.pool(POOL)
    assert (pool.max_delegated_per_lease, pool.max_delegated_per_tree) == (100, 1000)
    assert (DEFAULT_MAX_DELEGATED_PER_LEASE, DEFAULT_MAX_DELEGATED_PER_TREE) == (100, 1000)


def test_one_lease_token_files_at_most_a_hundred_tasks_and_a_refusal_leaves_nothing(
    rig: Rig,
) -> None:
    creator = rig.running("w-creator")
    for n in range(DEFAULT_MAX_DELEGATED_PER_LEASE):
        _delegate(rig, creator.id, pool=POOL if n % 2 else None)
    tasks, leases = len(rig.store.tasks), len(rig.store.lease_rows)
    with pytest.raises(ValidationFailed, match=r"^max_delegated_per_lease: ") as refused:
        _delegate(rig, creator.id, pool=POOL)
    assert creator.id in refused.value.message and "100" in refused.value.message
    assert (len(rig.store.tasks), len(rig.store.lease_rows)) == (tasks, leases)
    assert rig.store.held_count(DELEGATED_CEILING, creator.id) == 100
    # Another lease of the same pool files on: the bound is per lease.
    other = rig.running("w-other")
    _delegate(rig, other.id)


def test_an_admin_raises_the_bound_per_pool_and_a_null_puts_the_default_back(rig: Rig) -> None:
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_delegated_per_lease": 2})
    creator = rig.running("w-creator")
    _delegate(rig, creator.id)
    _delegate(rig, creator.id)
    with pytest.raises(ValidationFailed, match="max_delegated_per_lease"):
        _delegate(rig, creator.id)
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_delegated_per_lease": 3})
    _delegate(rig, creator.id)
    with pytest.raises(ValidationFailed, match="max_delegated_per_lease"):
        _delegate(rig, creator.id)
    pool = rig.svc.pools.update_pool(ADMIN, POOL, {"max_delegated_per_lease": None})
    assert pool.max_delegated_per_lease == DEFAULT_MAX_DELEGATED_PER_LEASE
    _delegate(rig, creator.id)


def test_a_tree_holds_at_most_its_bound_whichever_of_its_leases_files(rig: Rig) -> None:
    rig.svc.pools.update_pool(
        ADMIN, POOL, {"max_delegated_per_lease": 10, "max_delegated_per_tree": 4}
    )
    root = rig.running("w-root")
    root_task = root.task_id
    kids = [_delegate(rig, root.id) for _ in range(2)]
    rig.svc.filing.enqueue(MEMBER, kids[0], POOL)
    kid = rig.claim("w-kid").lease
    assert kid.task_id == kids[0]
    grandkids = [_delegate(rig, kid.id) for _ in range(2)]
    for refused_lease in (kid.id, root.id):
        with pytest.raises(ValidationFailed, match=r"^max_delegated_per_tree: ") as refused:
            _delegate(rig, refused_lease)
        assert str(root_task) in refused.value.message
    for task_id in [*kids, *grandkids]:
        stored = rig.store.get_task(task_id)
        assert stored is not None and stored.delegation_root == root_task
    assert rig.store.held_count(TREE_CEILING, str(root_task)) == 4
    # Another person-filed task starts a tree of its own.
    other = rig.running("w-other")
    _delegate(rig, other.id)


def test_only_a_lease_tokens_filing_writes_a_counter(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    creator = rig.running("w-creator")
    commits: list[Change] = []
    real = rig.store.commit

    def spy(change: Change) -> None:
        commits.append(change)
        real(change)

    monkeypatch.setattr(rig.store, "commit", spy)
    rig.task()
    rig.task(pool=None)
    # The first filing's lease and task are two commits (no transaction), the second's one.
    assert [c.ceilings for c in commits] == [[], [], []]
    commits.clear()
    _delegate(rig, creator.id, pool=POOL)
    [filed] = [c for c in commits if c.tasks]
    assert sorted((c.scope, c.name, c.delta, c.limit) for c in filed.ceilings) == [
        (DELEGATED_CEILING, creator.id, 1, 100),
        (TREE_CEILING, str(creator.task_id), 1, 1000),
    ]


def test_the_routes_take_show_and_validate_the_bounds(http: Any, rig: Rig) -> None:  # noqa: F811
    got: Answer = http(
        "PATCH",
        f"/pools/{POOL}",
        {"max_delegated_per_lease": 500, "max_delegated_per_tree": 20_000},
        ADMIN,
    )
    assert got.status == 200, got.data
    assert got.data["pool"]["max_delegated_per_lease"] == 500
    assert got.data["pool"]["max_delegated_per_tree"] == 20_000
    got = http("PATCH", f"/pools/{POOL}", {"max_delegated_per_tree": None}, ADMIN)
    assert got.data["pool"]["max_delegated_per_tree"] == 1000
    assert got.data["pool"]["max_delegated_per_lease"] == 500
    for bad in (
        {"max_delegated_per_lease": 0},
        {"max_delegated_per_tree": -1},
        {"max_delegated_per_lease": 10_001},
        {"max_delegated_per_tree": 1_000_001},
        {"max_delegated_per_lease": "x"},
    ):
        refused = http("PATCH", f"/pools/{POOL}", bad, ADMIN)
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
    made = http(
        "POST",
        "/pools",
        {"name": "fanout", "space": SPACE, "kind": "command", "max_delegated_per_lease": 1},
        ADMIN,
    )
    assert made.status == 201, made.data
    assert (made.data["max_delegated_per_lease"], made.data["max_delegated_per_tree"]) == (1, 1000)
    rig.task(pool="fanout")
    won = rig.claim("w-fan", pool="fanout")
    token = as_lease(won.lease.id)
    assert http("POST", "/tasks", {"title": "one"}, token).status == 201
    refused = http("POST", "/tasks", {"title": "two"}, token)
    assert (refused.status, refused.code) == (422, "validation_failed")
    assert refused.data["error"]["message"].startswith("max_delegated_per_lease: ")


# ------------------------------------------------------------------ the stop


def test_a_stopped_creator_stops_every_descendant_a_page_at_a_time(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lease token files 230 tasks into its pool, one of them runs and files 5 of its
    own; the operator cancels the first lease and its worker acknowledges. Before, the stop
    reached the first 200 children and none of the 5 (a child stopped so stopped nothing)."""
    rig.svc.pools.update_pool(ADMIN, POOL, {"max_delegated_per_lease": 300})
    root = rig.running("w-root")
    kids = [_delegate(rig, root.id, pool=POOL) for _ in range(230)]
    kid = rig.claim("w-kid").lease
    assert kid.task_id == kids[0]
    grandkids = [_delegate(rig, kid.id, pool=POOL) for _ in range(5)]
    pages: list[tuple[str, int]] = []
    real = rig.store.graph_edges

    def paged(task_id: str, kind: str, limit: int, after: str | None = None) -> list[str]:
        found = real(task_id, kind, limit, after)
        if kind == "delegated":
            pages.append((task_id, len(found)))
        return found

    monkeypatch.setattr(rig.store, "graph_edges", paged)
    rig.svc.operator.cancel(MEMBER, root.id)
    rig.svc.reports.fail(as_lease(root.id), root.id, {"error": "asked to stop"})
    assert rig.lease(root.id).end_reason is EndReason.CANCELLED
    assert _open(rig, kids) == []
    assert _open(rig, grandkids) == []
    for task_id in [*kids, *grandkids]:
        assert _run(rig, task_id).end_reason is EndReason.PARENT_STOPPED
    assert rig.lease(kid.id).end_reason is EndReason.PARENT_STOPPED
    # The root's children came in pages of at most STOP_PAGE, the next page set off by the
    # one before (230 = 100 + 100 + 30); the running child's 5 in one page of its own.
    assert [n for lease, n in pages if lease == root.id] == [STOP_PAGE, STOP_PAGE, 30]
    assert [n for lease, n in pages if lease == kid.id] == [5]


def test_a_child_stopped_by_its_ttl_stops_what_it_delegated(rig: Rig) -> None:
    from tenure.app.tasks.filing import TaskLinks

    rig.sweep()
    creator = rig.running("w-creator")
    child, _ = rig.svc.filing.create_task(
        as_lease(creator.id), SPACE, "c", None, None, {}, POOL, None,
        links=TaskLinks(ttl_seconds=60),
    )  # fmt: skip
    held = rig.claim("w-child").lease
    assert held.task_id == child.id
    grandkid = _delegate(rig, held.id, pool=POOL)
    for _ in range(3):
        rig.advance(60)
        for lease_id in (creator.id, held.id):
            if not rig.lease(lease_id).state.terminal:
                rig.svc.reports.heartbeat(as_lease(lease_id), lease_id, None)
        rig.sweep()
    assert rig.lease(held.id).end_reason is EndReason.TTL_EXPIRED
    assert _run(rig, grandkid).end_reason is EndReason.PARENT_STOPPED
    assert rig.lease(creator.id).state is LeaseState.RUNNING
