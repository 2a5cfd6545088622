"""List commands: --limit, --cursor and --all follow any answer's next_cursor, bounded; -o json
carries next_cursor; lists over every visible space or pool are bounded too; a list cut short
by the CLI's own bound says so and exits 1."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from tenure_cli import listing
from tenure_cli.commands import leases as leases_commands
from tenure_cli.commands import pools as pools_commands
from tenure_cli.commands import worker as worker_commands
from tenure_cli.commands import workers as workers_commands
from tenure_cli.main import main
from tenure_worker.client import ApiError


class Pages:
    """A service answering GET `path` in pages of `size` over `rows`, its cursor the offset."""

    def __init__(self, rows: list[dict[str, Any]], key: str, size: int = 2) -> None:
        self.rows, self.key, self.size = rows, key, size
        self.asked: list[dict[str, list[str]]] = []

    def call(self, method: str, path: str, *args: Any, **kw: Any) -> tuple[int, Any]:
        assert method == "GET", (method, path)
        query = parse_qs(urlsplit(path).query)
        if urlsplit(path).path == "/pools" and self.key == "leases":
            return 200, {"pools": []}  # the display names `leases list` reads
        self.asked.append(query)
        size = int(query.get("limit", [self.size])[0])
        start = int(query.get("cursor", ["0"])[0])
        end = start + size
        more = str(end) if end < len(self.rows) else None
        return 200, {self.key: self.rows[start:end], "next_cursor": more}


LEASES = [{"id": f"lease_{n}", "state": "pending", "pool": "p"} for n in range(7)]


def test_one_page_by_default_with_its_cursor_in_json_and_a_notice_in_a_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Pages(LEASES, "leases", size=3)
    monkeypatch.setattr(leases_commands, "operator_client", lambda args: fake)
    assert main(["leases", "list", "--space", "OPS", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"leases": LEASES[:3], "next_cursor": "3"}

    assert main(["leases", "list", "--space", "OPS", "--cursor", "3", "--limit", "2"]) == 0
    captured = capsys.readouterr()
    shown = [line.split()[0] for line in captured.out.splitlines()[1:]]
    assert shown == ["lease_3", "lease_4"]
    assert "more exist" in captured.err and "--cursor 5" in captured.err
    assert fake.asked[-1]["limit"] == ["2"] and fake.asked[-1]["cursor"] == ["3"]


def test_leases_list_passes_the_subject_kinds_to_keep(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Pages(LEASES, "leases", size=3)
    monkeypatch.setattr(leases_commands, "operator_client", lambda args: fake)
    argv = ["leases", "list", "--space", "OPS", "--subject-kind", "workflow,space", "-o", "json"]
    assert main(argv) == 0
    assert fake.asked[-1]["subject_kind"] == ["workflow,space"]
    assert main(["leases", "list", "--space", "OPS", "-o", "json"]) == 0
    assert "subject_kind" not in fake.asked[-1]


def test_all_follows_next_cursor_to_the_last_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Pages(LEASES, "leases", size=3)
    monkeypatch.setattr(leases_commands, "operator_client", lambda args: fake)
    assert main(["leases", "list", "--space", "OPS", "--all", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"leases": LEASES, "next_cursor": None}
    assert captured.err == ""
    assert len(fake.asked) == 3


def test_all_stops_at_its_bound_says_where_to_go_on_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(listing, "MAX_PAGES", 2)
    fake = Pages(LEASES, "leases", size=3)
    monkeypatch.setattr(leases_commands, "operator_client", lambda args: fake)
    assert main(["leases", "list", "--space", "OPS", "--all", "-o", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"leases": LEASES[:6], "next_cursor": "6"}
    (line,) = captured.err.splitlines()
    assert line.startswith("error: truncated: stopped after 2 pages (6 leases)")
    assert "--cursor 6" in line


def test_cursor_and_all_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["tasks", "list", "--space", "OPS", "--all", "--cursor", "x"])
    assert ended.value.code == 2
    with pytest.raises(SystemExit) as ended:
        main(["tasks", "list", "--space", "OPS", "--limit", "0"])
    assert ended.value.code == 2


def test_tasks_list_json_is_the_records_tasks_get_prints_with_next_cursor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = [{"task": {"id": "task_1", "key": "OPS-1"}, "lease": None}]
    fake = Pages(entries, "tasks")
    monkeypatch.setattr(worker_commands, "operator_client", lambda args: fake)
    assert main(["tasks", "list", "--space", "OPS", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"tasks": entries, "next_cursor": None}


class Instance:
    """Spaces, their pools and the pools' workers, each list in one page."""

    def __init__(self, spaces: dict[str, dict[str, list[str]]], has_spaces: bool = True) -> None:
        self.spaces, self.has_spaces = spaces, has_spaces
        self.calls: list[str] = []

    def call(self, method: str, path: str, *args: Any, **kw: Any) -> tuple[int, Any]:
        self.calls.append(path)
        where, query = urlsplit(path).path, parse_qs(urlsplit(path).query)
        if where == "/spaces":
            if not self.has_spaces:
                raise ApiError(404, "not_found", "no such route")
            return 200, {"spaces": [{"key": k} for k in self.spaces], "next_cursor": None}
        if where == "/pools":
            space = query["space"][0]
            return 200, {"pools": [{"name": p, "space": space} for p in self.spaces[space]]}
        if where == "/workers":
            pool = query["pool"][0]
            for pools in self.spaces.values():
                if pool in pools:
                    return 200, {
                        "workers": [
                            {"worker_id": w, "pool": pool, "status": "reachable", "leases": []}
                            for w in pools[pool]
                        ]
                    }
        raise AssertionError(path)


