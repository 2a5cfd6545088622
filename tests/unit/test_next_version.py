"""A task row's next version comes from domain/tasks.py:next_version only: the row names the
transition it is (the stream turns it into the timeline event), so a write that bumped the
version without naming its event, or the reverse, would lose or repeat one."""

from __future__ import annotations

import ast
from pathlib import Path

from tenure.domain.events import TASK_PAUSED
from tenure.domain.model import Task
from tenure.domain.tasks import next_version

APP = Path(__file__).resolve().parents[2] / "layers" / "core" / "tenure" / "app"
# Lease rows, which are not tasks: kernel.moved builds a lease's next version, and a claim
# marks a lease row twice (a retried claim, a shunned claimer). Can only shrink.
LEASE_ROWS = {"kernel.py", "leases/claims/record.py"}


def test_the_next_version_names_its_event_and_applies_the_changes() -> None:
    task = Task(id="t1", key="k1", space="s", title="t", created_at=5, version=3)
    new = next_version(task, TASK_PAUSED, {"by": "tok"}, 99, paused=True)
    assert (new.version, new.event_type, new.event_data, new.updated_at) == (
        4,
        TASK_PAUSED,
        {"by": "tok"},
        99,
    )
    assert new.paused is True
    assert (task.version, task.event_type, task.paused) == (3, None, False)  # a new row


def _hand_rolled(source: str) -> list[int]:
    """Lines of `replace(...)` calls that set a row's `version` and `event_type` themselves."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "replace":
            names = {k.arg for k in node.keywords}
            if {"version", "event_type"} <= names:
                found.append(node.lineno)
    return found


def test_no_task_write_builds_its_version_by_hand() -> None:
    found = {
        str(path.relative_to(APP)): lines
        for path in sorted(APP.rglob("*.py"))
        if (lines := _hand_rolled(path.read_text()))
    }
    assert set(found) <= LEASE_ROWS, found
    assert _hand_rolled("replace(task, version=task.version + 1, event_type=E)") == [1]
