"""`tenure local` as a newcomer runs it: a relative --data-dir, a restart, and --reset; a
second start on a data dir a stack is running from, refused before it touches anything; and a
stack whose output pipe's reader went away, still stopping cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from tenure_cli.local.engines import free_port
from tenure_cli.stack_record import lock_held

from tests.conftest import start_stack, stop_stack
from tests.e2e.test_start_failures import assert_failed_cleanly, start_failing


def test_a_relative_data_dir_keeps_data_on_dynamodb_local_until_reset(tmp_path: Path) -> None:
    port, token = free_port(), "tnr_o_rel-" + uuid.uuid4().hex
    rel = Path("rel-data")

    def space_create(stack_base: str) -> int:
        # A stack's first write starts a function process (and the table warms up): beside
        # the other tiers that took more than httpx's 5 s, so the front door's own 30 s bound.
        answer = httpx.post(
            f"{stack_base}/spaces",
            json={"key": "REL", "name": "r"},
            headers={"authorization": f"Bearer {token}"},
            timeout=30,
        )
        return answer.status_code

    stack = start_stack(rel, token, 5, port=port, cwd=tmp_path)
    try:
        assert "dynamodb-local at" in stack.log.read_text(), stack.log.read_text()
        assert space_create(stack.base) == 201
        record = (tmp_path / rel / "stack.json").read_text()
        # A second stack there, on a port of its own, and one asked to --reset it: each would
        # run a second DynamoDB Local on the first's table file, or delete it under it.
        for extra in ((), ("--reset",)):
            outcome = start_failing(
                tmp_path, "--port", str(free_port()), "--data-dir", str(rel), *extra
            )
            line = assert_failed_cleanly(outcome, "is in use by another tenure local")
            assert f"(pid {stack.proc.pid})" in line
        assert (tmp_path / rel / "stack.json").read_text() == record
        assert json.loads(record)["pid"] == stack.proc.pid
        assert space_create(stack.base) == 409, "the first stack's data is still there"
    finally:
        assert stop_stack(stack) == 0
    assert (tmp_path / "rel-data" / "dynamodb").is_dir()

    stack = start_stack(rel, token, 5, port=port, cwd=tmp_path)
    try:
        assert space_create(stack.base) == 409, "the space survived the restart"
    finally:
        assert stop_stack(stack) == 0

    stack = start_stack(rel, token, 5, port=port, cwd=tmp_path, extra=("--reset",))
    try:
        assert "reset: removed rel-data" in stack.log.read_text()
        assert space_create(stack.base) == 201, "--reset wiped the data"
    finally:
        assert stop_stack(stack) == 0


def test_a_stack_whose_output_reader_went_away_still_stops_cleanly(tmp_path: Path) -> None:
    # `tenure local | tee log` with the tee gone first, or `| head -2`: the next line the
    # stack prints fails, and it must still remove its record, end its engines and give up its
    # data dir on the way out.
    environ = {**os.environ, "TENURE_ADMIN_TOKEN": "tnr_o_pipe-" + uuid.uuid4().hex}
    args = ["local", "--port", str(free_port()), "--data-dir", "data"]
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tenure_cli", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            env={**environ, "PYTHONUNBUFFERED": "1"},
            cwd=tmp_path,
        )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith(b"starting"), first
    proc.stdout.close()  # the reader goes away while it starts
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    data = tmp_path / "data"
    assert not (data / "stack.json").exists(), (tmp_path / "stderr").read_text()
    assert lock_held(data) is False
    give_up = time.monotonic() + 15
    while (left := _running_on(data.resolve())) and time.monotonic() < give_up:
        time.sleep(0.2)
    assert left == [], left


def _running_on(data_dir: Path) -> list[str]:
    """Command lines of the processes that name this data dir (an engine's -dbPath)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(data_dir) in cmd:
                found.append(cmd)
    return found
