"""The CLI's table output: an answer wrapping a lease or a task prints that record; a field
that merely has one of those names is printed as a field (`tenure inspect` crashed on its
`task` line)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from tenure_cli.commands import graph as graph_commands
from tenure_cli.common import guarded, show, table
from tenure_worker.client import ApiError

TABLE = argparse.Namespace(output="table")


def test_a_wrapped_task_or_lease_is_the_record_printed(capsys: pytest.CaptureFixture[str]) -> None:
    show({"task": {"key": "OPS-1", "status": "ready"}, "lease": None}, TABLE)
    assert capsys.readouterr().out.split() == ["key", "OPS-1", "status", "ready"]
    show({"lease": {"id": "lease_1", "state": "pending"}}, TABLE)
    assert capsys.readouterr().out.split() == ["id", "lease_1", "state", "pending"]
    show({"task": {"key": "OPS-2"}, "lease": {"id": "lease_2"}}, TABLE)
    assert capsys.readouterr().out.split() == ["key", "OPS-2"]


def test_inspect_prints_its_lines_as_a_table_and_each_diagnostic_on_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shape GET /inspect/{id} answers: diagnostics are a list of {code, message, since}.
    answer: dict[str, Any] = {
        "task": {"key": "OPS-7", "status": "queued"},
        "current_lease": {"id": "lease_7", "state": "running"},
        "next_action": "running",
        "scheduler": {
            "paused": False,
            "effective_paused": True,
            "paused_by_task_id": "task_1",
            "parked": False,
        },
        "diagnostics": [
            {"code": "stuck", "message": "not heard from for 90 s", "since": "2026-11-30T00:00Z"},
            {"code": "orphan", "message": "held by worker w-1", "since": "2026-11-30T00:01Z"},
        ],
        "recent_events": [{"type": "lease.claimed"}, {"type": "lease.created"}],
        "as_of": "2026-11-30T00:02:00Z",
    }

    class Operator:
        def call(self, method: str, path: str) -> tuple[int, dict[str, Any]]:
            return 200, answer

    monkeypatch.setattr(graph_commands, "operator_client", lambda args: Operator())
    assert graph_commands.inspect(argparse.Namespace(id="OPS-7", output="table")) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["task", "OPS-7", "queued"] for line in out), out
    assert any(line.split() == ["current_lease", "lease_7", "running"] for line in out), out
    assert any(line.startswith("next_action") and "running" in line for line in out), out
    assert any(line.split() == ["scheduler", "task", "paused", "by", "task_1"] for line in out)
    assert any(line.split() == ["recent_events", "lease.claimed,", "lease.created"] for line in out)
    [first] = [n for n, line in enumerate(out) if line.startswith("diagnostics")]
    stuck, orphan = out[first], out[first + 1]
    assert stuck.endswith("stuck: not heard from for 90 s (since 2026-11-30T00:00Z)"), out
    # The second finding goes on below the first, under its value, with no name of its own.
    assert orphan.strip() == "orphan: held by worker w-1 (since 2026-11-30T00:01Z)", out
    assert orphan.index("orphan") == stuck.index("stuck"), out

    # A task never enqueued: no run, no event, nothing found; each says so.
    answer.update(current_lease=None, diagnostics=[], recent_events=[])
    assert graph_commands.inspect(argparse.Namespace(id="OPS-7", output="table")) == 0
    out = capsys.readouterr().out.splitlines()
    for name in ("current_lease", "diagnostics", "recent_events"):
        assert any(line.split() == [name, "none"] for line in out), out


def test_terminal_control_characters_never_reach_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hostile = "Invoice\x1b]52;c;ZXZpbA==\x07 due\x1b[2J\x9b31m\x7f\r\nline two\tend"
    show({"task": {"key": "OPS-1", "title": hostile}}, TABLE)
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\x9b\x7f\r")
    assert "Invoice]52;c;ZXZpbA== due[2J31m\nline two\tend" in out
    table([{"title": hostile}], TABLE, ["title"])
    out = capsys.readouterr().out
    assert not any(ch in out for ch in "\x1b\x07\x9b\x7f\r")
    assert out.splitlines()[1] == "Invoice]52;c;ZXZpbA== due[2J31m\\nline two\\tend"


def test_a_table_row_is_one_line_and_no_cell_reorders_the_text_around_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A title that would forge a row of its own, and one that shows "exe.txt" as "txt.exe".
    forged = "real title\nOPS-9    running    w-admin"
    flipped = "report\u202etxt.exe\u202c done \u2067x\u2069"
    table([{"key": "OPS-1", "title": forged}, {"key": "OPS-2", "title": flipped}], TABLE,
          ["key", "title"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    assert lines[1].split(maxsplit=1) == ["OPS-1", "real title\\nOPS-9    running    w-admin"]
    assert not any(ch in lines[2] for ch in "\u202e\u202c\u2067\u2069")
    show({"task": {"key": "OPS-2", "title": flipped}}, TABLE)
    assert "\u202e" not in capsys.readouterr().out


def test_an_error_message_is_printed_without_control_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refused(args: argparse.Namespace) -> int:
        raise ApiError(422, "validation_failed", "title: \x1b[31mred\x1b[0m")

    assert guarded(refused)(TABLE) != 0
    assert capsys.readouterr().err == "error: validation_failed: title: [31mred[0m\n"


def test_the_address_commands_call_the_addresses_routes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenure_cli.commands import rules as rules_commands

    calls: list[tuple[str, str, Any]] = []

    class Recording:
        def call(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
            calls.append((method, path, body))
            row = {"address": "a@in.example", "space": "OPS", "created_at": "2026-01-01T00:00:00Z"}
            return 200, {"addresses": [row]} if method == "GET" else row

    monkeypatch.setattr(rules_commands, "operator_client", lambda args: Recording())
    args = argparse.Namespace(output="table", space="OPS", address="a+b@in.example")
    assert rules_commands.address_add(args) == 0
    assert rules_commands.addresses_list(args) == 0
    assert rules_commands.address_remove(args) == 0
    assert calls == [
        ("POST", "/spaces/OPS/addresses", {"address": "a+b@in.example"}),
        ("GET", "/spaces/OPS/addresses", None),
        ("DELETE", "/spaces/OPS/addresses/a%2Bb%40in.example", None),
    ]
    assert "a@in.example" in capsys.readouterr().out
