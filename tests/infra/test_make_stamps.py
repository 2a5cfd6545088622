"""`make local` and `make test` share .venv with a stamp each: whichever runs first, each extra
is installed once. Checked with `make -n` (what make would run) on a copy of the Makefile in a
scratch directory whose .venv holds only the stamps."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "pip install -e '.[local]'"
DEV = "pip install --quiet -e '.[dev]'"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    long_ago = (tmp_path / "pyproject.toml").stat().st_mtime - 100
    os.utime(tmp_path / "pyproject.toml", (long_ago, long_ago))  # older than any stamp
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    return tmp_path


def planned(checkout: Path, target: str) -> str:
    done = subprocess.run(
        ["make", "-n", target], cwd=checkout, capture_output=True, text=True, check=True
    )
    return done.stdout


def stamp(checkout: Path, name: str, age: int = 0) -> None:
    """A stamp as a finished install leaves it, `age` seconds before now."""
    path = checkout / ".venv" / name
    path.touch()
    then = path.stat().st_mtime - age
    os.utime(path, (then, then))


def test_make_local_installs_the_local_extra_alone(checkout: Path) -> None:
    plan = planned(checkout, "local")
    assert LOCAL in plan and DEV not in plan
    assert "--quiet -e '.[local]'" not in plan, "pip's progress is shown for make local"
    assert ".venv/bin/tenure local" in plan


def test_make_local_then_make_test_installs_only_the_rest(checkout: Path) -> None:
    stamp(checkout, ".installed-local")
    plan = planned(checkout, "install")
    assert DEV in plan and LOCAL not in plan


def test_make_test_first_leaves_make_local_nothing_to_install(checkout: Path) -> None:
    plan = planned(checkout, "install")
    assert plan.index(LOCAL) < plan.index(DEV), "local first, then dev on top"
    stamp(checkout, ".installed-local", age=2)
    stamp(checkout, ".installed-dev", age=1)
    assert "pip install" not in planned(checkout, "local")
    assert "pip install" not in planned(checkout, "install")


def test_a_changed_pyproject_reinstalls_both(checkout: Path) -> None:
    stamp(checkout, ".installed-local", age=20)
    stamp(checkout, ".installed-dev", age=10)
    (checkout / "pyproject.toml").touch()
    plan = planned(checkout, "install")
    assert LOCAL in plan and DEV in plan
