"""Without Java, `tenure local` falls back to moto for DynamoDB, says so, and still serves."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from tests.conftest import start_stack, stop_stack


def test_without_java_the_stack_falls_back_to_moto_and_says_so(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with the tools the stack may call, but no java
    bin_dir.mkdir()
    for tool in ("npm", "node"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("TENURE_REQUIRE_ENGINES", None)  # the fallback is what is under test here
    stack = start_stack(tmp_path / "data", "tnr_o_fallback-" + uuid.uuid4().hex, env=env)
    try:
        text = stack.log.read_text()
        assert "java is not installed" in text
        assert "falling back to moto" in text
        with stack.admin() as admin:
            assert admin.post("/spaces", json={"key": "FB", "name": "Fallback"}).status_code == 201
            made_pool = admin.post("/pools", json={"name": "fb", "space": "FB", "kind": "command"})
            assert made_pool.status_code == 201
            made = admin.post("/tasks", json={"space": "FB", "title": "t", "pool": "fb"})
            assert made.status_code == 201 and made.json()["lease"]["state"] == "pending"
            task_id = made.json()["task"]["id"]
            events: list[str] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "lease.created" not in events:
                answer = admin.get(f"/tasks/{task_id}/activity").json()
                events = [e["type"] for e in answer["events"]]
                time.sleep(0.2)
            assert events == ["lease.created"]
    finally:
        assert stop_stack(stack) == 0
