"""Classifier pools: the payload carries the pinned input verbatim, and a
successful completion renders the output expressions into the task's checks and properties."""

from __future__ import annotations

from typing import Any

from tenure.app.setup.versions import render
from tenure.domain.events import CLASSIFIER_OUTPUT_FAILED
from tenure.domain.model import Pool
from tenure.domain.states import LeaseState, PoolKind

from tests.unit.support import ADMIN, MEMBER, SPACE, Rig, as_lease

INPUT = {"attachments": [{"name": "screenshot.png"}], "questions": [{"id": "q1", "text": "OK?"}]}
OUTPUT = {
    "checks": {"looks_right": "answers.q1 == 'yes'"},
    "properties": {"score": "score", "first_tag": "tags[0]"},
}


def _classifier(rig: Rig, output: dict[str, Any] | None = None) -> None:
    settings = {"input": INPUT, "output": OUTPUT if output is None else output}
    pool = Pool(
        name="judges", space=SPACE, kind=PoolKind.CLASSIFIER, created_at=0, classifier=settings
    )
    rig.svc.pools.create_pool(ADMIN, pool)


def test_the_payload_carries_the_input_verbatim_and_no_agent_fields(rig: Rig) -> None:
    _classifier(rig)
    won = rig.claimed(pool="judges")
    bundle = rig.svc.payloads.payload(as_lease(won.lease.id), won.lease.id)
    assert bundle["kind"] == "classifier"
    assert bundle["input"] == INPUT
    assert "model" not in bundle and "effort" not in bundle


def test_success_sets_checks_and_properties_from_the_reported_details(rig: Rig) -> None:
    _classifier(rig)
    won = rig.claimed(pool="judges", properties={"team": "web"})
    details = {"answers": {"q1": "yes"}, "score": 0.9, "tags": ["ui", "css"]}
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"details": details})
    assert done.state is LeaseState.COMPLETED
    task = rig.svc.graph.get_task(MEMBER, won.lease.task_id or "").task
    assert task.checks == {"looks_right": True}
    assert task.properties == {"team": "web", "score": 0.9, "first_tag": "ui"}
    assert "task.classified" in rig.types(task.id)


def test_a_failing_expression_is_recorded_and_the_lease_still_completes(rig: Rig) -> None:
    _classifier(rig, {"checks": {"long": "length(score) > `3`"}, "properties": {"s": "score"}})
    won = rig.claimed(pool="judges")
    done = rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"details": {"score": 7}})
    assert done.state is LeaseState.COMPLETED
    task = rig.svc.graph.get_task(MEMBER, won.lease.task_id or "").task
    assert task.properties == {"s": 7} and task.checks == {}
    failed = [e for e in rig.events(task.id) if e.type == CLASSIFIER_OUTPUT_FAILED]
    assert len(failed) == 1
    assert failed[0].data["failed"][0]["field"] == "checks.long"


def test_a_failure_outcome_or_a_failed_report_renders_nothing(rig: Rig) -> None:
    _classifier(rig)
    won = rig.claimed(pool="judges", max_attempts=1)
    details = {"details": {"score": 1}, "outcome": "failure"}
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, details)
    task = rig.svc.graph.get_task(MEMBER, won.lease.task_id or "").task
    assert task.properties == {} and task.checks == {}


def test_a_lease_renders_with_the_output_of_the_version_it_pinned(rig: Rig) -> None:
    _classifier(rig, {"properties": {"old": "score"}})
    won = rig.claimed(pool="judges")
    rig.svc.pools.update_pool(
        ADMIN, "judges", {"classifier": {"input": {}, "output": {"properties": {"new": "score"}}}}
    )
    rig.svc.reports.complete(as_lease(won.lease.id), won.lease.id, {"details": {"score": 3}})
    task = rig.svc.graph.get_task(MEMBER, won.lease.task_id or "").task
    assert task.properties == {"old": 3}


def test_render_never_raises_and_names_each_failure() -> None:
    out = render({"checks": {"a": "abs(x)", "b": "x"}, "properties": {"c": "y.z"}}, {"x": "s"})
    assert out.checks == {"b": "s"} and out.properties == {"c": None}
    assert [f["field"] for f in out.failed] == ["checks.a"]
