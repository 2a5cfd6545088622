"""`tenure completion bash|zsh|fish`: written from the argparse tree, so it names every command
there is; each script parses in its shell (bash always; zsh and fish where installed), and
bash completes the words a user would type. Also: an unexpected error is one line and exit 1,
never a traceback, in either output mode."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest
from tenure_cli import main as tenure_main
from tenure_cli.commands import leases as leases_commands
from tenure_cli.completion import nodes
from tenure_cli.main import main, parser


def _script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def _top_level() -> list[str]:
    (root, *_) = nodes(parser())
    return list(root.children)


def _commands() -> list[str]:
    """Every command's words (the leaves of the tree)."""
    return [n.words for n in nodes(parser()) if n.words and not n.children]


def test_the_tree_has_every_top_level_command() -> None:
    # Checked against argparse's own list, so the test cannot agree with itself by accident.
    found = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert _top_level() == list(found.choices)
    assert {"leases", "tasks", "pools", "workers", "completion", "inspect"} <= set(_top_level())


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_names_every_command_and_its_options(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _script(shell, capsys)
    for name in _top_level():
        assert f"'{name}'" in text, name
    for words in _commands():
        assert f"'{words}'" in text, words
    for flag in ("--space", "--limit", "--all", "--cursor", "--profile"):
        assert flag.lstrip("-") in text


def _bash_complete(script: Path, line: list[str]) -> list[str]:
    words = " ".join(f"'{w}'" for w in line)
    program = (
        f"source {script}; COMP_WORDS=({words}); COMP_CWORD={len(line) - 1}; "
        '_tenure; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_sources_it_and_completes_commands_options_and_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "tenure.bash"
    script.write_text(_script("bash", capsys))
    subprocess.run(["bash", "-n", str(script)], check=True)
    assert _bash_complete(script, ["tenure", ""]) == [*_top_level(), "-h", "--help", "--version"]
    assert _bash_complete(script, ["tenure", "wor"]) == ["worker", "workers"]
    assert _bash_complete(script, ["tenure", "workers", "list", "--po"]) == ["--pool"]
    assert _bash_complete(script, ["tenure", "leases", "list", "-o", ""]) == ["table", "json"]
    assert _bash_complete(script, ["tenure", "completion", ""])[:3] == ["bash", "zsh", "fish"]
    # An option's value in between does not lose the place in the tree.
    line = ["tenure", "--version", "tasks", "list", "--space", "OPS", "--st"]
    assert _bash_complete(script, line) == ["--status"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_parses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "_tenure"
    script.write_text(_script("zsh", capsys))
    subprocess.run(["zsh", "-n", str(script)], check=True)
    # Outside a completion widget: compdef stubbed, compadd printing what it is given (zsh
    # itself then filters the candidates by what was typed).
    program = (
        f"compdef() {{ :; }}; source {script}; compadd() {{ shift; print -r -- $@; }}; "
        'words=(tenure leases list -o ""); CURRENT=5; _tenure; '
        "words=(tenure workers list --po); CURRENT=4; _tenure"
    )
    done = subprocess.run(["zsh", "-c", program], capture_output=True, text=True, check=True)
    choices, options = done.stdout.splitlines()
    assert choices.split() == ["table", "json"]
    assert {"--pool", "--space", "--limit", "--all", "--profile"} <= set(options.split())


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed here")
def test_fish_parses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "tenure.fish"
    script.write_text(_script("fish", capsys))
    subprocess.run(["fish", "--no-execute", str(script)], check=True)
    asked = f'source {script}; complete -C "tenure wor"; complete -C "tenure leases list -o "'
    done = subprocess.run(["fish", "-c", asked], capture_output=True, text=True, check=True)
    offered = [line.split("\t")[0] for line in done.stdout.splitlines()]
    assert offered == ["worker", "workers", "json", "table"]


def test_zsh_and_fish_scripts_hold_together_without_their_shells(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What can be checked without the shells: zsh's functions and case arms are closed and
    its script registers itself; every fish line is a whole command (its quotes balanced)."""
    zsh = _script("zsh", capsys)
    assert zsh.startswith("#compdef tenure\n") and zsh.rstrip().endswith("compdef _tenure tenure")
    assert zsh.count("() {\n") == zsh.count("\n}\n") == 4  # four functions, each closed
    assert zsh.count(" case ") == zsh.count("esac") == 3
    fish = _script("fish", capsys)
    for line in fish.splitlines():
        assert line.count("'") % 2 == 0 and line.count('"') % 2 == 0, line
    assert fish.count("\nfunction ") == 1 and fish.count("\nend") == 1
    commands = [n for n in nodes(parser()) if n.words]
    assert fish.count("complete -c tenure") >= len(commands)


# ------------------------------------------------------------- no tracebacks, ever


@pytest.mark.parametrize("mode", ["table", "json"])
def test_an_unexpected_error_is_one_line_and_exit_1_in_every_output_mode(
    mode: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Broken:
        def call(self, *args: object, **kw: object) -> tuple[int, object]:
            raise KeyError("lease")  # e.g. an answer of a shape this release does not know

    monkeypatch.setattr(leases_commands, "operator_client", lambda args: Broken())
    assert main(["leases", "get", "lease_1", "-o", mode]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line == "error: unexpected: KeyError: 'lease' (a bug in tenure)"
    assert "Traceback" not in captured.out + captured.err


def test_an_unexpected_error_outside_a_service_command_is_one_line_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(shell: str, p: argparse.ArgumentParser) -> str:
        raise RuntimeError("the tree\nis broken")

    monkeypatch.setattr("tenure_cli.completion.script", broken)
    assert main(["completion", "bash"]) == 1
    assert capsys.readouterr().err == (
        "error: unexpected: RuntimeError: the tree is broken (a bug in tenure)\n"
    )
    assert tenure_main.FAILED == 1
