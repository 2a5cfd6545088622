"""`tenure admin migrate` on the fake store: a token written by a release older than the token
list gets its list row (so GET /tokens shows it and it can be revoked), a revoked or expired
one keeps its state, a second run changes nothing, a dry run writes nothing, a run stopped
part-way goes on from its saved page, and two runs at once cannot both move the schema row.
Held leases get the keeps-detail mark an earlier release left to their ending."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tenure.app.migrations import (
    CHILDREN_MARKED_FROM_SCHEMA,
    DERIVED_RECLAIMS_FROM_SCHEMA,
    MIGRATIONS,
    SCHEMA_VERSION,
    Outcome,
    SchemaState,
    SchemaTooNew,
    mark_held_leases_before_derived_reclaims,
    mark_tasks_with_children_filed_before_the_mark,
    migrate,
)
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import Conflict, TaskNotFound
from tenure.domain.model import Token

from tests.unit.support import ADMIN, Rig, as_lease


def old_token(rig: Rig, name: str, **kw: Any) -> Token:
    """A token as a release before the list wrote it: its own row and its name, no list row."""
    token, _ = rig.svc.tokens.create_token(ADMIN, name, "operator", "read", None, None)
    del rig.store.token_list[token.id]
    if kw:
        rig.store.tokens[token.token_hash] = replace(token, **kw)
    return rig.store.tokens[token.token_hash]


def named(outcomes: list[Outcome], name: str) -> Outcome:
    """One migration's outcome in a run, found by its name (later migrations follow it)."""
    [outcome] = [o for o in outcomes if o.name == name]
    return outcome


def names(rig: Rig) -> set[str]:
    return {t.name for t in rig.svc.tokens.list_tokens(ADMIN, None, 100, None).tokens}


def test_an_old_token_is_listed_after_migrate_and_can_then_be_revoked() -> None:
    rig = Rig()
    rig.svc.tokens.create_token(ADMIN, "new", "operator", "read", None, None)
    old = old_token(rig, "old")
    page = rig.svc.tokens.list_tokens(ADMIN, None, 100, None)
    assert {t.name for t in page.tokens} == {"new"} and page.schema_behind
    with pytest.raises(Exception, match="does not exist"):
        rig.svc.tokens.revoke_token(ADMIN, old.id)

    [outcome, *rest] = migrate(rig.store)
    assert (outcome.name, outcome.status) == ("token-list-rows", "applied")
    assert [(o.name, o.status, o.counts) for o in rest] == [
        ("timeline-stamps", "applied", {}),
        ("claims-that-start", "applied", {}),
        ("first-lease-stamps", "applied", {}),
        ("implied-first-jobs", "applied", {}),
        ("space-list-rows", "applied", {"spaces": 1, "already_listed": 1, "listed": 0}),
        ("task-key-rows", "applied", {"tasks": 0, "already_keyed": 0, "keyed": 0}),
        ("first-leases-listed-by-task", "applied", {}),
        (
            "task-children-marks",
            "applied",
            {"tasks": 0, "parents": 0, "already_marked": 0, "marked": 0},
        ),
        ("untransacted-filing", "applied", {}),
        ("derived-successes", "applied", {}),
        ("derived-reclaims", "applied", {"held_leases": 0, "already_marked": 0, "marked": 0}),
        ("pool-gates", "applied", {"pools": 1, "spaceless": 0, "already_copied": 1, "copied": 0}),
        ("worker-signals", "applied", {}),
        ("handover-intents", "applied", {}),
        ("rule-mints", "applied", {}),
    ]
    assert outcome.counts == {"tokens": 2, "already_listed": 1, "listed": 1}
    page = rig.svc.tokens.list_tokens(ADMIN, None, 100, None)
    assert {t.name for t in page.tokens} == {"new", "old"} and not page.schema_behind
    assert rig.svc.tokens.revoke_token(ADMIN, old.id).revoked_at is not None

    writes = len(rig.store.writes)
    again = migrate(rig.store)
    assert [a.status for a in again] == ["already"] * len(MIGRATIONS)
    assert len(rig.store.writes) == writes
    assert rig.store.schema_state().version == SCHEMA_VERSION


