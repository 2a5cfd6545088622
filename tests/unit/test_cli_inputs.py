"""What the `tenure` command is given reaches the service as given, or is refused by the command
itself in one line and exit 2: a 0 is a value, never taken for an option left out, and no
input ends in a traceback. Against a fake transport that records every request."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
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


@pytest.mark.parametrize("value", ["0", "-1"])
def test_worker_run_refuses_a_concurrency_below_1_rather_than_never_claiming(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["worker", "run", "--pool", "p", "--concurrency", value, "--", "true"]
    assert "argument --concurrency" in _argparse_refusal(argv, capsys)


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


# ------------------------------------------------------------------- worker usage


@pytest.fixture
def usage_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "job.usage"
    monkeypatch.setenv("TENURE_USAGE_FILE", str(path))
    return path


def _noted(path: Path) -> Any:
    """The usage file as `worker complete` reads and sends it: strict JSON."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the usage file")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cost-amount", "NaN", "--currency", "USD", "--cost-status", "actual"], "--cost-amount"),
        (["--cost-amount", "inf", "--currency", "USD", "--cost-status", "actual"], "--cost-amount"),
        (
            ["--cost-amount", "1e400", "--currency", "USD", "--cost-status", "actual"],
            "--cost-amount",
        ),
        (["--cost-amount", "-1", "--currency", "USD", "--cost-status", "actual"], "--cost-amount"),
        (
            ["--cost-amount", "1e10", "--currency", "USD", "--cost-status", "actual"],
            "--cost-amount",
        ),
        (["--input-tokens", "9" * 41], "--input-tokens"),
        (["--output-tokens", str(10**15 + 1)], "--output-tokens"),
        (["--reasoning-tokens", "-1"], "--reasoning-tokens"),
    ],
)
def test_worker_usage_refuses_a_number_the_service_cannot_take_and_writes_nothing(
    argv: list[str], says: str, usage_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert says in _argparse_refusal(["worker", "usage", *argv], capsys)
    assert not usage_file.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cost-amount", "1.5", "--currency", "USD"], "--cost-status"),
        (["--currency", "USD"], "--cost-status"),
        (["--cost-source", "invoice"], "--cost-status"),
        (["--cost-status", "included", "--cost-amount", "2", "--currency", "USD"], "no amount"),
        (["--cost-status", "actual", "--cost-amount", "1", "--currency", "X" * 17], "--currency"),
        (["--cost-status", "unknown", "--cost-source", "s" * 101], "--cost-source"),
    ],
)
def test_worker_usage_refuses_a_cost_the_service_would_refuse_naming_the_option(
    argv: list[str], says: str, usage_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "usage", *argv]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: ") and says in line, line
    assert not usage_file.exists()


