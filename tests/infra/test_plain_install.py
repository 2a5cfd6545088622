"""`pip install .` without extras, into a fresh virtual environment, gives a `tenure` that works:
its help and version, every command's help, operator and worker commands that fail in one
line against a service that is not there, `tenure local` naming the extra it needs, a worker
SDK that loads none of the service's dependencies, and the template the local stack needs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tenure_cli.common import OUTCOME_UNKNOWN, UNREACHABLE
from tenure_cli.main import parser

ROOT = Path(__file__).resolve().parents[2]
# What the build reads; copied out so that the build leaves nothing (build/, egg-info) in the
# working tree, whose own state is what is installed.
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "layers/core",
    "packages",
    "infra/template.yaml",
)
INSTALL_TIMEOUT = 240
RUN_TIMEOUT = 60
# The service's dependencies: a worker host has none of them.
NOT_IN_THE_SDK = ("boto3", "botocore", "pydantic", "aws_lambda_powertools", "mcp", "yaml")

pytestmark = [pytest.mark.install, pytest.mark.timeout(INSTALL_TIMEOUT + 60)]


def _copy_sources(to: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.pyc")
    for name in SOURCES:
        source, target = ROOT / name, to / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=skip)
        else:
            shutil.copy2(source, target)


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a fresh virtual environment with the project installed, no extras."""
    root = tmp_path_factory.mktemp("plain-install")
    _copy_sources(root / "src")
    subprocess.run(
        [sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=RUN_TIMEOUT
    )
    bin_dir = root / "venv" / "bin"
    done = subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--no-input", str(root / "src")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return bin_dir


def _run(bin_dir: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    # No variable of this shell's session (TENURE_API, a PYTHONPATH onto the checkout) leaks in.
    clean = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env={**clean, **env},
        cwd=bin_dir.parent,  # not the checkout: nothing may be imported from it
        check=False,
    )


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_help_and_version_work(venv: Path) -> None:
    helped = _run(venv, "tenure", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "exit codes:" in helped.stdout and "leases" in helped.stdout
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    versioned = _run(venv, "tenure", "--version")
    assert (versioned.returncode, versioned.stdout.strip()) == (0, f"tenure {project['version']}")


def _paths(p: argparse.ArgumentParser, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield at
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _paths(child, (*at, name))


# The same walk, run by the installed interpreter: `--help` of every command, one process.
WALK = """
import argparse, contextlib, io, json, sys
from tenure_cli.main import parser

def paths(p, at=()):
    yield at
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from paths(child, (*at, name))

failed, seen = [], 0
for path in paths(parser()):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            parser().parse_args([*path, "--help"])
            code = None
        except SystemExit as ended:
            code = ended.code
    seen += 1
    if code != 0 or "usage: tenure" not in out.getvalue():
        failed.append([" ".join(path), code, out.getvalue()[-300:]])
print(json.dumps({"seen": seen, "failed": failed}))
"""


def test_the_help_of_every_command_works(venv: Path) -> None:
    done = _run(venv, "python", "-c", WALK)
    assert done.returncode == 0, done.stderr
    walked = json.loads(done.stdout)
    assert not walked["failed"], walked["failed"]
    # Every command the checkout's own parser has, the installed one has.
    assert walked["seen"] == len(list(_paths(parser()))), walked


def test_an_operator_command_with_no_service_fails_in_one_line(venv: Path) -> None:
    api = f"http://127.0.0.1:{_closed_port()}"
    done = _run(venv, "tenure", "leases", "list", "--space", "OPS", "--api", api, "--token", "t")
    assert done.returncode == UNREACHABLE, done.stderr
    assert _one_error_line(done).startswith("error: unreachable: GET /leases")


def test_a_worker_command_with_no_service_fails_in_one_line(venv: Path) -> None:
    api = f"http://127.0.0.1:{_closed_port()}"
    lease = {"TENURE_API": api, "TENURE_LEASE_ID": "L1", "TENURE_LEASE_TOKEN": "tnr_l_x"}
    done = _run(venv, "tenure", "worker", "heartbeat", **lease)
    assert done.returncode == UNREACHABLE, done.stderr
    assert _one_error_line(done).startswith("error: unreachable: POST /leases/L1/heartbeat")
    assert UNREACHABLE != OUTCOME_UNKNOWN  # nothing was sent: no doubt about the outcome


@pytest.mark.parametrize("argv", [("local",), ("bench", "claims")])
def test_local_and_bench_name_the_extra_they_need(venv: Path, argv: tuple[str, ...]) -> None:
    done = _run(venv, "tenure", *argv)
    assert done.returncode == 1, done.stderr
    line = _one_error_line(done)
    assert f"tenure {' '.join(argv)} needs the local extra" in line
    assert "pip install 'tenure[local]'" in line


SDK_IMPORTS = """
import json, sys
import tenure_worker, tenure_worker.client, tenure_worker.runner, tenure_worker.shipping
import tenure_worker.shim
print(json.dumps(sorted(sys.modules)))
"""


def test_the_worker_sdk_loads_none_of_the_services_dependencies(venv: Path) -> None:
    done = _run(venv, "python", "-c", SDK_IMPORTS)
    assert done.returncode == 0, done.stderr
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert "tenure_worker" in loaded
    assert not loaded & {*NOT_IN_THE_SDK, "tenure", "tenure_cli"}, loaded


TEMPLATE_AND_PACKAGES = """
import json, sysconfig
from pathlib import Path
from tenure_cli.local.provision import template_path
site = Path(sysconfig.get_paths()["purelib"])
print(json.dumps({
    "template": str(template_path()),
    "site": str(site),
    "packages": sorted(p.name for p in site.iterdir() if (p / "__init__.py").exists()),
}))
"""


def test_the_install_carries_the_template_and_only_the_three_packages(venv: Path) -> None:
    done = _run(venv, "python", "-c", TEMPLATE_AND_PACKAGES)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    template = Path(found["template"])
    assert template.is_relative_to(found["site"]), "read from the install, not a checkout"
    assert template.read_text() == (ROOT / "infra" / "template.yaml").read_text()
    ours = {"tenure", "tenure_cli", "tenure_worker", "tests", "functions", "infra", "layers"}
    assert set(found["packages"]) & ours == {"tenure", "tenure_cli", "tenure_worker"}
