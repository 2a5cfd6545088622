"""What `tenure local` prints, as a newcomer meets it: a banner of at most 15 lines naming the
API, the board and the admin token's file; no line per request unless --verbose; and README's
"A first lease, end to end" run as written, its short-toleration demo included."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tenure_cli.local.engines import free_port

from tests.conftest import LocalStack, start_stack, stop_stack

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_BANNER_LINES = 15


def banner(log: str) -> list[str]:
    """The lines from `tenure local is up` to `Ctrl-C stops everything.`, both included."""
    lines = log.splitlines()
    first = lines.index("tenure local is up")
    last = lines.index("Ctrl-C stops everything.", first)
    return lines[first : last + 1]


def after_banner(stack: LocalStack) -> str:
    text = stack.log.read_text(errors="replace")
    return text.split("Ctrl-C stops everything.\n", 1)[1]


def minted_stack(tmp_path: Path, *extra: str) -> LocalStack:
    """A stack as `make local` starts it: no TENURE_ADMIN_TOKEN, so it mints one into
    `.tenure/admin-token` under the directory it runs in."""
    stack = start_stack(Path(".tenure"), "", 60, port=free_port(), cwd=tmp_path, extra=extra)
    stack.admin_token = (tmp_path / ".tenure" / "admin-token").read_text().strip()
    return stack


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    stack = minted_stack(tmp_path_factory.mktemp("quiet"), "--sweep-interval", "5")
    yield stack
    assert stop_stack(stack) == 0


def test_the_banner_is_short_and_names_the_api_the_board_and_the_token_file(
    quiet: LocalStack,
) -> None:
    shown = banner(quiet.log.read_text(errors="replace"))
    assert len(shown) <= MAX_BANNER_LINES, "\n".join(shown)
    text = "\n".join(shown)
    origin = quiet.base.removesuffix("/api/v1")
    assert f"API            {quiet.base}" in text
    assert f"board          {origin}/board" in text
    assert "admin token    in .tenure/admin-token" in text
    assert quiet.admin_token not in quiet.log.read_text(), "the token itself was printed"
    assert "from infra/template.yaml:" not in quiet.log.read_text(), "resources listed unasked"
    # What the banner points at is there: the board's page, and a token that signs in.
    board = httpx.get(f"{origin}/board", timeout=10)
    assert board.status_code == 200 and "<html" in board.text
    with quiet.admin() as admin:
        assert admin.get("/tokens").status_code == 200


def test_requests_print_nothing_without_verbose(quiet: LocalStack) -> None:
    before = after_banner(quiet)
    with quiet.admin() as admin:
        assert admin.get("/health").status_code == 200
        assert admin.post("/spaces", json={"key": "QUIET", "name": "q"}).status_code == 201
        made = admin.post("/pools", json={"name": "q", "space": "QUIET", "kind": "command"})
        assert made.status_code == 201
        worker = admin.post("/tokens", json={"name": "q-w", "kind": "worker", "pools": ["q"]})
        assert worker.status_code == 201
        assert admin.post("/tasks", json={"space": "QUIET", "title": "t", "pool": "q"}).is_success
        assert admin.post("/spaces", json={"bad": 1}).status_code == 422  # a refusal too
    with quiet.client(worker.json()["token"]) as w:
        claim = w.post("/pools/q/claim", json={"worker_id": "q-1", "wait_seconds": 2})
        assert claim.status_code == 200  # the handler logs "lease claimed" (at DEBUG)
    time.sleep(1)  # the worker processes' output reaches the log
    printed = after_banner(quiet)[len(before) :]
    assert "[front door]" not in printed, printed
    assert "/api/v1/" not in printed, printed
    assert "lease claimed" not in printed, printed


def test_verbose_lists_the_resources_and_logs_each_request(tmp_path: Path) -> None:
    stack = minted_stack(tmp_path, "--verbose")
    try:
        log = stack.log.read_text(errors="replace")
        assert len(banner(log)) <= MAX_BANNER_LINES, log
        head = log.split("tenure local is up", 1)[0]
        assert "from infra/template.yaml:" in head and "AWS::DynamoDB::Table" in head
        with stack.admin() as admin:
            assert admin.get("/health").status_code == 200
        wanted = re.compile(r"\[front door\] GET /api/v1/health -> 200 in \d+ ms")
        give_up = time.monotonic() + 10
        while not wanted.search(after_banner(stack)) and time.monotonic() < give_up:
            time.sleep(0.2)
        assert wanted.search(after_banner(stack)), after_banner(stack)
    finally:
        assert stop_stack(stack) == 0


def first_lease_blocks() -> list[str]:
    """The shell blocks of README's "A first lease, end to end", in order."""
    text = README.read_text()
    section = text.split("## A first lease, end to end", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def test_the_readme_first_lease_runs_as_written_and_hands_a_dead_workers_job_on(
    quiet: LocalStack,
) -> None:
    blocks = first_lease_blocks()
    assert len(blocks) == 3, "the walk, the fence demo and the short-toleration demo"
    port = quiet.base.split(":")[2].split("/")[0]
    script = "\n".join(blocks).replace("127.0.0.1:8787", f"127.0.0.1:{port}")
    assert script.count(f"127.0.0.1:{port}") == 1  # only A is set from the port
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=quiet.data_dir.parent,  # where `.tenure/admin-token` is, as after `make local`
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    took = time.monotonic() - started
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert '"state": "completed"' in out
    assert "lease.stale_report" in out  # the fence demo's timeline
    assert '"state": "pending"' in out and "{'" not in out, "field prints JSON, not a repr"
    # The short-toleration demo: fence 1 claimed, then the same job on fence 2, and the dead
    # holder's report refused. Expiry is due 15 s after the claim; the sweeper runs every 5 s.
    # (curl prints no newline of its own, so a fence may follow the JSON printed before it)
    assert re.findall(r"(?:^|\})([12])$", out, flags=re.M) == ["1", "2"], out
    assert '"code": "stale_lease"' in out.rstrip().splitlines()[-1], out
    assert took < 90, f"the README's walk took {took:.0f} s"


@pytest.mark.parametrize(("value", "verbose"), [("1", True), ("0", False), ("", False)])
def test_tenure_verbose_in_the_environment_is_the_flags_default(
    monkeypatch: pytest.MonkeyPatch, value: str, verbose: bool
) -> None:
    from tenure_cli.main import parser

    monkeypatch.setenv("TENURE_VERBOSE", value)
    assert parser().parse_args(["local"]).verbose is verbose
    assert parser().parse_args(["local", "--verbose"]).verbose is True