def test_a_revoked_or_expired_old_token_keeps_its_state() -> None:
    rig = Rig()
    revoked = old_token(rig, "revoked", revoked_at=5, last_used_at=3)
    expired = old_token(rig, "expired", expires_at=10)
    migrate(rig.store)
    shown = {t.name: t for t in rig.svc.tokens.list_tokens(ADMIN, None, 100, None).tokens}
    assert shown["revoked"].revoked_at == 5 and shown["revoked"].last_used_at == 3
    assert shown["expired"].expires_at == 10
    assert rig.store.tokens[revoked.token_hash] == revoked
    assert rig.store.tokens[expired.token_hash] == expired


def test_a_dry_run_says_what_it_would_do_and_writes_nothing() -> None:
    rig = Rig()
    old_token(rig, "old")
    writes = list(rig.store.writes)
    [outcome, *rest] = migrate(rig.store, dry_run=True)
    assert {outcome.status, *(o.status for o in rest)} == {"would_apply"}
    assert len(rest) == len(MIGRATIONS) - 1
    assert outcome.counts == {"tokens": 1, "already_listed": 0, "would_list": 1}
    assert rig.store.writes == writes and rig.store.schema_state() == SchemaState()
    assert names(rig) == set()


def test_a_run_stopped_part_way_goes_on_from_its_saved_page() -> None:
    rig = Rig()
    for i in range(5):
        old_token(rig, f"old-{i}")
    [first] = migrate(rig.store, page_size=2, max_pages=1)
    assert first.status == "stopped" and first.counts["listed"] == 2
    saved = rig.store.schema_state()
    assert (saved.version, saved.migration) == (0, "token-list-rows") and saved.cursor
    [rest, *later] = migrate(rig.store, page_size=2)
    assert {rest.status, *(o.status for o in later)} == {"applied"}
    assert rest.counts["listed"] == 3
    assert rest.counts["already_listed"] == 0  # it started after the saved page
    assert names(rig) == {f"old-{i}" for i in range(5)}


def test_a_token_listed_between_the_read_and_the_write_is_not_written_again() -> None:
    rig = Rig()
    old = old_token(rig, "old")

    class Racing:
        """A store where a concurrent request lists the token right after the read."""

        def __getattr__(self, name: str) -> Any:
            return getattr(rig.store, name)

        def listed_token_ids(self, token_ids: list[str]) -> set[str]:
            found = rig.store.listed_token_ids(token_ids)
            rig.store.token_list[old.id] = old.token_hash
            return found

    [outcome, *_] = migrate(Racing())  # type: ignore[arg-type]
    assert outcome.counts == {"tokens": 1, "already_listed": 1, "listed": 0}
    assert "list_token" not in rig.store.writes


def test_two_runs_at_once_cannot_both_move_the_schema_row() -> None:
    rig = Rig()
    old_token(rig, "old")
    real = rig.store.save_schema

    def raced(expect: SchemaState, new: SchemaState) -> bool:
        rig.store.schema = replace(expect, step=expect.step + 1)  # the other run's write
        return real(expect, new)

    rig.store.save_schema = raced  # type: ignore[method-assign]
    with pytest.raises(Conflict, match="rerun"):
        migrate(rig.store)


def test_data_newer_than_this_release_is_refused() -> None:
    rig = Rig()
    rig.store.schema = SchemaState(version=SCHEMA_VERSION + 1, step=1)
    with pytest.raises(SchemaTooNew):
        migrate(rig.store)


def test_an_old_space_is_listed_after_migrate_and_a_rerun_writes_nothing() -> None:
    rig = Rig()
    rig.svc.spaces.create_space(ADMIN, "NEW", "made by this release", None)
    rig.svc.spaces.create_space(ADMIN, "OLD", "made before spaces were listed", None)
    rig.store.space_list.discard("OLD")
    before = rig.svc.spaces.list_spaces(ADMIN, 100, None)
    assert [s.key for s in before.spaces] == ["NEW", "OPS"] and before.schema_behind

    dry = named(migrate(rig.store, dry_run=True), "space-list-rows")
    assert (dry.name, dry.status) == ("space-list-rows", "would_apply")
    assert "OLD" not in rig.store.space_list

    outcome = named(migrate(rig.store), "space-list-rows")
    assert (outcome.name, outcome.status) == ("space-list-rows", "applied")
    assert outcome.counts == {"spaces": 3, "already_listed": 2, "listed": 1}
    after = rig.svc.spaces.list_spaces(ADMIN, 100, None)
    assert [s.key for s in after.spaces] == ["NEW", "OLD", "OPS"] and not after.schema_behind
    writes = len(rig.store.writes)
    assert {o.status for o in migrate(rig.store)} == {"already"}
    assert len(rig.store.writes) == writes