INSTANCE = {"A": {"a1": ["w1", "w2"], "a2": []}, "B": {"b1": ["w3"]}}


def test_pools_list_without_space_lists_every_visible_space(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Instance(INSTANCE)
    monkeypatch.setattr(pools_commands, "operator_client", lambda args: fake)
    assert main(["pools", "list", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in out["pools"]] == ["a1", "a2", "b1"]
    assert out["next_cursor"] is None
    assert main(["pools", "list", "--space", "B", "-o", "json"]) == 0
    assert [p["name"] for p in json.loads(capsys.readouterr().out)["pools"]] == ["b1"]


def test_workers_list_over_every_visible_pool_or_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Instance(INSTANCE)
    monkeypatch.setattr(workers_commands, "operator_client", lambda args: fake)
    assert main(["workers", "list", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [w["worker_id"] for w in out["workers"]] == ["w1", "w2", "w3"]
    assert main(["workers", "list", "--space", "A"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "WORKER_ID",
        "POOL",
        "STATUS",
        "LAST_SEEN",
        "WORKER_VERSION",
        "HELD",
    ]
    assert [row.split()[0] for row in table[1:]] == ["w1", "w2"]
    fake.calls.clear()
    assert main(["workers", "list", "--pool", "b1", "-o", "json"]) == 0
    assert [w["worker_id"] for w in json.loads(capsys.readouterr().out)["workers"]] == ["w3"]
    assert fake.calls == ["/workers?pool=b1"]
    # --limit caps the rows of a list gathered over several pools.
    assert main(["workers", "list", "--limit", "1", "-o", "json"]) == 0
    assert [w["worker_id"] for w in json.loads(capsys.readouterr().out)["workers"]] == ["w1"]


def test_a_gathered_list_is_bounded_and_says_how_to_narrow_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(listing, "MAX_TARGETS", 2)
    fake = Instance({"A": {"a1": []}, "B": {"b1": []}, "C": {"c1": []}})
    monkeypatch.setattr(pools_commands, "operator_client", lambda args: fake)
    assert main(["pools", "list", "-o", "json"]) == 1
    captured = capsys.readouterr()
    assert [p["name"] for p in json.loads(captured.out)["pools"]] == ["a1", "b1"]
    (line,) = captured.err.splitlines()
    assert (
        line == "error: truncated: read the pools of the first 2 of 3 spaces (narrow with --space)"
    )
    assert not any("space=C" in call for call in fake.calls)


def test_without_space_on_a_service_that_cannot_list_spaces_the_error_says_give_space(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Instance(INSTANCE, has_spaces=False)
    monkeypatch.setattr(pools_commands, "operator_client", lambda args: fake)
    assert main(["pools", "list"]) == 2
    assert capsys.readouterr().err == "error: this service cannot list its spaces: give --space\n"
    assert main(["pools", "list", "--cursor", "x"]) == 2
    assert "--cursor pages one list: give --space" in capsys.readouterr().err


def test_every_list_command_takes_limit_cursor_and_all() -> None:
    """A new `… list` command (or one that lists under another name) must page like the
    others: it takes --limit, --cursor and --all, and prints through show_list."""
    import argparse

    from tenure_cli.main import parser

    def walk(p: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Any:
        yield words, p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, (*words, name))

    named = {"spaces addresses", "leases attachments", "tasks blocks", "scheduler backlog"}
    found = {
        " ".join(words): {flag for a in p._actions for flag in a.option_strings}
        for words, p in walk(parser())
        if words and (words[-1] == "list" or " ".join(words) in named)
    }
    assert {"leases list", "tasks list", "pools list", "workers list", "tokens list"} <= set(found)
    assert named <= set(found)
    paging = {"--limit", "--cursor", "--all"}
    lacking = {name: sorted(paging - flags) for name, flags in found.items() if paging - flags}
    assert not lacking, lacking
