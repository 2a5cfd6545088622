"""What a rule mints carries the scheduling controls its subject names: concurrency key (with
the title's placeholders), run timeout, queue timeout, attempts, approval; refused with a
stable code when out of bounds."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease, Task
from tenure.domain.states import LeaseState, TaskStatus

from tests.unit.rules_support import FakeSchedules, event_trigger
from tests.unit.support import ADMIN, MEMBER, POOL, READER, SPACE, WORKER, Rig

CONTROLS: dict[str, Any] = {
    "priority": 8,
    "concurrency_key": "mail-{from}",
    "max_run_seconds": 900,
    "expires_in_seconds": 3600,
    "max_attempts": 7,
}


def _rule(rig: Rig, subject: dict[str, Any], trigger: dict[str, Any] | None = None) -> Any:
    return rig.svc.rules.create_rule(
        ADMIN, SPACE, "controlled", POOL, subject, trigger or event_trigger()
    )


def _task_subject(**controls: Any) -> dict[str, Any]:
    return {"kind": "task", "title": "Reply to {from}", **controls}


def _event(rig: Rig, event_id: str | None = None) -> list[Lease]:
    data = {"from": "ann@example.com", "subject": "Invoice 7"}
    return rig.svc.firings.post_event(MEMBER, SPACE, "mail.forwarded", data, None, event_id)


def _task(rig: Rig, task_id: str | None) -> Task:
    task = rig.store.get_task(task_id or "")
    assert task is not None
    return task


def test_an_event_rule_mints_its_controls_on_the_task_and_the_lease(rig: Rig) -> None:
    _rule(rig, _task_subject(**CONTROLS))
    [lease] = _event(rig)
    now = rig.clock.now_ms()
    assert lease.concurrency_key == "mail-ann@example.com"  # rendered like the title
    assert (lease.max_run_seconds, lease.expires_in_seconds) == (900, 3600)
    assert lease.queue_expires_at == now + 3_600_000
    assert lease.priority == 8
    task = _task(rig, lease.task_id)
    assert task.title == "Reply to ann@example.com"
    assert (task.concurrency_key, task.max_attempts) == ("mail-ann@example.com", 7)
    assert (task.max_run_seconds, task.expires_in_seconds) == (900, 3600)
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.max_attempts == 7


def test_the_queue_timeout_ends_a_minted_lease_nobody_claimed(rig: Rig) -> None:
    _rule(rig, _task_subject(expires_in_seconds=60))
    [lease] = _event(rig)
    rig.advance(61)
    rig.sweep()
    ended = rig.store.get_lease(lease.id)
    assert ended is not None and ended.state is LeaseState.CANCELLED
    assert ended.end_reason == "queue_timeout"


def test_a_key_full_pool_holds_back_a_second_minted_lease_of_the_same_key(rig: Rig) -> None:
    rig.make_pool("keyed", max_active_per_key=1)
    rig.svc.rules.create_rule(
        ADMIN, SPACE, "keyed", "keyed", _task_subject(concurrency_key="k-{from}"), event_trigger()
    )
    first, second = _event(rig, "e1")[0], _event(rig, "e2")[0]
    won = rig.svc.claims.claim(WORKER, "keyed", "w1", "1", 0, None)
    assert won is not None and won.lease.id == first.id
    again = rig.svc.claims.claim(WORKER, "keyed", "w1", "1", 0, None)
    assert again is None, "the second lease of the same key was handed out past the key's ceiling"
    assert rig.store.get_lease(second.id).state is LeaseState.PENDING  # type: ignore[union-attr]


def test_a_space_subject_lease_carries_the_controls_too(rig: Rig) -> None:
    controls = {k: v for k, v in CONTROLS.items() if k != "max_attempts"}
    rule = _rule(rig, {"kind": "space", **controls, "max_attempts": 2})
    lease = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert isinstance(lease, Lease) and lease.task_id is None
    assert lease.concurrency_key == "mail-"  # fired by hand: the event carried no data
    assert (lease.max_run_seconds, lease.expires_in_seconds) == (900, 3600)
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.max_attempts == 2


def test_a_scheduled_rule_keeps_its_key_as_written(rig: Rig, schedules: FakeSchedules) -> None:
    rule = _rule(
        rig,
        _task_subject(concurrency_key="nightly"),
        {"schedule": "rate(1 hour)"},
    )
    at = datetime.fromtimestamp(rig.clock.now_ms() / 1000, tz=UTC)
    lease = rig.svc.firings.fire_scheduled(rule.id, at)
    assert isinstance(lease, Lease) and lease.concurrency_key == "nightly"


def test_requires_approval_files_a_waiting_task_and_no_lease(rig: Rig) -> None:
    rule = _rule(rig, _task_subject(requires_approval=True, **CONTROLS))
    assert _event(rig, "e1") == []  # the event answers the leases it minted: none
    filed = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert isinstance(filed, Task)
    view = rig.svc.graph.get_task(READER, filed.id)
    assert view.status is TaskStatus.BLOCKED
    assert [r["source"] for r in view.blocked_reasons] == ["approval"]
    assert rig.svc.operator.list_leases(ADMIN, SPACE, 50, None, None, None).leases == []
    rig.svc.approval.approve(MEMBER, filed.id, None)
    task = _task(rig, filed.id)
    lease = rig.svc.kernel.newest_lease(task)
    assert lease is not None and lease.state is LeaseState.PENDING
    assert (lease.max_run_seconds, lease.expires_in_seconds, lease.priority) == (900, 3600, 8)
    assert lease.concurrency_key == "mail-"


def test_a_task_an_approval_rule_filed_is_found_by_its_key(rig: Rig) -> None:
    # Its id comes from the occasion, not from its key: its key row is what finds it.
    rule = _rule(rig, _task_subject(requires_approval=True))
    filed = rig.svc.firings.fire_rule(MEMBER, rule.id)
    assert isinstance(filed, Task)
    assert rig.svc.task_keys.task_id(READER, filed.key) == filed.id


def test_an_approval_rules_occasion_files_one_task_however_often_delivered(rig: Rig) -> None:
    _rule(rig, _task_subject(requires_approval=True))
    _event(rig, "same")
    rig.svc.firings.fire_inbound("mail.forwarded", "occasion-1", 0, {}, [], SPACE)
    rig.svc.firings.fire_inbound("mail.forwarded", "occasion-1", 0, {}, [], SPACE)
    entries = rig.store.task_page(SPACE, 50, None).entries
    assert len(entries) == 2  # one for the event, one for the occasion delivered twice


@pytest.mark.parametrize(
    ("subject", "field"),
    [
        (_task_subject(concurrency_key=""), "subject.concurrency_key"),
        (_task_subject(concurrency_key="x" * 129), "subject.concurrency_key"),
        (_task_subject(concurrency_key="a\nb"), "subject.concurrency_key"),
        (_task_subject(concurrency_key=7), "subject.concurrency_key"),
        (_task_subject(max_run_seconds=0), "subject.max_run_seconds"),
        (_task_subject(max_run_seconds=30 * 86_400 + 1), "subject.max_run_seconds"),
        (_task_subject(max_run_seconds=True), "subject.max_run_seconds"),
        (_task_subject(expires_in_seconds=0), "subject.expires_in_seconds"),
        (_task_subject(expires_in_seconds=366 * 86_400 + 1), "subject.expires_in_seconds"),
        (_task_subject(max_attempts=0), "subject.max_attempts"),
        (_task_subject(max_attempts=101), "subject.max_attempts"),
        (_task_subject(max_attempts="3"), "subject.max_attempts"),
        (_task_subject(requires_approval="yes"), "subject.requires_approval"),
        ({"kind": "space", "requires_approval": True}, "subject.requires_approval"),
        ({"kind": "workflow", "slug": "w", "requires_approval": True}, "subject.requires_approval"),
    ],
)
def test_a_bad_control_is_validation_failed_naming_it(
    rig: Rig, subject: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        _rule(rig, subject)
    assert refused.value.message.startswith(f"{field}:"), refused.value.message
    assert rig.svc.rules.list_rules(READER, SPACE).rules == []


def test_a_patch_with_a_bad_control_changes_nothing(rig: Rig) -> None:
    rule = _rule(rig, _task_subject(max_attempts=2))
    with pytest.raises(ValidationFailed):
        rig.svc.rules.update_rule(ADMIN, rule.id, {"subject": _task_subject(max_attempts=0)})
    assert rig.svc.rules.get_rule(READER, rule.id).subject["max_attempts"] == 2
