"""The store's expressions are named in one place, and its key formats in another: a write's
update or key condition is read by name, and a key's prefix is written only by store.keys."""

from __future__ import annotations

import re
from pathlib import Path

from tenure.store import expressions as x

STORE = Path(__file__).resolve().parents[2] / "layers" / "core" / "tenure" / "store"
TRIGGERS = STORE.parent / "triggers"
INLINE = re.compile(r"(UpdateExpression|KeyConditionExpression)\"?\s*[:=]\s*f?[\"']")
# A key prefix written as a literal (TASK#..., TOKEN#..., SPACE#...).
KEY_LITERAL = re.compile(r"[\"'](TASK|TOKEN|SPACE|LEASE|JOB|POOL|TASKKEY)#")


def _sources(*roots: Path) -> list[Path]:
    return [p for root in roots for p in sorted(root.rglob("*.py"))]


def test_no_update_or_key_condition_is_written_inline_in_the_store() -> None:
    inline = [
        f"{path.relative_to(STORE)}:{n}"
        for path in _sources(STORE)
        if path.name != "expressions.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if INLINE.search(line)
    ]
    assert inline == []


def test_key_prefixes_are_written_only_by_the_key_module() -> None:
    leaks = [
        f"{path.name}:{n}"
        for path in _sources(STORE, TRIGGERS)
        if path.name != "keys.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if KEY_LITERAL.search(line)
    ]
    assert leaks == []


def test_the_templated_expressions_name_each_value_they_take() -> None:
    assert x.set_each(["deadline", "due_at"]) == "SET deadline = :deadline, due_at = :due_at"
    assert x.add_counters(2) == "ADD #c0 :c0, #c1 :c1"
    assert x.queue_condition() == "queue_pk = :q"
    assert x.queue_condition(due_by=True) == "queue_pk = :q AND queue_sk <= :due"
    assert x.queue_condition(created_before=True) == "queue_pk = :q AND queue_sk < :before"
