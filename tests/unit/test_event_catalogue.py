"""Event names are defined once, in domain/events.py: no other module of the service spells
one out (a typo there would be a new event type nobody consumes), and every name the docs
mention is one the service has."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tenure.domain import events

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "layers" / "core" / "tenure"
CATALOGUE = CORE / "domain" / "events.py"
PREFIX = r"(lease|task|pool|space|token|rule|classifier)\."
WORDS = r"[a-z_]+(\.[a-z_]+)*"
NAME = re.compile(PREFIX + WORDS)
ROW_PREFIX = r"(lease|task|pool|space|token|rule)\."
# Backticked words in the docs that look like event names but are a field and a file.
NOT_EVENTS = {"task.key", "rule.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _spelled_out(source: str) -> list[str]:
    """The event names `source` writes as string literals (docstrings aside), and the
    f-strings that build one from a prefix."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    hits: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and re.fullmatch(ROW_PREFIX, head.value):
                hits.append(f"f{head.value!r}...")
            continue
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        # Any name of the catalogue, or one that looks like a row's event (`classifier.input`
        # is a field path, not an event).
        if id(node) not in skip and (
            node.value in events.ALL or re.fullmatch(ROW_PREFIX + WORDS, node.value)
        ):
            hits.append(node.value)
    return hits


def test_the_catalogue_names_each_event_once() -> None:
    names = [v for k, v in vars(events).items() if k.isupper() and isinstance(v, str)]
    assert len(names) == len(set(names)) == len(events.ALL)
    assert all(NAME.fullmatch(name) for name in names)
    assert set(events.TASK_DECIDED.values()) <= events.ALL


def test_no_module_spells_out_an_event_name() -> None:
    found = {
        str(path.relative_to(CORE)): hits
        for path in sorted(CORE.rglob("*.py"))
        if path != CATALOGUE and (hits := _spelled_out(path.read_text()))
    }
    assert found == {}


def test_the_check_finds_a_literal_and_a_built_name() -> None:
    source = "\n".join(
        [
            "def f(state):",
            '    """Writes "lease.claimed"."""',
            '    return "lease.claimed", f"task.{state}"',
        ]
    )
    assert sorted(_spelled_out(source)) == ["f'task.'...", "lease.claimed"]


def test_every_event_the_docs_name_is_in_the_catalogue() -> None:
    named = {
        m.group(1)
        for page in sorted((ROOT / "docs").glob("*.md"))
        for m in re.finditer(r"`(" + NAME.pattern + r")`", page.read_text())
    }
    assert named  # the docs do name events: the check below reads something
    assert named - NOT_EVENTS <= events.ALL, sorted(named - NOT_EVENTS - events.ALL)
    assert named >= NOT_EVENTS  # an exception no page needs any more is dropped
