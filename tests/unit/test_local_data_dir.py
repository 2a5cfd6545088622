"""One `tenure local` per data dir: a second start there is refused, naming the process that
holds it, before it touches anything; the hold ends with its process, however it ends; and
--reset empties the data dir without letting a newcomer in beside the stack that holds it."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tenure_cli.local.stack import LOCK_FILE, Stack, StartFailed, _reset


def _stack(data_dir: Path) -> Stack:
    return Stack(port=0, data_dir=data_dir, sweep_interval=60.0)


def test_a_second_stack_on_a_held_data_dir_is_refused_and_touches_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = _stack(data)
    first.hold_data_dir()
    record = {"api": "http://127.0.0.1:8787/api/v1", "pid": os.getpid()}
    (data / "stack.json").write_text(json.dumps(record))
    (data / "admin-token").write_text("tnr_o_first\n")

    second = _stack(data)
    with pytest.raises(
        StartFailed, match=f"in use by another tenure local \\(pid {os.getpid()}\\)"
    ):
        second.hold_data_dir()
    assert second.held is None
    assert json.loads((data / "stack.json").read_text()) == record
    assert (data / "admin-token").read_text() == "tnr_o_first\n"

    first.stop()  # every part down, then the data dir is free
    second.hold_data_dir()
    assert second.held is not None
    second.stop()


def test_the_hold_of_a_killed_stack_ends_with_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(data / LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StartFailed, match="in use by another tenure local"):
            _stack(data).hold_data_dir()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    after = _stack(data)
    after.hold_data_dir()  # nothing left to clear by hand
    assert (data / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    after.stop()


def test_reset_empties_the_data_dir_but_keeps_it_held(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stack = _stack(data)
    stack.hold_data_dir()
    (data / "dynamodb").mkdir()
    (data / "dynamodb" / "shared-local-instance.db").write_bytes(b"rows")
    (data / "admin-token").write_text("tnr_o_old\n")
    _reset(data)
    assert sorted(p.name for p in data.iterdir()) == [LOCK_FILE]
    with pytest.raises(StartFailed, match="in use"):
        _stack(data).hold_data_dir()
    stack.stop()


def test_a_data_dir_that_is_a_file_is_not_held_but_left_to_the_start_s_refusal(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.write_text("not a directory")
    stack = _stack(data)
    stack.hold_data_dir()
    assert stack.held is None
    with pytest.raises(StartFailed, match="is a file"):
        _reset(data)
    assert data.read_text() == "not a directory"


def test_a_file_system_without_locks_starts_unheld_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    stack = _stack(tmp_path / "data")
    stack.hold_data_dir()
    assert stack.held is None
    warned = capsys.readouterr().err
    assert warned.startswith("warning: cannot lock the data dir") and "not be refused" in warned


def test_reset_refuses_a_data_dir_inside_a_running_stack_s(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    running = _stack(outer)
    running.hold_data_dir()
    inner = outer / "dynamodb" / "nested"
    nested = _stack(inner)
    nested.hold_data_dir()  # a lock of its own, beside the running stack's table file
    (inner / "admin-token").write_text("tnr_o_nested\n")
    try:
        with pytest.raises(StartFailed, match=f"inside the data dir {outer} of a running"):
            _reset(inner)
        assert (inner / "admin-token").read_text() == "tnr_o_nested\n"
    finally:
        nested.stop()
        running.stop()


def test_reset_refuses_a_data_dir_that_holds_a_running_stack_s(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "dynamodb" / "one"
    running = _stack(inner)
    running.hold_data_dir()
    (inner / "admin-token").write_text("tnr_o_running\n")
    (outer / "stack.json").write_text("{}")
    wider = _stack(outer)
    wider.hold_data_dir()
    try:
        with pytest.raises(StartFailed, match=f"holds the data dir {inner} of a running"):
            _reset(outer)
        assert (inner / "admin-token").read_text() == "tnr_o_running\n"
        assert (outer / "stack.json").read_text() == "{}"
    finally:
        wider.stop()
        running.stop()


def test_reset_empties_a_data_dir_whose_nested_stacks_have_stopped(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "dynamodb" / "old"
    stopped = _stack(inner)
    stopped.hold_data_dir()
    stopped.stop()  # its lock file stays, unheld
    stack = _stack(outer)
    stack.hold_data_dir()
    _reset(outer)
    assert sorted(p.name for p in outer.iterdir()) == [LOCK_FILE]
    stack.stop()


def test_reset_refuses_a_directory_holding_what_no_stack_writes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    (home / "admin-token").write_text("tnr_o_old\n")
    stack = _stack(home)
    stack.hold_data_dir()
    try:
        with pytest.raises(
            StartFailed, match=r"holds what tenure local does not write \(\.git, notes\.txt\)"
        ):
            _reset(home)
        assert sorted(p.name for p in home.iterdir()) == sorted(
            [".git", "notes.txt", "admin-token", LOCK_FILE]
        )
    finally:
        stack.stop()


def test_reset_empties_everything_a_stack_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    stack = _stack(data)
    stack.hold_data_dir()
    (data / "dynamodb").mkdir()
    for name in ("stack.json", "admin-token", "dynamodb-local-41234.log", ".stack.json.part"):
        (data / name).write_text("x")
    _reset(data)
    assert sorted(p.name for p in data.iterdir()) == [LOCK_FILE]
    stack.stop()


def test_a_shared_directory_given_as_data_dir_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # a /tmp: narrowing it would lock every other user out
    (shared / "someone-else.sock").write_text("")
    stack = _stack(shared)
    stack.hold_data_dir()
    try:
        assert oct(shared.stat().st_mode & 0o7777) == "0o1777"
        assert oct((shared / LOCK_FILE).stat().st_mode & 0o777) == "0o600"
    finally:
        stack.stop()


def test_a_data_dir_of_a_stack_s_own_is_closed_to_others(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)  # a copy, or the umask
    (data / "admin-token").write_text("tnr_o_old\n")
    stack = _stack(data)
    stack.hold_data_dir()
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    stack.stop()


def test_an_admin_token_that_is_a_link_is_neither_followed_nor_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TENURE_ADMIN_TOKEN", raising=False)
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside"
    outside.write_text("tnr_o_planted\n")
    outside.chmod(0o644)
    (data / "admin-token").symlink_to(outside)
    with pytest.raises(StartFailed, match="admin-token is a symbolic link"):
        _stack(data)._admin_token()
    assert oct(outside.stat().st_mode & 0o777) == "0o644"  # not chmod-ed through the link


def test_an_admin_token_kept_from_an_earlier_run_is_closed_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TENURE_ADMIN_TOKEN", raising=False)
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin-token").write_text("tnr_o_kept\n")
    (data / "admin-token").chmod(0o644)  # as an earlier release left it
    token, path = _stack(data)._admin_token()
    assert (token, path) == ("tnr_o_kept", data / "admin-token")
    assert oct((data / "admin-token").stat().st_mode & 0o777) == "0o600"