def test_worker_usage_refuses_a_sum_past_the_services_bounds_and_keeps_what_was_noted(
    usage_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cost = ["--currency", "USD", "--cost-status", "actual"]
    assert (
        main(["worker", "usage", "--input-tokens", str(10**15), "--cost-amount", "1e9", *cost]) == 0
    )
    noted = usage_file.read_text()
    capsys.readouterr()
    assert main(["worker", "usage", "--input-tokens", "1"]) == USAGE
    assert "--input-tokens" in _one_line(capsys)
    assert main(["worker", "usage", "--cost-amount", "0.5", *cost]) == USAGE
    assert "--cost-amount" in _one_line(capsys)
    assert usage_file.read_text() == noted


def test_what_worker_usage_notes_is_a_usage_the_service_takes(usage_file: Path) -> None:
    from tenure.app.usage import MAX_AMOUNT, MAX_TOKENS, stored_usage
    from tenure_cli.commands import autonomy

    assert (autonomy.MAX_TOKENS, autonomy.MAX_AMOUNT) == (MAX_TOKENS, MAX_AMOUNT)
    cost = ["--currency", "USD", "--cost-status", "actual"]
    assert main(["worker", "usage", "--input-tokens", "0", "--cost-amount", "0", *cost]) == 0
    assert main(["worker", "usage", "--input-tokens", "7", "--cost-amount", "0.25", *cost]) == 0
    noted = _noted(usage_file)
    assert noted == {
        "input_tokens": 7,
        "cost": {"status": "actual", "source": "worker", "currency": "USD", "amount": 0.25},
    }
    assert stored_usage(noted, None)["cost"]["amount"] == 0.25


# An empty --usage is not the noted usage taken again, and NaN is no JSON a service reads.
@pytest.mark.parametrize("usage", ["", '{"input_tokens": NaN}'])
def test_worker_complete_refuses_a_usage_that_is_not_strict_json(
    usage: str,
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
    assert main(["worker", "complete", "--usage", usage]) == USAGE
    assert _one_line(capsys).startswith("error: --usage is not valid JSON")
    assert requests == []


# ------------------------------------------------------------------- the service's address


BAD_ADDRESSES = [
    "http://[::1",
    "http://127.0.0.1:99999",
    "http://127.0.0.1:65536",
    "http://127.0.0.1:0",
    "http://127.0.0.1:http",
    "http://:8787",
    # Hosts the HTTP client cannot look up or send: a part between dots that is empty or over
    # 63 characters, a space or control character (escaped too), a character the Host header
    # cannot carry; and a path it cannot put in the request line.
    f"http://{'a' * 64}.test:9",
    "http://.:9",
    "http://a..b:9",
    "http://a b:9",
    "http://a\tb:9",
    "http://a%20b:9",
    "http://a%0aX-Evil:9",
    "http://\u2603.net:9",
    "https://\u2603.net",
    "http://127.0.0.1:9/a b",
    "http://127.0.0.1:9/\u2603",
]


# An operator command, and the two worker commands that find their address another way.
ADDRESSED = [
    ["leases", "get", "L1", "--token", "t"],
    ["worker", "claim", "--pool", "p", "--token", "t"],
    ["worker", "run", "--pool", "p", "--token", "t", "--once", "--", "true"],
]


@pytest.mark.parametrize("address", BAD_ADDRESSES)
@pytest.mark.parametrize("argv", ADDRESSED)
def test_an_address_that_cannot_be_used_is_a_usage_error_naming_it(
    address: str,
    argv: list[str],
    sent: Callable[..., list[Request]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    assert main([*argv[:2], "--api", address, *argv[2:]]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: --api: ") and repr(address) in line, line
    assert requests == []


def test_an_address_from_a_variable_is_refused_the_same_way_naming_the_variable(
    sent: Callable[..., list[Request]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sent()
    monkeypatch.setenv("TENURE_API", "http://127.0.0.1:99999")
    assert main(["tasks", "get", "T1", "--token", "t"]) == USAGE
    assert _one_line(capsys).startswith("error: TENURE_API: ")
    for name, value in (("TENURE_LEASE_ID", "L1"), ("TENURE_LEASE_TOKEN", "lt")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TENURE_WORKER_API", "http://[::1")
    assert main(["worker", "heartbeat"]) == USAGE
    assert _one_line(capsys).startswith("error: TENURE_WORKER_API: ")
    monkeypatch.setenv("TENURE_API", "http://\u2603.net:9")
    assert main(["spaces", "list", "--token", "t"]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: TENURE_API: 'http://\u2603.net:9' ") and "xn--n3h.net" in line


@pytest.mark.parametrize(
    "address", ["http://127.0.0.1:1", "http://127.0.0.1:65535", "https://[::1]:8787", API]
)
def test_an_address_with_a_port_from_1_to_65535_is_used(address: str) -> None:
    from tenure_cli import common

    assert common.service_address(address, "--api") == address


@pytest.mark.parametrize(
    "address",
    [
        "http://\u00fcn\u00efcode.test:9",
        f"http://{'a' * 63}.test:9",
        "http://tenure.example.com./",
        "http://127.0.0.1:9/tenure%20api",
    ],
)
def test_a_host_the_client_can_look_up_and_send_is_used(address: str) -> None:
    from tenure_cli import common

    assert common.service_address(address, "--api") == address


@pytest.mark.parametrize(
    "address",
    [
        "http://alice:s3cret@127.0.0.1:9",
        "https://alice@127.0.0.1:9/",
        "http://alice:s3cret@[::1",
        "alice:s3cret@127.0.0.1:9",
    ],
)
@pytest.mark.parametrize("argv", ADDRESSED)
def test_an_address_carrying_credentials_is_refused_without_showing_them(
    address: str,
    argv: list[str],
    sent: Callable[..., list[Request]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    assert main([*argv[:2], "--api", address, *argv[2:]]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: --api: ") and "--token" in line, line
    assert "s3cret" not in line and "alice" not in line, line
    assert requests == []


def test_an_address_from_a_variable_carrying_credentials_is_refused_naming_the_variable(
    sent: Callable[..., list[Request]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    monkeypatch.setenv("TENURE_API", "http://alice:s3cret@127.0.0.1:9")
    assert main(["spaces", "list", "--token", "t"]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: TENURE_API: ") and "s3cret" not in line, line
    assert requests == []


# ------------------------------------------------------------------- the bearer token

# Values that were never a token: a line break would end the Authorization header and start one
# of the value's own (folded, with a space after it, http.client would even send it), and a
# character beyond Latin-1 has no bytes in a header at all.
NOT_TOKENS = [
    "tnr_o_x\nX-Evil: 1",
    "tnr_o_x\r\nX-Evil: 1",
    "tnr_o_x\n X-Evil: 1",
    "tnr_o_x X-Evil",
    "tnr_o_\u2603",
]


@pytest.mark.parametrize("token", NOT_TOKENS)
@pytest.mark.parametrize("argv", ADDRESSED)
def test_a_token_no_header_can_carry_is_refused_unsent_and_unshown(
    token: str,
    argv: list[str],
    sent: Callable[..., list[Request]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    given = [token if arg == "t" else arg for arg in argv]
    assert main([*given[:2], "--api", API, *given[2:]]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: --token: ") and "never has" in line, line
    assert "X-Evil" not in line and "\u2603" not in line and "tnr_o_" not in line, line
    assert requests == []


def test_a_token_from_a_variable_is_refused_the_same_way_naming_the_variable(
    sent: Callable[..., list[Request]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests = sent()
    monkeypatch.setenv("TENURE_TOKEN", "tnr_o_\u2603")
    assert main(["spaces", "list", "--api", API]) == USAGE
    line = _one_line(capsys)
    assert line.startswith("error: TENURE_TOKEN: ") and "\u2603" not in line, line
    monkeypatch.setenv("TENURE_API", API)
    monkeypatch.setenv("TENURE_LEASE_ID", "L1")
    monkeypatch.setenv("TENURE_LEASE_TOKEN", "tnr_l_L1.s\nX-Evil: 1")
    for argv in (["worker", "heartbeat"], ["worker", "complete"], ["worker", "payload"]):
        assert main(argv) == USAGE
        line = _one_line(capsys)
        assert line.startswith("error: TENURE_LEASE_TOKEN: ") and "X-Evil" not in line, line
    assert requests == []


def test_worker_run_given_its_token_on_the_command_line_warns_that_ps_shows_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenure_cli.commands import worker as commands

    ran: list[str] = []

    class Ran:
        def __init__(self, opts: Any) -> None:
            ran.append(opts.token)

        def run(self) -> int:
            return 0

    monkeypatch.setattr(commands, "Worker", Ran)
    argv = ["worker", "run", "--api", API, "--pool", "p", "--", "true"]
    assert main([*argv[:4], "--token", "tnr_w_secret", *argv[4:]]) == 0
    said = capsys.readouterr().err
    assert "TENURE_TOKEN" in said and "process list" in said and "tnr_w_secret" not in said
    monkeypatch.setenv("TENURE_TOKEN", "tnr_w_secret")
    assert main(argv) == 0
    assert capsys.readouterr().err == "" and ran == ["tnr_w_secret", "tnr_w_secret"]
