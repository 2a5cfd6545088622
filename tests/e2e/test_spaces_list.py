"""`tenure spaces list` against the local stack: one page with its next_cursor in -o json,
every page with --all, and a token limited to spaces shown those spaces alone."""

from __future__ import annotations

import json

import pytest
from tenure_cli.main import main

from tests.e2e.support import Api, World, suffix
from tests.e2e.worker_support import service_url


def spaces_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    capsys.readouterr()
    assert main(["spaces", "list", "-o", "json", *args]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(answer) == {"spaces", "next_cursor"}
    return dict(answer)


def test_spaces_list_pages_follows_cursors_and_keeps_to_a_limited_tokens_spaces(
    api: Api, world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = f"E{suffix()}"
    r = world.admin.post("/spaces", json={"key": other, "name": "another"})
    assert r.status_code == 201, r.text
    monkeypatch.setenv("TENURE_API", service_url(api.base))
    monkeypatch.setenv("TENURE_TOKEN", api.admin_token)

    one = spaces_json(capsys, "--limit", "1")
    assert len(one["spaces"]) == 1 and isinstance(one["next_cursor"], str)  # type: ignore[arg-type]
    second = spaces_json(capsys, "--limit", "1", "--cursor", str(one["next_cursor"]))
    assert second["spaces"] != one["spaces"]
    every = spaces_json(capsys, "--all")
    keys = [s["key"] for s in every["spaces"]]  # type: ignore[attr-defined]
    assert every["next_cursor"] is None and keys == sorted(keys) and len(keys) == len(set(keys))
    assert {world.space, other} <= set(keys)

    r = world.admin.post(
        "/tokens",
        json={"name": f"only-{suffix().lower()}", "kind": "operator", "spaces": [world.space]},
    )
    assert r.status_code == 201, r.text
    monkeypatch.setenv("TENURE_TOKEN", r.json()["token"])
    mine = spaces_json(capsys, "--all")
    assert [s["key"] for s in mine["spaces"]] == [world.space]  # type: ignore[attr-defined]
    capsys.readouterr()
    assert main(["spaces", "list"]) == 0
    table = capsys.readouterr().out
    assert world.space in table and other not in table and "ARCHIVED" in table
