"""`tenure admin migrate` against moto: a token written the way a release before the token list
wrote it (its own row and its name, no list row) is missing from GET /tokens until migrate
writes its list row; then it can be revoked; a second migrate changes nothing. And on the
same table, a token's creation and revocation land with their events or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from tenure import wiring
from tenure.app.migrations import CHILDREN_MARKED_FROM_SCHEMA, SCHEMA_VERSION, SchemaState
from tenure.app.setup.tokens import INSTANCE_TIMELINE
from tenure.app.tasks.filing import TaskLinks
from tenure.domain import fencing
from tenure.domain.errors import TaskNotFound, Unavailable
from tenure.domain.model import Principal, Space, Token
from tenure.store import items
from tenure.store import keys as k
from tenure.store.codec import dump
from tenure_cli.main import main

from tests.aws.mocked import mocked_aws
from tests.aws.test_function_handlers import export

TABLE = "migrate-table"
ADMIN = Principal(kind="operator", token_id="tok-admin", role="admin")


@pytest.fixture
def aws() -> Iterator[None]:
    with mocked_aws():
        export("TENURE_DYNAMODB_ENDPOINT", "")
        wiring.service.cache_clear()
        yield
        wiring.service.cache_clear()


def client() -> Any:
    return boto3.client("dynamodb", region_name="us-east-1")


def rows() -> list[dict[str, Any]]:
    return list(client().scan(TableName=TABLE, ConsistentRead=True)["Items"])


def write_old_token(name: str) -> tuple[Token, str]:
    """The rows an older release wrote for a token: its name and its own row, no list row."""
    raw = f"tnr_o_{name}secret0123456789abcdef"
    token = Token(
        id=f"tok_old_{name}",
        name=name,
        kind="operator",
        role="read",
        token_hash=fencing.hash_token(raw),
        created_at=1_700_000_000_000,
    )
    db = client()
    db.put_item(TableName=TABLE, Item=dump({**k.token_name_key(name), "token_id": token.id}))
    db.put_item(
        TableName=TABLE, Item=dump({**k.token_key(token.token_hash), **items.token_item(token)})
    )
    return token, raw


def test_migrate_lists_an_old_token_which_can_then_be_revoked_and_a_rerun_changes_nothing(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = wiring.build_store(None, TABLE)
    store.create_table()
    svc = wiring.build_service(store)
    svc.tokens.create_token(ADMIN, "new", "operator", "read", None, None)
    old, raw = write_old_token("old")
    before = svc.tokens.list_tokens(ADMIN, None, 100, None)
    assert [t.name for t in before.tokens] == ["new"] and before.schema_behind
    assert svc.tokens.authenticate(raw).token_id == old.id  # an old token still works

    assert main(["admin", "migrate", "--table", TABLE, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would apply" in out and "would_list 1" in out and "nothing was written" in out
    assert [t.name for t in svc.tokens.list_tokens(ADMIN, None, 100, None).tokens] == ["new"]

    assert main(["admin", "migrate", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    assert "1 token-list-rows: applied" in out and "listed 1" in out
    assert "already_listed 1" in out and raw not in out
    after = svc.tokens.list_tokens(ADMIN, None, 100, None)
    assert {t.name for t in after.tokens} == {"new", "old"} and not after.schema_behind
    assert store.schema_state().version == SCHEMA_VERSION

    svc.tokens.revoke_token(ADMIN, old.id)
    with pytest.raises(Exception, match="unknown token"):
        svc.tokens.authenticate(raw)
    shown = {t.name: t for t in svc.tokens.list_tokens(ADMIN, None, 100, None).tokens}
    assert shown["old"].revoked_at is not None

    table_before = rows()
    assert main(["admin", "migrate", "--table", TABLE]) == 0
    assert "already applied" in capsys.readouterr().out
    assert rows() == table_before
    assert raw not in str(table_before)


def _fail_transactions(store: Any) -> None:
    def refuse(**kwargs: Any) -> None:
        error = {"Error": {"Code": "InternalServerError", "Message": "the process died"}}
        raise ClientError(error, "TransactWriteItems")

    store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", refuse)


def test_a_token_and_its_event_land_together_or_not_at_all(aws: None) -> None:
    store = wiring.build_store(None, TABLE)
    store.create_table()
    svc = wiring.build_service(store)
    token, _ = svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    events = store.timeline(*INSTANCE_TIMELINE, None)
    assert [(e.type, e.data["token_id"]) for e in events] == [("token.created", token.id)]

    broken = wiring.build_store(None, TABLE)
    _fail_transactions(broken)
    failing = wiring.build_service(broken)
    with pytest.raises(Unavailable):
        failing.tokens.create_token(ADMIN, "lost", "operator", "read", None, None)
    with pytest.raises(Unavailable):
        failing.tokens.revoke_token(ADMIN, token.id)
    assert {t.name for t in svc.tokens.list_tokens(ADMIN, None, 100, None).tokens} == {"ci"}
    assert store.get_token(token.token_hash).revoked_at is None  # type: ignore[union-attr]
    assert [e.type for e in store.timeline(*INSTANCE_TIMELINE, None)] == ["token.created"]

    svc.tokens.revoke_token(ADMIN, token.id)
    assert store.get_token(token.token_hash).revoked_at is not None  # type: ignore[union-attr]
    assert [e.type for e in store.timeline(*INSTANCE_TIMELINE, None)] == [
        "token.created",
        "token.revoked",
    ]


def test_migrate_lists_a_space_made_before_spaces_were_listed(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = wiring.build_store(None, TABLE)
    store.create_table()
    svc = wiring.build_service(store)
    svc.spaces.create_space(ADMIN, "NEW", "made by this release", None)
    old = Space(key="OLD", name="made before the list", created_at=1_700_000_000_000)
    # The row an older release wrote for a space: its own row, no list row.
    client().put_item(TableName=TABLE, Item=dump({**k.space_key("OLD"), **items.space_item(old)}))
    limited = Principal(kind="operator", token_id="tok-a", role="read", spaces=("OLD",))
    before = svc.spaces.list_spaces(ADMIN, 50, None)
    assert [s.key for s in before.spaces] == ["NEW"] and before.schema_behind
    # A token limited to the space reads it by key: it sees it before the migrate too.
    assert [s.key for s in svc.spaces.list_spaces(limited, 50, None).spaces] == ["OLD"]

    assert main(["admin", "migrate", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    assert "space-list-rows: applied" in out and "listed 1" in out
    after = svc.spaces.list_spaces(ADMIN, 50, None)
    assert [s.key for s in after.spaces] == ["NEW", "OLD"] and not after.schema_behind
    assert after.spaces[1] == old

    table_before = rows()
    assert main(["admin", "migrate", "--table", TABLE]) == 0
    assert rows() == table_before


def test_migrate_keys_a_task_filed_when_ids_were_random_and_its_key_then_finds_it(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = wiring.build_store(None, TABLE)
    store.create_table()
    svc = wiring.build_service(store)
    svc.spaces.create_space(ADMIN, "OPS", "ops", None)
    new, _ = svc.filing.create_task(ADMIN, "OPS", "filed now", None, None, {}, None, None)
    old = replace(new, id="task_0190aabbccdd0011223344", key="OPS-50", title="filed before")
    client().put_item(TableName=TABLE, Item=dump({**k.task_key(old.id), **items.task_item(old)}))
    with pytest.raises(TaskNotFound):
        svc.task_keys.task_id(ADMIN, "OPS-50")

    assert main(["admin", "migrate", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    assert "task-key-rows: applied" in out and "keyed 1" in out
    assert svc.task_keys.task_id(ADMIN, "OPS-50") == old.id
    assert svc.task_keys.task_id(ADMIN, new.key) == new.id


def test_migrate_marks_a_task_whose_children_predate_the_mark_and_a_rerun_writes_nothing(
    aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    store = wiring.build_store(None, TABLE)
    store.create_table()
    svc = wiring.build_service(store)
    svc.spaces.create_space(ADMIN, "OPS", "ops", None)
    parent, _ = svc.filing.create_task(ADMIN, "OPS", "parent", None, None, {}, None, None)
    kids = [
        svc.filing.create_task(
            ADMIN, "OPS", "kid", None, None, {}, None, None, links=TaskLinks(parent_id=parent.id)
        )[0].id
        for _ in range(3)
    ]
    # As a release before the mark left it: the children filed, no mark on the parent.
    client().update_item(
        TableName=TABLE, Key=dump(k.task_key(parent.id)), UpdateExpression="REMOVE has_children"
    )
    store.save_schema(
        store.schema_state(), SchemaState(version=CHILDREN_MARKED_FROM_SCHEMA - 1, step=1)
    )
    unmarked = store.get_task(parent.id)
    assert unmarked is not None and unmarked.has_children is None
    assert svc.payloads.inputs.of(unmarked)[0] == {"inputs": []}

    assert main(["admin", "migrate", "--table", TABLE, "--dry-run"]) == 0
    assert "would_mark 1" in capsys.readouterr().out
    assert store.get_task(parent.id) == unmarked

    assert main(["admin", "migrate", "--table", TABLE, "--page-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "task-children-marks: applied" in out and "marked 1" in out
    marked = store.get_task(parent.id)
    assert marked == replace(unmarked, has_children=True)  # the mark alone, no version bump
    listed = [i["task_id"] for i in svc.payloads.inputs.of(marked)[0]["inputs"]]
    assert sorted(listed) == sorted(kids)
    assert store.schema_state().version == SCHEMA_VERSION

    table_before = rows()
    assert main(["admin", "migrate", "--table", TABLE]) == 0
    assert rows() == table_before
