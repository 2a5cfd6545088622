"""`make load` as a user runs it: `tenure bench load --start` brings up a scratch `tenure local`,
runs its mix against it once the stack is wholly up, and stops it and removes its directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.support import proc_table

# The start (about 10 s), a few seconds of load with no warm-up, and the stop.
RUN_TIMEOUT = 240


def test_bench_load_start_runs_its_mix_on_a_stack_of_its_own_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    # The scratch directory goes where tempfile puts it: here, so what is left can be seen.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("TENURE_ADMIN_TOKEN", None)
    args = ["bench", "load", "--start", "--workers", "2", "--duration", "3", "--warmup", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "tenure_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert figures["engine"] == "dynamodb-local", figures
    assert figures["errors"] == 0 and figures["stuck_threads"] == 0, figures
    assert figures["requests"] > 0 and figures["leases_reported"] > 0, figures
    assert list(tmp_path.iterdir()) == [], "the scratch stack's directory is removed"
    left = [cmd for _, _, cmd in proc_table().values() if str(tmp_path) in cmd]
    assert left == [], "the scratch stack's processes have ended"
