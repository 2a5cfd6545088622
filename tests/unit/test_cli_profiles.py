"""Profiles in $XDG_CONFIG_HOME/tenure/config.toml: chosen by --profile or TENURE_PROFILE (else
`default`); an option beats a variable beats a profile; a misspelled profile, a broken file or
a token file others may read is refused in one line with a code, and exit 2."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from tenure_cli.common import guarded, operator_client
from tenure_cli.main import main

CONFIG = """
[profiles.default]
api = "http://127.0.0.1:8001"
token_file = "default.token"

[profiles.prod]
api = "https://tenure.example.com"
token_file = "~/prod.token"
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TENURE_API", "TENURE_TOKEN", "TENURE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    xdg = tmp_path / "xdg"
    (xdg / "tenure").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    path = xdg / "tenure" / "config.toml"
    path.write_text(CONFIG)
    _secret(xdg / "tenure" / "default.token", "tok-default\n")
    _secret(home / "prod.token", "tok-prod")
    return path


def _secret(path: Path, text: str, mode: int = 0o600) -> None:
    path.write_text(text)
    os.chmod(path, mode)


def _args(**given: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"api": None, "token": None, "profile": None, **given})


def test_the_named_profile_gives_the_address_and_the_token_file_the_token(config: Path) -> None:
    client = operator_client(_args(profile="prod"))
    assert (client.base, client.token) == ("https://tenure.example.com/api/v1", "tok-prod")


