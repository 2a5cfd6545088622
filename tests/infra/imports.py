"""Every import in the service, the worker SDK, the CLI and the functions, read from the source
(no module is imported): who imports what, where, and whether it runs when the module loads."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Top-level package -> the folder holding it.
PACKAGES = {
    "tenure": ROOT / "layers" / "core" / "tenure",
    "tenure_worker": ROOT / "packages" / "worker" / "tenure_worker",
    "tenure_cli": ROOT / "packages" / "cli" / "tenure_cli",
}
FUNCTIONS = ROOT / "functions"
STDLIB = frozenset(sys.stdlib_module_names)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported (a name taken from a module counts as that module)
    line: int
    # Runs when `source` is imported: not inside a function, not under `if TYPE_CHECKING:`.
    at_load: bool
    # Under `if TYPE_CHECKING:`: never runs, but the dependency is there all the same.
    typing_only: bool

    @property
    def top(self) -> str:
        return self.target.split(".")[0]


def modules() -> dict[str, Path]:
    """Module name -> file, for the three packages and every function's entry point."""
    found: dict[str, Path] = {}
    for folder in PACKAGES.values():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    for path in sorted(FUNCTIONS.glob("*/app.py")):
        found[f"functions.{path.parent.name}.app"] = path
    assert {"tenure.domain", "tenure_worker.client", "tenure_cli.main"} <= set(found)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(
    node: ast.AST, in_function: bool, typing_only: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function, typing_only
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, True, typing_only)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, False)
        else:
            yield from _walk(child, in_function, typing_only)


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node, in_function, typing_only in _walk(ast.parse(path.read_text()), False, False):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "__future__":
                continue
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in dict.fromkeys(targets):
            at_load = not in_function and not typing_only
            found.append(Import(module, target, node.lineno, at_load, typing_only))
    return found


def all_imports() -> list[Import]:
    found = modules()
    known = set(found)
    return [imp for module, path in found.items() for imp in imports_of(module, path, known)]


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Each strongly connected set of two or more modules (or a module importing itself),
    sorted: a cycle of imports."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graphs here are a few hundred nodes
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1 or node in graph[node]:
                out.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)
