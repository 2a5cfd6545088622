"""The API models' namespace loads its modules when a name is first read; each name must still
be the object of the module its re-export names, whatever was loaded before it."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

from tenure.api import models

SOURCE = Path(models.__file__)


def _re_exports() -> list[tuple[str, str]]:
    """(module, name) of every `from tenure.api.models.<module> import <name> as <name>`."""
    found = []
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found.append((node.module, alias.asname or alias.name))
    return found


def test_every_re_exported_name_is_its_own_module_s_object() -> None:
    names = _re_exports()
    assert len(names) > 100  # the whole list, not an empty parse
    for module, name in names:
        assert getattr(models, name) is getattr(importlib.import_module(module), name), name


def test_a_name_read_first_loads_its_module_and_not_the_operators_ones() -> None:
    # A fresh interpreter: which modules the worker's first read loads.
    probe = (
        "import sys; from tenure.api import models as m; m.Complete; "
        "print(sorted(k for k in sys.modules if k.startswith('tenure.api.models.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "tenure.api.models.leases" in out
    for operators in ("pools", "scheduler", "setup", "tasks", "blocks"):
        assert f"tenure.api.models.{operators}'" not in out, operators


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        models.NoSuchModel  # noqa: B018
    except AttributeError as missing:
        assert "NoSuchModel" in str(missing)
    else:
        raise AssertionError("an unknown name resolved")