def test_without_a_name_the_default_profile_is_used_and_tenure_profile_chooses(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = operator_client(_args())
    assert (client.base, client.token) == ("http://127.0.0.1:8001/api/v1", "tok-default")
    monkeypatch.setenv("TENURE_PROFILE", "prod")
    assert operator_client(_args()).token == "tok-prod"
    # --profile beats TENURE_PROFILE.
    assert operator_client(_args(profile="default")).token == "tok-default"


def test_an_option_beats_a_variable_which_beats_the_profile(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENURE_API", "http://127.0.0.1:8002")
    monkeypatch.setenv("TENURE_TOKEN", "tok-env")
    client = operator_client(_args(profile="prod"))
    assert (client.base, client.token) == ("http://127.0.0.1:8002/api/v1", "tok-env")
    client = operator_client(_args(profile="prod", api="http://127.0.0.1:8003", token="tok-opt"))
    assert (client.base, client.token) == ("http://127.0.0.1:8003/api/v1", "tok-opt")
    monkeypatch.delenv("TENURE_TOKEN")
    assert operator_client(_args(profile="prod")).token == "tok-prod"


def test_no_config_file_and_no_name_is_the_old_missing_variable_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("TENURE_API", "TENURE_TOKEN", "TENURE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "nothing"))
    assert main(["leases", "get", "lease_1"]) == 2
    assert capsys.readouterr().err == (
        "error: TENURE_API is not set (and no option or profile gave it)\n"
    )


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_a_misspelled_profile_is_one_line_with_a_code_even_with_every_option_given(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _refused(["leases", "get", "lease_1", "--profile", "prdo"], capsys)
    assert line == f"error: unknown_profile: no profile 'prdo' in {config} (it has: default, prod)"
    given = ["--api", "http://127.0.0.1:9", "--token", "t"]
    line = _refused(["leases", "get", "lease_1", "--profile", "prdo", *given], capsys)
    assert line.startswith("error: unknown_profile: ")
    monkeypatch.setenv("TENURE_PROFILE", "nope")
    assert _refused(["tasks", "list", "--space", "OPS"], capsys).startswith(
        "error: unknown_profile: no profile 'nope'"
    )
    config.unlink()
    assert _refused(["tasks", "list", "--space", "OPS"], capsys) == (
        f"error: unknown_profile: no profile 'nope': {config} does not exist"
    )


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o660, 0o644])
def test_a_token_file_open_to_group_or_others_is_refused(
    mode: int, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = Path(os.environ["HOME"]) / "prod.token"
    os.chmod(token, mode)
    line = _refused(["leases", "get", "lease_1", "--profile", "prod"], capsys)
    assert line.startswith("error: token_file_unsafe: profile 'prod'"), line
    assert f"chmod 600 {token}" in line and "tok-prod" not in line


def test_a_token_file_open_to_others_is_not_read_when_a_token_is_given(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.chmod(Path(os.environ["HOME"]) / "prod.token", 0o644)
    monkeypatch.setenv("TENURE_TOKEN", "tok-env")
    assert operator_client(_args(profile="prod")).token == "tok-env"


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("[profiles.prod\napi = 1", "bad_config", "config.toml"),
        ("[profiles.prod]\napi = 5\n", "bad_config", "profiles.prod.api must be a string"),
        ('[profiles.prod]\ntokenfile = "x"\n', "bad_config", "unknown key 'tokenfile'"),
        ('profiles = "prod"\n', "bad_config", "`profiles` must be a table"),
        (
            '[profiles.prod]\napi = "http://127.0.0.1:9"\ntoken_file = "missing.token"\n',
            "token_file_unreadable",
            "missing.token: No such file",
        ),
    ],
)
def test_a_broken_config_is_one_line_with_a_code(
    text: str,
    code: str,
    says: str,
    config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config.write_text(text)
    line = _refused(["leases", "get", "lease_1", "--profile", "prod"], capsys)
    assert line.startswith(f"error: {code}: ") and says in line, line


def test_a_config_file_that_is_not_utf8_is_a_bad_config(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_bytes(b'[profiles.prod]\napi = "http://caf\xe9.example"\n')
    line = _refused(["leases", "get", "lease_1", "--profile", "prod"], capsys)
    assert line.startswith(f"error: bad_config: {config}: ") and "UTF-8" in line, line


@pytest.mark.parametrize("token_file", ["~nosuchuser-tenure/prod.token", "~nosuchuser-tenure"])
def test_a_token_file_under_an_unknown_users_home_is_unreadable(
    token_file: str, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text(f'[profiles.prod]\napi = "http://127.0.0.1:9"\ntoken_file = "{token_file}"\n')
    line = _refused(["leases", "get", "lease_1", "--profile", "prod"], capsys)
    assert line.startswith("error: token_file_unreadable: profile 'prod'"), line
    assert token_file in line


def test_an_unknown_users_home_in_a_token_file_not_read_is_no_error(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_text(
        '[profiles.prod]\napi = "http://127.0.0.1:9"\ntoken_file = "~nosuchuser-tenure/t"\n'
    )
    monkeypatch.setenv("TENURE_TOKEN", "tok-env")
    client = operator_client(_args(profile="prod"))
    assert client.token == "tok-env"


def test_a_profile_address_that_cannot_be_used_is_a_usage_error_naming_the_profile(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config.write_text('[profiles.prod]\napi = "http://127.0.0.1:99999"\ntoken_file = "t"\n')
    line = _refused(["leases", "get", "lease_1", "--profile", "prod", "--token", "t"], capsys)
    assert line.startswith("error: profile 'prod' ") and "'http://127.0.0.1:99999'" in line, line


def test_an_empty_token_file_is_refused(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _secret(Path(os.environ["HOME"]) / "prod.token", "\n")
    line = _refused(["leases", "get", "lease_1", "--profile", "prod"], capsys)
    assert line.startswith("error: token_file_empty: ")


@pytest.mark.parametrize("text", ["tok-prod\nX-Evil: 1\n", "tok-\u2603\n"])
def test_a_token_file_holding_what_no_token_has_is_refused_unshown(
    text: str, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _secret(Path(os.environ["HOME"]) / "prod.token", text)
    for argv in (["leases", "get", "lease_1"], ["worker", "claim", "--pool", "p"]):
        line = _refused([*argv, "--profile", "prod"], capsys)
        assert line.startswith("error: profile 'prod' ") and "never has" in line, line
        assert "tok-" not in line and "X-Evil" not in line, line


def test_worker_commands_take_the_profile_too(config: Path) -> None:
    from tenure_cli.commands.worker import worker_endpoints

    api, job_api = worker_endpoints(None, config.parent / "no-stack", "prod")
    assert (api, job_api) == ("https://tenure.example.com", "https://tenure.example.com")


def test_guarded_turns_a_profile_error_into_exit_2(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = guarded(lambda args: operator_client(args) and 0)
    assert run(_args(profile="ghost")) == 2
    assert capsys.readouterr().err.startswith("error: unknown_profile: ")
