"""Without Java, `tenure local` falls back to moto for DynamoDB, says so, and still serves."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from tenure.local.engines import free_port


def test_without_java_the_stack_falls_back_to_moto_and_says_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with the tools the stack may call, but no java
    bin_dir.mkdir()
    for tool in ("npm", "node"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    port, token = free_port(), "tnr_o_fallback-" + uuid.uuid4().hex
    log = tmp_path / "stack.log"
    env = {**os.environ, "PATH": str(bin_dir), "TENURE_ADMIN_TOKEN": token}
    env.pop("TENURE_REQUIRE_ENGINES", None)  # the fallback is what is under test here
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tenure.cli",
                "local",
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path / "data"),
                "--sweep-interval",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    base = f"http://127.0.0.1:{port}/api/v1"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            raise AssertionError(log.read_text())
        text = log.read_text()
        assert "java is not installed" in text
        assert "falling back to moto" in text
        admin = httpx.Client(base_url=base, headers={"authorization": f"Bearer {token}"})
        assert admin.post("/spaces", json={"key": "FB", "name": "Fallback"}).status_code == 201
        assert (
            admin.post("/pools", json={"name": "fb", "space": "FB", "kind": "command"}).status_code
            == 201
        )
        made = admin.post("/tasks", json={"space": "FB", "title": "t", "pool": "fb"})
        assert made.status_code == 201 and made.json()["lease"]["state"] == "pending"
        task_id = made.json()["task"]["id"]
        events: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "lease.created" not in events:
            events = [e["type"] for e in admin.get(f"/tasks/{task_id}/activity").json()["events"]]
            time.sleep(0.2)
        assert events == ["lease.created"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
