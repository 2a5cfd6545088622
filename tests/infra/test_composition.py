"""Behaviour is composed, not inherited in layers: a class of the service's core (domain, app,
store, triggers) has at most one base class. A store or use case that needs another's reads
or writes takes it as a collaborator, so what runs is named where the object is built instead
of being found by walking a chain of bases. The API's request and answer models are pydantic
data (a model extending two others adds fields, not behaviour) and are left out, and so is a
Protocol that names several ports at once: it is a type, and holds no code to inherit."""

from __future__ import annotations

import ast
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "layers" / "core" / "tenure"
CORE_ROOMS = ("domain", "app", "store", "triggers")


def classes_with_several_bases() -> list[str]:
    found = []
    for room in CORE_ROOMS:
        for path in sorted((SERVICE / room).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef) and len(node.bases) > 1:
                    if any(ast.unparse(b) == "Protocol" for b in node.bases):
                        continue
                    bases = ", ".join(ast.unparse(b) for b in node.bases)
                    found.append(f"{path.relative_to(SERVICE)}: {node.name}({bases})")
    return found


def test_no_class_of_the_core_stacks_base_classes() -> None:
    assert classes_with_several_bases() == []


def test_the_check_reads_the_classes_it_judges() -> None:
    assert sum(1 for room in CORE_ROOMS for _ in (SERVICE / room).rglob("*.py")) > 50
    tree = ast.parse("class Store(Reads, Rows, Schema):\n    pass\n")
    stacked = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and len(n.bases) > 1]
    assert [n.name for n in stacked] == ["Store"]


def test_a_protocol_of_several_ports_is_no_stack() -> None:
    rows = SERVICE / "app" / "rows.py"
    tree = ast.parse(rows.read_text())
    union = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    assert union and len(union[0].bases) > 2
    assert not any(line.startswith("app/rows.py") for line in classes_with_several_bases())


# The service is composed in one place: wiring.build_service, for the deployment, the reactor
# and the CLI alike. A second caller of compose() picks its own adapters and drifts from it
# (the reactor's once built a service without schedules, blobs or logs by hand).
ROOT = SERVICE.parents[2]
SHIPPED = (ROOT / "layers", ROOT / "packages", ROOT / "functions")
COMPOSER = SERVICE / "wiring.py"


def callers_of_compose(paths: list[Path], name: str = "compose") -> list[tuple[Path, int]]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == name:
                found.append((path, node.lineno))
    return found


def test_only_the_wiring_composes_the_service() -> None:
    shipped = [p for top in SHIPPED for p in sorted(top.rglob("*.py")) if p != COMPOSER]
    assert len(shipped) > 100
    assert callers_of_compose(shipped) == []
    assert len(callers_of_compose([COMPOSER])) == 2  # with the deployment's adapters, or bare


def test_the_worker_s_use_cases_are_composed_by_the_wiring_and_the_whole_service_alone() -> None:
    # The whole service starts from the worker's composition, so a claim or a report is built
    # the same way on the worker function as on the HTTP API; nothing else builds it by hand.
    whole = SERVICE / "app" / "tenure.py"
    shipped = [
        p for top in SHIPPED for p in sorted(top.rglob("*.py")) if p not in (COMPOSER, whole)
    ]
    assert callers_of_compose(shipped, "compose_worker") == []
    assert len(callers_of_compose([COMPOSER], "compose_worker")) == 1
    assert len(callers_of_compose([whole], "compose_worker")) == 1


def test_the_compose_check_finds_a_call_by_hand(tmp_path: Path) -> None:
    by_hand = tmp_path / "admin.py"
    by_hand.write_text("from tenure.app import tenure\nsvc = tenure.compose(rows, clock, ids)\n")
    assert callers_of_compose([by_hand]) == [(by_hand, 2)]
