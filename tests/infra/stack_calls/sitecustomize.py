"""Notes the AWS calls of every Python process of the end-to-end and browser tiers.

Those tiers start the local stack as processes of its own, which the recorder that
tests/conftest.py installs in pytest never sees. `make test` puts this directory on their
PYTHONPATH with TENURE_AWS_CALLS_FILE set, so Python loads this module at every start: it
wraps a Lambda entry point when its module is imported and hands botocore's calls to
tests/infra/aws_calls.py, which appends each distinct one to that file. A process that never
imports an entry point pays for nothing but this module. The file is judged after both tiers
by tests/infra/test_least_privilege_run.py.

Being first on the path, it hides any sitecustomize of the interpreter's own for those tiers.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any

_ENTRY_MODULES = {
    "tenure.api.app",
    "tenure.api.worker",
    "tenure.api.authorizer",
    "tenure.triggers.sweep",
    "tenure.triggers.stream",
    "tenure.triggers.rule_schedule",
    "tenure.triggers.inbound.handler",
}
_RECORDER = "tests.infra.aws_calls"


def _recorder() -> Any:
    fresh = _RECORDER not in sys.modules
    import tests.infra.aws_calls as recorder

    if fresh:  # pytest names the test it runs; another process names itself
        recorder.LOG.test = "a process of the run: " + " ".join(sys.argv)[:120]
    return recorder


class _Wrapping(importlib.abc.Loader):
    """The real loader, then the recorder's wrappers around what the module defines."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        if module.__name__ == "botocore.handlers":
            module.BUILTIN_HANDLERS.extend(
                [("before-parameter-build", _before), ("after-call", _after)]
            )
        else:
            _recorder().wrap_entries(module)


class _Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _ENTRY_MODULES and name != "botocore.handlers":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Wrapping(spec.loader)
                return spec
        return None


def _before(**kwargs: Any) -> None:
    # Until an entry point is imported no call can belong to a function: skip the import.
    recorder = sys.modules.get(_RECORDER)
    if recorder is not None:
        recorder._before(**kwargs)


def _after(**kwargs: Any) -> None:
    recorder = sys.modules.get(_RECORDER)
    if recorder is not None:
        recorder._after(**kwargs)


_before.aws_calls_hook = True  # type: ignore[attr-defined]
_after.aws_calls_hook = True  # type: ignore[attr-defined]

if os.environ.get("TENURE_AWS_CALLS_FILE"):
    sys.meta_path.insert(0, _Watch())
