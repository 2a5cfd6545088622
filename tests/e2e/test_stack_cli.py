"""`tenure local` as a newcomer runs it: a relative --data-dir, a restart, and --reset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from tenure.local.engines import free_port


def _start(cwd: Path, port: int, token: str, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = cwd / f"stack-{uuid.uuid4().hex[:6]}.log"
    env = {**os.environ, "TENURE_ADMIN_TOKEN": token}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tenure.cli", "local", "--port", str(port),
             "--data-dir", "rel-data", "--sweep-interval", "5", *extra],
            cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2).status_code == 200:
                return proc, log
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError(log.read_text())


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60)


def test_a_relative_data_dir_keeps_data_on_dynamodb_local_until_reset(tmp_path: Path) -> None:
    port, token = free_port(), "tnr_o_rel-" + uuid.uuid4().hex
    api = f"http://127.0.0.1:{port}/api/v1"
    headers = {"authorization": f"Bearer {token}"}

    proc, log = _start(tmp_path, port, token)
    try:
        assert "dynamodb-local at" in log.read_text(), log.read_text()
        made = httpx.post(f"{api}/spaces", json={"key": "REL", "name": "r"}, headers=headers)
        assert made.status_code == 201
    finally:
        assert _stop(proc) == 0
    assert (tmp_path / "rel-data" / "dynamodb").is_dir()

    proc, _ = _start(tmp_path, port, token)
    try:
        again = httpx.post(f"{api}/spaces", json={"key": "REL", "name": "r"}, headers=headers)
        assert again.status_code == 409, "the space survived the restart"
    finally:
        assert _stop(proc) == 0

    proc, log = _start(tmp_path, port, token, "--reset")
    try:
        assert "reset: removed rel-data" in log.read_text()
        fresh = httpx.post(f"{api}/spaces", json={"key": "REL", "name": "r"}, headers=headers)
        assert fresh.status_code == 201, "--reset wiped the data"
    finally:
        assert _stop(proc) == 0
