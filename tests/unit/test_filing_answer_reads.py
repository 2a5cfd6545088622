"""A filing's answer describes the new task as any read of it would, and reads the graph row
and the scheduler's pauses only when the task could have either: a parent, blockers or the
auto-enqueue mark."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.model import Lease, Task

from tests.unit.support import MEMBER, POOL, SPACE, Rig


def _file(rig: Rig, pool: str | None = POOL, **links: Any) -> tuple[Task, Lease | None]:
    return rig.svc.filing.create_task(
        MEMBER, SPACE, "t", None, None, {}, pool, None, links=TaskLinks(**links)
    )


def _counted(rig: Rig) -> list[str]:
    reads: list[str] = []
    graph, scheduler = rig.store.get_graph, rig.store.get_scheduler

    def get_graph(task_id: str) -> Any:
        reads.append("graph")
        return graph(task_id)

    def get_scheduler(consistent: bool = True) -> Any:
        reads.append("scheduler")
        return scheduler(consistent)

    rig.store.get_graph = get_graph  # type: ignore[method-assign]
    rig.store.get_scheduler = get_scheduler  # type: ignore[method-assign]
    return reads


def test_a_plain_filing_answers_without_reading_the_graph_or_the_pauses(rig: Rig) -> None:
    task, lease = _file(rig)
    reads = _counted(rig)
    filed = rig.svc.graph.describe_filed(task, lease)
    assert reads == []
    assert filed == rig.svc.graph.describe_task(task, lease)  # what any read shows


@pytest.mark.parametrize(
    "links",
    [
        {"parent": True},
        {"blocker": True},
        {"auto_enqueue_on_ready": True},
    ],
    ids=["child", "dependent", "auto-enqueued"],
)
def test_a_filing_that_could_be_held_or_marked_reads_both(rig: Rig, links: dict[str, Any]) -> None:
    extra: dict[str, Any] = {}
    if links.get("parent"):
        parent, _ = _file(rig, pool=None)
        rig.svc.graph.pause_task(MEMBER, parent.id)
        extra["parent_id"] = parent.id
    if links.get("blocker"):
        blocker, _ = _file(rig, pool=None)
        extra["depends_on"] = (blocker.id,)
    if links.get("auto_enqueue_on_ready"):
        extra["auto_enqueue_on_ready"] = True
    task, lease = _file(rig, **extra)
    reads = _counted(rig)
    filed = rig.svc.graph.describe_filed(task, lease)
    assert {"graph", "scheduler"} <= set(reads)
    assert filed == rig.svc.graph.describe_task(task, lease)
    if "parent_id" in extra:  # held by its parent's pause from the moment it is filed
        assert filed.paused_by_task_id == extra["parent_id"]
    if "depends_on" in extra:
        assert filed.blocked_reasons and filed.blocked_reasons[0]["source"] == "dependency"
