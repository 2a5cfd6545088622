"""Builds the core layer as Lambda runs it: `sam build` calls this (layers/core/Makefile) with
its artifacts directory, and `make deploy-check` and `tenure bench coldstart` use its parts.

1. The dependencies (requirements.txt) for arm64 and Python 3.13, wheels only, into python/.
2. The tenure package beside them, without any bytecode the checkout may hold.
3. Everything under python/ compiled to bytecode by Python 3.13, the runtime's version.

Why 3: Lambda's /opt is read-only, so a module without usable bytecode is compiled from source
in every new execution environment, and that is most of what a cold start spends importing.
The bytecode is hash-checked (PEP 552): SAM zips every file with the same 1980 timestamp, so
bytecode that trusts timestamps would never match its source there and would be compiled
again; a hash-checked file is used whenever the source is the one it was compiled from, and
compiled afresh (never run stale) otherwise."""

from __future__ import annotations

import compileall
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNTIME = (3, 13)
PLATFORM = ["--platform", "manylinux2014_aarch64", "--python-version", "3.13"]
# Where Lambda mounts a layer's python/: the paths tracebacks will name.
MOUNTED_AT = "/opt/python"


def install_dependencies(target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-warn-conflicts",
            "--no-compile",  # step 3 compiles, for the runtime's Python and hash-checked
            *PLATFORM,
            "--only-binary=:all:",
            "--target",
            str(target),
            "-r",
            str(HERE / "requirements.txt"),
        ],
        check=True,
    )


def copy_service(target: Path) -> None:
    shutil.copytree(
        HERE / "tenure",
        target / "tenure",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        dirs_exist_ok=True,
    )


def precompile(target: Path, mounted_at: str | None = MOUNTED_AT) -> bool:
    """Compile every module under `target` with this interpreter, hash-checked; the paths
    recorded are where the files will be (`mounted_at`), not where they are built."""
    return bool(
        compileall.compile_dir(
            str(target),
            quiet=1,
            workers=0,
            stripdir=str(target) if mounted_at else None,
            prependdir=mounted_at,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
    )


def _runtime_python() -> str | None:
    """A Python 3.13 to compile with: TENURE_LAYER_PYTHON if set, else python3.13 on the PATH,
    each only if it runs and is that version (a version manager's shim may be neither)."""
    for candidate in (os.environ.get("TENURE_LAYER_PYTHON"), shutil.which("python3.13")):
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.split() == [str(n) for n in RUNTIME]:
            return candidate
    return None


def precompile_for_runtime(target: Path) -> str:
    """Step 3 by Python 3.13: this interpreter when it is that version, else another one
    (_runtime_python). Bytecode of another version would never be read by the runtime, so
    without a 3.13 the layer ships sources only, and says so."""
    if sys.version_info[:2] == RUNTIME:
        if not precompile(target):
            raise SystemExit("compiling the layer failed")
        return "compiled by this Python"
    other = _runtime_python()
    if other is None:
        return "not compiled: no Python 3.13 here (the runtime compiles at each cold start)"
    subprocess.run(
        [other, str(Path(__file__).resolve()), "--compile-only", str(target)],
        check=True,
    )
    return f"compiled by {other}"


def build(artifacts: Path) -> str:
    target = artifacts / "python"
    install_dependencies(target)
    copy_service(target)
    return precompile_for_runtime(target)


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--compile-only":
        if not precompile(Path(argv[1])):
            raise SystemExit("compiling the layer failed")
        return
    if len(argv) != 1:
        raise SystemExit("usage: build_layer.py ARTIFACTS_DIR")
    print(f"core layer: {build(Path(argv[0]))}")


if __name__ == "__main__":
    main(sys.argv[1:])
