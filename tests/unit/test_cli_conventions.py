"""The `tenure` command's conventions: every option, positional and subcommand says what it is
for; the exit codes are one table, printed by `tenure --help` and repeated in docs/cli.md; every
command that calls the service ends in one line and a code from that table."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tenure_cli import extras
from tenure_cli.common import EXIT_CODES, GROUPS, USAGE
from tenure_cli.main import main, parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
# The commands main.py runs itself, outside the service's command groups.
OWN = {"local", "dynamodb-local", "bench", "email", "completion"}


def _commands(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


def _leaves() -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for path, p in _commands(parser()):
        if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions):
            yield path, p


def test_every_option_positional_and_subcommand_has_help() -> None:
    missing = []
    for path, p in _commands(parser()):
        where = " ".join(("tenure", *path))
        for action in p._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                choices = action._choices_actions
                missing += [f"{where} {choice.dest}" for choice in choices if not choice.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "without help text:\n" + "\n".join(missing)


def test_the_help_epilog_lists_every_exit_code() -> None:
    epilog = parser().epilog or ""
    for code, meaning in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+{re.escape(meaning)}$", epilog, re.M), (code, epilog)


def test_docs_cli_md_lists_the_same_exit_codes() -> None:
    rows = re.findall(r"^\| `?(\d+)`? \| (.+?) \|$", DOCS.read_text(), re.M)
    assert [int(code) for code, _ in rows] == [code for code, _ in EXIT_CODES], rows


def test_every_command_of_the_service_ends_in_one_line_and_a_listed_code() -> None:
    groups = {name for name, _ in GROUPS} | {"inspect"}
    leaves = [(path, p) for path, p in _leaves() if path[0] not in OWN]
    assert {path[0] for path, _ in leaves} == groups
    unguarded = [
        " ".join(path)
        for path, p in leaves
        if p.get_default("func").__qualname__ != "guarded.<locals>.run"
    ]
    assert not unguarded, unguarded


@pytest.mark.parametrize(
    "argv",
    [
        ["tasks", "create", "--space", "OPS", "--title", "t", "--properties", "{nope"],
        ["tasks", "create", "--space", "OPS", "--title", "t", "--api", "http://127.0.0.1:9"],
        ["worker", "run", "--pool", "p", "--api", "http://127.0.0.1:9", "--token", "t"],
    ],
)
def test_a_usage_error_found_by_a_command_exits_2_like_argparse(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TENURE_API", raising=False)
    monkeypatch.delenv("TENURE_TOKEN", raising=False)
    if "--api" not in argv:
        argv = [*argv, "--api", "http://127.0.0.1:9", "--token", "t"]
    assert main(argv) == USAGE == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
    with pytest.raises(SystemExit) as ended:
        main(["tasks", "create", "--no-such-option"])
    assert ended.value.code == USAGE


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out.strip() == f"tenure {version('tenure')}"


@pytest.mark.parametrize("argv", [["local"], ["bench", "claims"], ["bench", "load"]])
def test_local_and_bench_without_the_local_extra_say_what_to_install(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(extras, "LOCAL_EXTRA_MODULES", ("tenure_no_such_module",))
    assert main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: tenure {' '.join(argv)} needs the local extra: ")
    assert "pip install 'tenure[local]'" in line