def test_a_task_filed_when_ids_were_random_is_keyed_and_then_found_by_its_key() -> None:
    rig = Rig()
    new, _ = rig.task(pool=None)
    old = replace(new, id="task_0190aabbccdd0011223344", key="OPS-77")
    rig.store.tasks[old.id] = old  # as an older release filed it: a random id, no key row
    with pytest.raises(TaskNotFound):
        rig.svc.task_keys.task_id(ADMIN, "OPS-77")

    outcome = named(migrate(rig.store), "task-key-rows")
    assert (outcome.name, outcome.status) == ("task-key-rows", "applied")
    assert outcome.counts == {"tasks": 2, "already_keyed": 1, "keyed": 1}
    assert rig.svc.task_keys.task_id(ADMIN, "OPS-77") == old.id
    assert rig.svc.task_keys.task_id(ADMIN, new.key) == new.id
    assert rig.store.task_keys == {"OPS-77": old.id}  # a derived id needs no key row


def _unmarked(rig: Rig, task_id: str) -> None:
    """The task as a release before the mark left it: children filed, no `has_children`."""
    rig.store.tasks[task_id] = replace(rig.store.tasks[task_id], has_children=None)


def _children_listed(rig: Rig, parent_id: str) -> list[str]:
    """The children a payload of the parent lists in its inputs."""
    task = rig.store.get_task(parent_id)
    assert task is not None
    inputs, _ = rig.svc.payloads.inputs.of(task)
    return [i["task_id"] for i in inputs["inputs"]]


def test_tasks_whose_children_predate_the_mark_are_marked_page_by_page_and_once() -> None:
    rig = Rig()
    parents = [rig.task(pool=None)[0] for _ in range(3)]
    kids = {
        p.id: [rig.task(pool=None, links=TaskLinks(parent_id=p.id))[0].id for _ in range(n)]
        for p, n in zip(parents, (3, 1, 0), strict=True)
    }
    for parent in parents[:2]:
        _unmarked(rig, parent.id)
    assert _children_listed(rig, parents[0].id) == []  # what the gap looks like
    rig.store.schema = SchemaState(version=CHILDREN_MARKED_FROM_SCHEMA - 1, step=1)
    version = rig.store.tasks[parents[0].id].version

    dry = named(migrate(rig.store, dry_run=True), "task-children-marks")
    assert dry.status == "would_apply"
    assert dry.counts == {"tasks": 7, "parents": 2, "already_marked": 0, "would_mark": 2}
    assert "mark_children" not in rig.store.writes
    assert rig.store.schema_state().version == CHILDREN_MARKED_FROM_SCHEMA - 1

    # Two tasks a page, one page a run: it stops, saves its place, and goes on from it.
    first = named(migrate(rig.store, page_size=2, max_pages=1), "task-children-marks")
    assert (first.status, first.pages) == ("stopped", 1)
    saved = rig.store.schema_state()
    assert (saved.version, saved.migration) == (
        CHILDREN_MARKED_FROM_SCHEMA - 1,
        "task-children-marks",
    )
    rest = named(migrate(rig.store, page_size=2), "task-children-marks")
    assert rest.status == "applied"
    assert first.counts["marked"] + rest.counts["marked"] == 2
    assert first.counts["tasks"] + rest.counts["tasks"] == 7
    # A parent met on several pages is written once, then read as marked.
    assert rig.store.writes.count("mark_children") == 2
    assert rig.store.schema_state().version == SCHEMA_VERSION
    for parent in parents[:2]:
        marked = rig.store.tasks[parent.id]
        assert marked.has_children is True
    assert rig.store.tasks[parents[0].id].version == version  # no version bump
    assert rig.store.tasks[parents[2].id].has_children is None  # no child: no mark
    assert set(_children_listed(rig, parents[0].id)) == set(kids[parents[0].id])
    assert _children_listed(rig, parents[1].id) == kids[parents[1].id]

    # The same page again (a run that died before it saved its place) writes nothing.
    again = mark_tasks_with_children_filed_before_the_mark(rig.store, None, 100, False)
    assert again.counts == {"tasks": 7, "parents": 2, "already_marked": 2, "marked": 0}
    assert rig.store.writes.count("mark_children") == 2


