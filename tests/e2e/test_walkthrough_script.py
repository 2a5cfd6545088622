"""samplesources/walkthrough.sh works as written against `tenure local`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import LocalStack

SCRIPT = Path(__file__).resolve().parents[2] / "samplesources" / "walkthrough.sh"


def test_the_curl_walkthrough_runs_clean_against_the_local_stack(local_stack: LocalStack) -> None:
    env = {
        **os.environ,
        "TENURE_API": local_stack.base.removesuffix("/api/v1"),
        "TENURE_TOKEN": local_stack.admin_token,
    }
    done = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout
    assert "lease.completed" in done.stdout
    assert done.stdout.rstrip().endswith("walkthrough done")
