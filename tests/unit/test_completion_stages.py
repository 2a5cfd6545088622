"""A completion stage runs only on what `compose()` declares it applies to: the Completion
checks the declaration on the report and the lease before it enters the stage's module, so a
stage wrongly skipped (a retry on a failure, the scan of a result naming a task id) or wrongly
entered (the retry on a success) shows here."""

from __future__ import annotations

from typing import Any

from tenure.app.leases.reports import Applies, Completion, Ending, Reports, Stage
from tenure.domain.model import Lease
from tenure.domain.states import ReportKind

from tests.unit.support import Rig, as_lease


def _recorded(rig: Rig) -> tuple[Reports, list[str]]:
    """The rig's reports with one recording stage per declaration, at every extension point."""
    seen: list[str] = []

    def prepare(applies: Applies) -> Stage[Any]:
        def run(lease: Lease, kind: ReportKind, body: dict[str, Any]) -> dict[str, Any]:
            seen.append(f"prepare {applies.name}")
            return body

        return Stage(run, applies)

    def contribute(applies: Applies) -> Stage[Any]:
        def run(ending: Ending) -> Ending:
            seen.append(f"contribute {applies.name}")
            return ending

        return Stage(run, applies)

    def after(applies: Applies) -> Stage[Any]:
        def run(before: Lease, done: Lease, kind: ReportKind, body: dict[str, Any]) -> None:
            seen.append(f"after {applies.name}")

        return Stage(run, applies)

    every = list(Applies)
    completion = Completion(
        prepare=tuple(prepare(a) for a in every),
        contribute=tuple(contribute(a) for a in every),
        after=tuple(after(a) for a in every),
    )
    reports = rig.svc.reports
    return Reports(
        reports.kernel,
        reports.workers,
        completion,
        leases=reports.leases,
        signals=reports.signals,
    ), seen


def test_a_plain_complete_enters_only_the_stages_for_every_report() -> None:
    rig = Rig()
    reports, seen = _recorded(rig)
    lease = rig.claimed().lease
    reports.complete(as_lease(lease.id), lease.id, {"result": "done"})
    assert seen == ["prepare EVERY_REPORT", "contribute EVERY_REPORT", "after EVERY_REPORT"]


def test_a_complete_naming_tasks_and_task_ids_enters_those_stages() -> None:
    rig = Rig()
    reports, seen = _recorded(rig)
    lease = rig.claimed().lease
    body = {"result": "see task_0123abcd", "created_task_ids": ["task_0123abcd"]}
    reports.complete(as_lease(lease.id), lease.id, body)
    assert "prepare CREATED_TASKS" in seen
    assert "after TASK_IDS_IN_RESULT" in seen
    assert "contribute FAILURE" not in seen
    assert "contribute CLASSIFIER_SUCCESS" not in seen  # the rig's pool is a command pool


def test_a_failure_enters_the_failure_stages_and_not_the_completion_ones() -> None:
    rig = Rig()
    reports, seen = _recorded(rig)
    lease = rig.claimed().lease
    reports.fail(as_lease(lease.id), lease.id, {"error": "broke", "result": "task_0123abcd"})
    assert "contribute FAILURE" in seen
    assert "after TASK_IDS_IN_RESULT" not in seen  # the scan reads completions only
    assert "prepare CREATED_TASKS" not in seen


def test_a_complete_with_outcome_failure_ends_failed_and_enters_the_failure_stage() -> None:
    rig = Rig()
    reports, seen = _recorded(rig)
    lease = rig.claimed().lease
    reports.complete(as_lease(lease.id), lease.id, {"outcome": "failure"})
    assert "contribute FAILURE" in seen