def test_a_parent_marked_between_the_read_and_the_write_is_not_written_again() -> None:
    rig = Rig()
    parent = rig.task(pool=None)[0]
    rig.task(pool=None, links=TaskLinks(parent_id=parent.id))
    _unmarked(rig, parent.id)

    class Racing:
        """A store where a child is filed (marking the parent) right after the read."""

        def __getattr__(self, name: str) -> Any:
            return getattr(rig.store, name)

        def children_marked(self, task_ids: list[str]) -> set[str]:
            found = rig.store.children_marked(task_ids)
            rig.store.tasks[parent.id] = replace(rig.store.tasks[parent.id], has_children=True)
            return found

    racing: Any = Racing()
    outcome = mark_tasks_with_children_filed_before_the_mark(racing, None, 100, False)
    assert outcome.counts == {"tasks": 2, "parents": 1, "already_marked": 1, "marked": 0}
    assert "mark_children" not in rig.store.writes


def test_the_migrations_are_named_in_order_and_the_last_is_this_releases_version() -> None:
    versions = [m.version for m in MIGRATIONS]
    assert versions == sorted(versions) == list(range(1, len(MIGRATIONS) + 1))
    assert versions[-1] == SCHEMA_VERSION
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_held_leases_get_the_keeps_detail_mark_page_by_page_and_once() -> None:
    rig = Rig()
    # Held as an earlier release left them: logs shipped, no mark (its ending wrote it).
    held = [rig.claimed().lease, rig.running(), rig.running()]
    marked = rig.running()
    rig.store.keep_detail(marked)  # its first log stream came under this release
    ended = rig.running()
    rig.svc.reports.complete(as_lease(ended.id), ended.id, {})
    _, pending = rig.task()  # no lease token yet: nothing of its own to keep
    assert pending is not None
    rig.store.schema = SchemaState(version=DERIVED_RECLAIMS_FROM_SCHEMA - 1, step=1)
    versions = {lease.id: rig.lease(lease.id).version for lease in held}

    dry = named(migrate(rig.store, dry_run=True), "derived-reclaims")
    assert dry.status == "would_apply"
    assert dry.counts == {"held_leases": 4, "already_marked": 1, "would_mark": 3}
    assert "mark_keeps_detail" not in rig.store.writes
    assert not any(rig.lease(lease.id).keeps_detail for lease in held)

    # Two leases a page, one page a run: it stops, saves its place, and goes on from it.
    first = named(migrate(rig.store, page_size=2, max_pages=1), "derived-reclaims")
    assert (first.status, first.pages) == ("stopped", 1)
    saved = rig.store.schema_state()
    assert (saved.version, saved.migration) == (
        DERIVED_RECLAIMS_FROM_SCHEMA - 1,
        "derived-reclaims",
    )
    rest = named(migrate(rig.store, page_size=2), "derived-reclaims")
    assert rest.status == "applied"
    assert first.counts["marked"] + rest.counts["marked"] == 3
    assert first.counts["held_leases"] + rest.counts["held_leases"] == 4
    assert rig.store.writes.count("mark_keeps_detail") == 3
    assert rig.store.schema_state().version == SCHEMA_VERSION
    for lease in held:
        assert rig.lease(lease.id).keeps_detail
        assert rig.lease(lease.id).version == versions[lease.id]  # no version bump
    assert not rig.lease(ended.id).keeps_detail and not rig.lease(pending.id).keeps_detail

    # The same page again (a run that died before it saved its place) writes nothing.
    again = mark_held_leases_before_derived_reclaims(rig.store, None, 100, False)
    assert again.counts == {"held_leases": 4, "already_marked": 4, "marked": 0}
    assert rig.store.writes.count("mark_keeps_detail") == 3

    # Ended afterwards, a marked lease is in the ended index, so the sweeper reclaims it.
    rig.svc.reports.complete(as_lease(held[1].id), held[1].id, {})
    now = rig.clock.now_ms()
    assert rig.store.ended_leases(rig.lease(held[1].id).pool, now, 10) == [held[1].id]


def test_a_lease_marked_between_the_read_and_the_write_is_not_written_again() -> None:
    rig = Rig()
    lease = rig.running()

    class Racing:
        """A store where the lease ships its first log stream right after the read."""

        def __getattr__(self, name: str) -> Any:
            return getattr(rig.store, name)

        def scan_held_leases(self, cursor: str | None, limit: int) -> Any:
            found = rig.store.scan_held_leases(cursor, limit)
            rig.store.keep_detail(lease)
            return found

    racing: Any = Racing()
    outcome = mark_held_leases_before_derived_reclaims(racing, None, 100, False)
    assert outcome.counts == {"held_leases": 1, "already_marked": 1, "marked": 0}
    assert "mark_keeps_detail" not in rig.store.writes
