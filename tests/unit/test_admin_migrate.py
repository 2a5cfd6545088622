"""`tenure admin migrate` on the fake store: a token written by a release older than the token
list gets its list row (so GET /tokens shows it and it can be revoked), a revoked or expired
one keeps its state, a second run changes nothing, a dry run writes nothing, a run stopped
part-way goes on from its saved page, and two runs at once cannot both move the schema row."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tenure.app.migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Outcome,
    SchemaState,
    SchemaTooNew,
    migrate,
)
from tenure.domain.errors import Conflict, TaskNotFound
from tenure.domain.model import Token

from tests.unit.support import ADMIN, Rig


def old_token(rig: Rig, name: str, **kw: Any) -> Token:
    """A token as a release before the list wrote it: its own row and its name, no list row."""
    token, _ = rig.svc.setup.create_token(ADMIN, name, "operator", "read", None, None)
    del rig.store.token_list[token.id]
    if kw:
        rig.store.tokens[token.token_hash] = replace(token, **kw)
    return rig.store.tokens[token.token_hash]


def names(rig: Rig) -> set[str]:
    return {t.name for t in rig.svc.setup.list_tokens(ADMIN, None, 100, None).tokens}


def test_an_old_token_is_listed_after_migrate_and_can_then_be_revoked() -> None:
    rig = Rig()
    rig.svc.setup.create_token(ADMIN, "new", "operator", "read", None, None)
    old = old_token(rig, "old")
    page = rig.svc.setup.list_tokens(ADMIN, None, 100, None)
    assert {t.name for t in page.tokens} == {"new"} and page.schema_behind
    with pytest.raises(Exception, match="does not exist"):
        rig.svc.setup.revoke_token(ADMIN, old.id)

    [outcome, *rest] = migrate(rig.store)
    assert (outcome.name, outcome.status) == ("token-list-rows", "applied")
    assert [(o.name, o.status, o.counts) for o in rest] == [
        ("timeline-stamps", "applied", {}),
        ("claims-that-start", "applied", {}),
        ("first-lease-stamps", "applied", {}),
        ("implied-first-jobs", "applied", {}),
        ("space-list-rows", "applied", {"spaces": 1, "already_listed": 1, "listed": 0}),
        ("task-key-rows", "applied", {"tasks": 0, "already_keyed": 0, "keyed": 0}),
        ("derived-reclaims", "applied", {}),
    ]
    assert outcome.counts == {"tokens": 2, "already_listed": 1, "listed": 1}
    page = rig.svc.setup.list_tokens(ADMIN, None, 100, None)
    assert {t.name for t in page.tokens} == {"new", "old"} and not page.schema_behind
    assert rig.svc.setup.revoke_token(ADMIN, old.id).revoked_at is not None

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
    shown = {t.name: t for t in rig.svc.setup.list_tokens(ADMIN, None, 100, None).tokens}
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
    rig.svc.setup.create_space(ADMIN, "NEW", "made by this release", None)
    rig.svc.setup.create_space(ADMIN, "OLD", "made before spaces were listed", None)
    rig.store.space_list.discard("OLD")
    before = rig.svc.setup.list_spaces(ADMIN, 100, None)
    assert [s.key for s in before.spaces] == ["NEW", "OPS"] and before.schema_behind

    dry = _named(migrate(rig.store, dry_run=True), "space-list-rows")
    assert (dry.name, dry.status) == ("space-list-rows", "would_apply")
    assert "OLD" not in rig.store.space_list

    outcome = _named(migrate(rig.store), "space-list-rows")
    assert (outcome.name, outcome.status) == ("space-list-rows", "applied")
    assert outcome.counts == {"spaces": 3, "already_listed": 2, "listed": 1}
    after = rig.svc.setup.list_spaces(ADMIN, 100, None)
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

    outcome = _named(migrate(rig.store), "task-key-rows")
    assert (outcome.name, outcome.status) == ("task-key-rows", "applied")
    assert outcome.counts == {"tasks": 2, "already_keyed": 1, "keyed": 1}
    assert rig.svc.task_keys.task_id(ADMIN, "OPS-77") == old.id
    assert rig.svc.task_keys.task_id(ADMIN, new.key) == new.id
    assert rig.store.task_keys == {"OPS-77": old.id}  # a derived id needs no key row


def test_the_migrations_are_named_in_order_and_the_last_is_this_releases_version() -> None:
    versions = [m.version for m in MIGRATIONS]
    assert versions == sorted(versions) == list(range(1, len(MIGRATIONS) + 1))
    assert versions[-1] == SCHEMA_VERSION
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def _named(outcomes: list[Outcome], name: str) -> Outcome:
    return next(o for o in outcomes if o.name == name)
