"""Where `tenure worker run` and a job's own commands find the worker endpoint: the option, the
variables, then the local stack's stack.json, while the stack that wrote it runs."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest
from tenure_cli.commands.worker import worker_endpoints
from tenure_cli.common import UsageError, lease_client
from tenure_cli.local.email_send import send
from tenure_cli.stack_record import LOCK_FILE, StackNotRunning, forget_own_record

STACK = {"api": "http://127.0.0.1:8787/api/v1", "worker_api": "http://127.0.0.1:40111/api/v1"}


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TENURE_API", "TENURE_WORKER_API"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "stack.json").write_text(json.dumps(STACK))
    return tmp_path


def test_with_nothing_given_the_worker_claims_on_the_stack_s_worker_endpoint(
    data_dir: Path,
) -> None:
    # Its jobs are given the stack's API for the routes the worker endpoint does not serve.
    assert worker_endpoints(None, data_dir) == (STACK["worker_api"], STACK["api"])


def test_the_option_then_the_variables_come_before_stack_json(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENURE_API", "https://api.example")
    assert worker_endpoints(None, data_dir) == ("https://api.example", "https://api.example")
    monkeypatch.setenv("TENURE_WORKER_API", "https://url.example/api/v1")
    assert worker_endpoints(None, data_dir) == ("https://url.example/api/v1", "https://api.example")
    assert worker_endpoints("https://given", data_dir) == ("https://given", "https://api.example")


def test_a_stack_json_without_a_worker_endpoint_gives_its_api(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(json.dumps({"api": STACK["api"]}))
    assert worker_endpoints(None, tmp_path) == (STACK["api"], None)


def test_no_address_anywhere_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TENURE_API", "TENURE_WORKER_API"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "stack.json").write_text("not json")
    with pytest.raises(UsageError, match="--api"):
        worker_endpoints(None, tmp_path)


def _reaped() -> int:
    """The id of a process that has run and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_record_left_by_a_stack_that_died_is_refused_not_followed(data_dir: Path) -> None:
    # A stack killed with SIGKILL cannot remove its record: its ports are gone, and a worker
    # that followed them would retry its claim against nothing for as long as it runs.
    pid = _reaped()
    (data_dir / "stack.json").write_text(json.dumps({**STACK, "pid": pid}))
    with pytest.raises(UsageError, match="TENURE_API") as refused:
        worker_endpoints(None, data_dir)
    assert f"({pid}) has ended" in str(refused.value)
    assert str(data_dir / "stack.json") in str(refused.value)
    # Given an address, the record is not read at all.
    assert worker_endpoints("https://given", data_dir)[0] == "https://given"


def test_a_record_of_a_running_stack_is_followed(data_dir: Path) -> None:
    (data_dir / "stack.json").write_text(json.dumps({**STACK, "pid": os.getpid()}))
    assert worker_endpoints(None, data_dir) == (STACK["worker_api"], STACK["api"])


def test_the_lock_beside_the_record_says_whether_its_stack_runs_not_the_process_id(
    data_dir: Path,
) -> None:
    # A stack that wrote a lock file holds it while it runs. Its process id can mislead: a
    # killed stack not yet reaped (a zombie) still has one, another process may reuse it, and
    # from another pid namespace (a container sharing the data dir) a running stack has none.
    lock = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        (data_dir / "stack.json").write_text(json.dumps({**STACK, "pid": os.getpid()}))
        with pytest.raises(UsageError, match="has ended"):
            worker_endpoints(None, data_dir)  # a live process id, but nothing holds the lock

        fcntl.flock(lock, fcntl.LOCK_EX)  # as the running stack does
        (data_dir / "stack.json").write_text(json.dumps({**STACK, "pid": _reaped()}))
        assert worker_endpoints(None, data_dir) == (STACK["worker_api"], STACK["api"])
        # The look took no hold of its own: the stack's lock is still the only one.
        other = os.open(data_dir / LOCK_FILE, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        finally:
            os.close(other)
    finally:
        os.close(lock)


def test_an_email_sent_to_a_stack_that_died_is_refused(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(json.dumps({**STACK, "pid": _reaped()}))
    with pytest.raises(StackNotRunning, match="has ended"):
        send(tmp_path, tmp_path / "unread.eml", None)
    with pytest.raises(FileNotFoundError, match="is `tenure local` running"):
        send(tmp_path / "empty", tmp_path / "unread.eml", None)


def test_an_email_sent_by_an_unreadable_record_says_what_is_wrong_with_it(
    tmp_path: Path,
) -> None:
    record = tmp_path / "stack.json"
    record.write_text('{"api": "http://127.0.0.1:8787/api/v1", "aws": {"endp')  # cut short
    with pytest.raises(StackNotRunning, match="is not a stack's record"):
        send(tmp_path, tmp_path / "unread.eml", None)
    record.write_text(json.dumps({**STACK, "pid": os.getpid()}))  # a hand-written one
    with pytest.raises(ValueError, match=r"names no inbound mail: aws\.endpoint is missing"):
        send(tmp_path, tmp_path / "unread.eml", None)
    aws = {"endpoint": "http://127.0.0.1:1", "region": "us-east-1", "resources": {}}
    record.write_text(json.dumps({**STACK, "pid": os.getpid(), "aws": aws}))
    with pytest.raises(ValueError, match=r"aws\.resources\.inbound_bucket is missing"):
        send(tmp_path, tmp_path / "unread.eml", None)


def test_a_stopping_stack_removes_its_own_record_and_no_other(tmp_path: Path) -> None:
    record = tmp_path / "stack.json"
    record.write_text(json.dumps({**STACK, "pid": os.getpid()}))
    forget_own_record(tmp_path)
    assert not record.exists()
    # Another start's record, written since, stays.
    record.write_text(json.dumps({**STACK, "pid": os.getpid() + 1}))
    forget_own_record(tmp_path)
    assert record.exists()
    forget_own_record(tmp_path / "none")  # nothing there: nothing to do


def test_a_job_reports_on_the_worker_endpoint_and_files_work_on_the_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TENURE_API", "http://api.example")
    monkeypatch.setenv("TENURE_WORKER_API", "http://url.example")
    monkeypatch.setenv("TENURE_LEASE_ID", "lease_1")
    monkeypatch.setenv("TENURE_LEASE_TOKEN", "tnr_l_lease_1.s")
    assert lease_client()[0].base == "http://url.example/api/v1"
    assert lease_client(worker_routes=False)[0].base == "http://api.example/api/v1"
    monkeypatch.delenv("TENURE_WORKER_API")
    assert lease_client()[0].base == "http://api.example/api/v1"
