"""What the `tenure` command is given reaches the service as given, or is refused by the command
itself in one line and exit 2: a 0 is a value, never taken for an option left out, and no
input ends in a traceback. Against a fake transport that records every request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tenure_cli.common import USAGE
from tenure_cli.main import main
from tenure_worker import client as sdk

API = "http://127.0.0.1:8787"
Request = tuple[str, str, Any]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[Request]]:
    """Every request the command made, each answered by the next of `answers` (status, body),
    and then by 200 `{}`."""
    for name in ("TENURE_API", "TENURE_TOKEN", "TENURE_PROFILE", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    seen: list[Request] = []
    script: list[tuple[int, Any]] = []

    def transport(
        method: str, url: str, headers: dict[str, str], data: bytes | None, timeout: float
    ) -> sdk.Answer:
        seen.append((method, url.removeprefix(f"{API}/api/v1"), json.loads(data or b"null")))
        status, body = script.pop(0) if script else (200, {})
        return sdk.Answer(status, {}, json.dumps(body).encode())

    monkeypatch.setattr(sdk, "urllib_transport", transport)
    monkeypatch.setattr(sdk, "BACKOFF_BASE", 0.0)

    def start(*answers: tuple[int, Any]) -> list[Request]:
        script.extend(answers)
        return seen

    return start


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    return line


def _argparse_refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == USAGE
    return [x for x in capsys.readouterr().err.splitlines() if "error:" in x][-1]


# ------------------------------------------------------------------- a 0 is a value


def test_tokens_create_sends_an_expiry_of_0_seconds_for_the_service_to_refuse(
    sent: Callable[..., list[Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    refusal = {"error": {"code": "validation_failed", "message": "expires_in_seconds: >= 1"}}
    requests = sent((422, refusal))
    argv = ["tokens", "create", "--name", "ci", "--kind", "worker", "--expires-in-seconds", "0"]
    assert main([*argv, "--api", API, "--token", "t"]) == 1
    (post,) = [r for r in requests if r[0] == "POST"]
    assert post[1] == "/tokens" and post[2]["expires_in_seconds"] == 0
    assert _one_line(capsys).startswith("error: validation_failed: ")


@pytest.mark.parametrize("command", ["run", "claim"])
@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_lease_length_below_1_second_is_refused_not_dropped(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["worker", command, "--pool", "p", "--lease-seconds", value]
    assert "argument --lease-seconds" in _argparse_refusal(argv, capsys)


@pytest.mark.parametrize("group", ["worker", "tasks"])
def test_an_empty_block_expiry_is_refused_not_dropped(
    group: str,
    sent: Callable[..., list[Request]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent((200, {"lease": {"task": {"id": "T0"}}}))  # a job's payload, for its task
    monkeypatch.setenv("TENURE_API", API)
    monkeypatch.setenv("TENURE_LEASE_ID", "L1")
    monkeypatch.setenv("TENURE_LEASE_TOKEN", "lt")
    target = ["--task", "T1"] if group == "worker" else ["T1", "--token", "t"]
    argv = [group, "block", *target, "--kind", "transient", "--reason", "r", "--expires-in", ""]
    assert main(argv) == USAGE
    assert "--expires-in" in _one_line(capsys)
    assert not [r for r in requests if r[0] == "POST"]


def test_an_empty_usage_on_complete_is_refused_not_taken_for_the_noted_one(
    sent: Callable[..., list[Request]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    for name, value in (
        ("TENURE_API", API),
        ("TENURE_LEASE_ID", "L1"),
        ("TENURE_LEASE_TOKEN", "lt"),
    ):
        monkeypatch.setenv(name, value)
    assert main(["worker", "complete", "--usage", ""]) == USAGE
    assert _one_line(capsys).startswith("error: --usage is not valid JSON")
    assert requests == []


@pytest.mark.parametrize("value", ["0", "-3"])
def test_leases_logs_with_a_tail_below_1_is_refused_not_every_line(
    value: str, sent: Callable[..., list[Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    requests = sent()
    argv = ["leases", "logs", "L1", "--tail", value, "--api", API, "--token", "t"]
    assert "argument --tail" in _argparse_refusal(argv, capsys)
    assert requests == []


def test_leases_logs_sends_the_tail_it_was_given(sent: Callable[..., list[Request]]) -> None:
    requests = sent((200, {"events": [], "next_cursor": None}))
    assert main(["leases", "logs", "L1", "--tail", "1", "--api", API, "--token", "t"]) == 0
    assert [url for _, url, _ in requests] == ["/leases/L1/logs?tail=1"]
