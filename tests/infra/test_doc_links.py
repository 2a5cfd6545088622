"""Every link between the project's documents reaches what it names: a linked file exists, and
a `#anchor` is a heading of the linked document, made into an anchor as GitHub makes one
(lower case; punctuation but hyphens and underscores dropped; spaces become hyphens; a repeated
heading gets -1, -2, ...). A section renamed or dropped by mistake fails here, not in a
reader's hands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# A Markdown link's target, relative (no scheme): a path, an anchor, or both.
LINK = re.compile(r"\]\((?![a-z]+:)([^)\s#]*)(?:#([^)\s]+))?\)")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_anchors_are_made_as_github_makes_them() -> None:
    text = "# Cost, measured\n## An empty Query's least read\n## `tenure bench cost`\n## A\n## A\n"
    assert anchors(text) == {
        "cost-measured",
        "an-empty-querys-least-read",
        "tenure-bench-cost",
        "a",
        "a-1",
    }


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_document_reaches_its_file_and_heading(doc: Path) -> None:
    text = FENCE.sub("", doc.read_text())
    broken = []
    for path, anchor in LINK.findall(text):
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists():
            broken.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            broken.append(f"{path}#{anchor}: no such heading")
    assert not broken, broken
