"""A rule's firing without a transaction, on DynamoDB Local: the job first (the occasion's
lock, naming the lease and the task to come), then the lease marked task-pending, then the
task. These race deliveries of one occasion, inject a crash between each two writes, and
prove that every occasion ends with exactly one lease (and one task), that a redelivery
finishes what a dead delivery left and answers the same lease, and that a table below the
schema version that allows it still mints in one transaction.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tenure.app.leases.orphans import MINT_ORPHAN_AFTER_MS, ORPHAN_AFTER_MS
from tenure.app.migrations import RULE_MINTS_FROM_SCHEMA, SchemaState
from tenure.app.tenure import Tenure
from tenure.domain.errors import Unavailable
from tenure.domain.model import Lease, Principal, Task
from tenure.domain.outbound import ends_orphan
from tenure.domain.rules.rule import email_occasion, firing_job_id, successor_job_id
from tenure.domain.states import LeaseState
from tenure.store import conditions, keys

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_rules_races import THREADS, NoSchedules, _race
from tests.conformance.test_untransacted_filing import kind_of, watch_writes
from tests.conftest import ADMIN, Rig

WORKER = Principal(kind="worker", token_id="t-worker")
INBOX = "help@example.com"


def _mail(message_id: str = "msg-1") -> dict[str, Any]:
    return {
        "message_id": message_id,
        "from": "dana@customer.example",
        "to": [INBOX],
        "cc": [],
        "recipients": [INBOX],
        "subject": "Please re-run the export",
        "body": "The export stopped halfway.",
        "verdicts": {"spam": "PASS", "virus": "PASS"},
        "attachments": [],
    }


def _rule(svc: Tenure, subject: dict[str, Any] | None = None) -> str:
    svc.addresses.add_address(ADMIN, SPACE, INBOX)
    trigger = {"topic": "email.received", "match": {"to": INBOX}}
    subject = subject or {"kind": "task", "title": "{subject}", "body": "from {from}"}
    return svc.rules.create_rule(ADMIN, SPACE, "intake", ALPHA, subject, trigger).id


def _fire(svc: Tenure, message_id: str = "msg-1") -> Lease:
    [lease] = svc.firings.fire_email(0, _mail(message_id)).leases
    return lease


def _dies_before(rig: Rig, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The delivery's process dies just before its put of a `kind` row."""
    real_put = rig.store.rows.put_one

    def dies(item: dict[str, Any]) -> None:
        if kind_of(item) == kind:
            raise RuntimeError("the delivery's process died here")
        real_put(item)

    monkeypatch.setattr(rig.store.rows, "put_one", dies)


def _dies_before_its_task(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, message_id: str = "msg-1"
) -> None:
    """A mail's delivery whose process dies after the job and the lease, before the task."""
    _dies_before(rig, monkeypatch, "task")
    with pytest.raises(RuntimeError):
        _fire(rig.svc, message_id)
    monkeypatch.undo()


def _leases(rig: Rig) -> list[Lease]:
    return rig.svc.operator.list_leases(ADMIN, SPACE, 100, None, None, None).leases


def _tasks(rig: Rig) -> list[Task]:
    return [t.view.task for t in rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks]


def _claim(rig: Rig, worker: str = "w-1") -> Any:
    return rig.svc.claims.claim(WORKER, ALPHA, worker, "1.0", 0, None)


def test_a_firing_writes_its_job_then_its_lease_then_its_task_and_no_transaction(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    puts, transactions = watch_writes(rig, monkeypatch)
    lease = _fire(rig.svc)
    assert (puts, transactions) == (["job", "lease", "task"], [])
    stored = rig.store.get_lease(lease.id)
    assert stored is not None and stored.tp is True
    job = rig.store.get_job(lease.job_id)
    assert job is not None and job.lease_id == lease.id and job.task_id == lease.task_id
    assert job.task_key == lease.task_key and job.trigger is not None
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id and won.task is not None
    claimed = rig.store.get_lease(lease.id)
    assert claimed is not None and claimed.tp is None and claimed.state is LeaseState.DISPATCHED
    payload = rig.svc.payloads.claimed_payload(won.lease, won.task)
    assert payload is not None
    assert payload["trigger"]["data"]["subject"] == "Please re-run the export"
    assert payload["subject"]["title"] == "Please re-run the export"


def test_a_redelivery_after_success_answers_the_same_lease_and_writes_nothing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    first = _fire(rig.svc)
    puts, transactions = watch_writes(rig, monkeypatch)
    assert _fire(rig.svc).id == first.id
    assert (puts, transactions) == ([], [])  # the marked lease's task is read: it is there
    assert len(_leases(rig)) == 1 and len(_tasks(rig)) == 1


def test_a_redelivery_of_a_claimed_lease_reads_no_task_and_writes_nothing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    first = _fire(rig.svc)
    assert _claim(rig) is not None
    puts, transactions = watch_writes(rig, monkeypatch)
    again = _fire(rig.svc)
    assert again.id == first.id and again.state is LeaseState.DISPATCHED
    assert (puts, transactions) == ([], [])


def test_a_delivery_that_dies_after_its_job_is_finished_by_the_redelivery(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    _dies_before(rig, monkeypatch, "lease")
    with pytest.raises(RuntimeError):
        _fire(rig.svc)
    monkeypatch.undo()
    job = rig.store.get_job(firing_job_id(rule_id, email_occasion("msg-1")))
    assert job is not None and rig.store.get_lease(job.lease_id) is None
    assert _leases(rig) == [] and _tasks(rig) == []
    lease = _fire(rig.svc)  # SQS delivers the record again
    assert lease.id == job.lease_id and lease.task_id == job.task_id
    assert lease.task_key == job.task_key and lease.created_at == job.created_at
    assert [x.id for x in _leases(rig)] == [lease.id]
    [task] = _tasks(rig)
    assert task.id == job.task_id and task.title == "Please re-run the export"
    assert task.body == "from dana@customer.example"
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id and won.task.id == task.id
    assert _fire(rig.svc).id == lease.id


def test_a_delivery_that_dies_before_its_task_is_finished_by_the_redelivery(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    _dies_before_its_task(rig, monkeypatch)
    [orphan_id] = rig.store.queue_candidates(ALPHA, 100)
    assert _claim(rig) is None  # the lease waits for its task
    lease = _fire(rig.svc)
    assert lease.id == orphan_id
    [task] = _tasks(rig)
    assert task.id == lease.task_id
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id and won.task.id == task.id


def _taken_for_dead(rig: Rig, monkeypatch: pytest.MonkeyPatch, message_id: str = "msg-1") -> Lease:
    """A delivery that dies before its task; no redelivery for over an hour, so a claim
    takes the mint for dead: its task's id voided, its lease ended. That lease."""
    _dies_before_its_task(rig, monkeypatch, message_id)
    # A filing's wait is not a mint's: its task comes with the occasion's next delivery.
    rig.clock.advance(2 * ORPHAN_AFTER_MS / 1000)
    assert _claim(rig) is None
    waiting = [x for x in _leases(rig) if x.state is LeaseState.PENDING]
    assert len(waiting) == 1
    rig.clock.advance(MINT_ORPHAN_AFTER_MS / 1000)
    assert _claim(rig) is None  # taken for dead: its task id voided, the lease ended
    dead = rig.store.get_lease(waiting[0].id)
    assert dead is not None and dead.state is LeaseState.CANCELLED and ends_orphan(dead)
    row = rig.store.rows.get(keys.task_key(dead.task_id or ""), consistent=True)
    assert row is not None and row["entity"] == conditions.VOID_TASK
    return dead


def test_a_redelivery_after_the_mint_was_taken_for_dead_mints_the_occasion_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dead-letter queue redriven a day later: the mail is filed, not answered with a run
    # that never ran.
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    dead = _taken_for_dead(rig, monkeypatch)
    rig.clock.advance(86_400)
    again = _fire(rig.svc)
    assert again.id != dead.id and again.state is LeaseState.PENDING
    assert again.task_id != dead.task_id and again.job_id == successor_job_id(dead.job_id)
    first = rig.store.get_job(firing_job_id(rule_id, email_occasion("msg-1")))
    assert first is not None and first.lease_id == dead.id  # the dead mint's job stays
    [task] = _tasks(rig)
    assert task.id == again.task_id and task.title == "Please re-run the export"
    assert _fire(rig.svc).id == again.id  # and every delivery after answers the new one
    assert len(_tasks(rig)) == 1 and len(_leases(rig)) == 2
    won = _claim(rig)
    assert won is not None and won.lease.id == again.id and won.task.id == task.id


def test_a_delivery_between_the_claims_void_and_its_end_mints_the_occasion_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim that takes the mint for dead voids the task's id, then ends the lease: a
    # late delivery in between finds the lease still pending, and its task write loses to
    # the void. It must not answer that lease, whose end is a moment away.
    make_world(rig.svc)
    _rule(rig.svc)
    _dies_before_its_task(rig, monkeypatch)
    [doomed] = _leases(rig)
    rig.clock.advance((2 * ORPHAN_AFTER_MS + MINT_ORPHAN_AFTER_MS) / 1000)
    assert rig.store.void_task(doomed.task_id or "", rig.clock.now_ms() // 1000 + 3600)
    again = _fire(rig.svc)
    assert again.id != doomed.id and again.job_id == successor_job_id(doomed.job_id)
    [task] = _tasks(rig)
    assert task.id == again.task_id
    assert _claim(rig) is not None  # the doomed lease is ended, the new one handed out
    ended = rig.store.get_lease(doomed.id)
    assert ended is not None and ended.state is LeaseState.CANCELLED and ends_orphan(ended)


def test_a_mint_taken_for_dead_twice_is_minted_a_third_time(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    first = _taken_for_dead(rig, monkeypatch)
    second = _taken_for_dead(rig, monkeypatch)  # the redelivery's own mint died as well
    assert second.id != first.id and second.job_id == successor_job_id(first.job_id)
    third = _fire(rig.svc)
    assert third.job_id == successor_job_id(second.job_id)
    assert third.state is LeaseState.PENDING and len(_tasks(rig)) == 1


def test_eight_redeliveries_after_the_mint_was_taken_for_dead_mint_one_lease(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    dead = _taken_for_dead(rig, monkeypatch)
    answers = _race(rig, lambda s: _fire(s).id)
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len(set(answers)) == 1 and answers[0] != dead.id
    [task] = _tasks(rig)
    live = [x for x in _leases(rig) if x.id != dead.id]
    assert [x.id for x in live] == answers[:1] and live[0].task_id == task.id


def test_a_redelivery_after_the_rule_changed_its_subject_finishes_nothing_and_says_so(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The dead delivery's lease was to be a task's: what that task was is the rule's no more.
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    _dies_before(rig, monkeypatch, "lease")
    with pytest.raises(RuntimeError):
        _fire(rig.svc)
    monkeypatch.undo()
    rig.svc.rules.update_rule(ADMIN, rule_id, {"subject": {"kind": "space"}})
    with pytest.raises(Unavailable):
        _fire(rig.svc)
    assert _leases(rig) == [] and _tasks(rig) == []


def test_eight_deliveries_of_one_mail_mint_one_lease_one_task_and_one_job(rig: Rig) -> None:
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    answers = _race(rig, lambda s: _fire(s).id)
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len(set(answers)) == 1
    [lease] = _leases(rig)
    assert lease.id == answers[0]
    [task] = _tasks(rig)
    assert task.id == lease.task_id
    job = rig.store.get_job(firing_job_id(rule_id, email_occasion("msg-1")))
    assert job is not None and job.lease_id == lease.id and job.task_id == task.id


def test_eight_redeliveries_after_a_death_before_the_lease_finish_it_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    _dies_before(rig, monkeypatch, "lease")
    with pytest.raises(RuntimeError):
        _fire(rig.svc)
    monkeypatch.undo()
    job = rig.store.get_job(firing_job_id(rule_id, email_occasion("msg-1")))
    assert job is not None
    answers = _race(rig, lambda s: _fire(s).id)
    assert answers == [job.lease_id] * THREADS, answers
    assert [x.id for x in _leases(rig)] == [job.lease_id]
    assert [t.id for t in _tasks(rig)] == [job.task_id]


def test_a_scheduled_occasion_whose_delivery_died_after_its_job_is_finished_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    rig.svc.rules.schedules = NoSchedules()
    rule = rig.svc.rules.create_rule(
        ADMIN, SPACE, "nightly", ALPHA, {"kind": "space"}, {"schedule": "rate(1 day)"}
    )
    at = datetime.fromtimestamp(rig.clock.now_ms() // 60_000 * 60, UTC)
    _dies_before(rig, monkeypatch, "lease")
    with pytest.raises(RuntimeError):
        rig.svc.firings.fire_scheduled(rule.id, at)
    monkeypatch.undo()
    answers = _race(rig, lambda s: getattr(s.firings.fire_scheduled(rule.id, at), "id", None))
    assert len(set(answers)) == 1 and answers[0] is not None, answers
    [lease] = _leases(rig)
    assert lease.id == answers[0] and lease.tp is None  # a space subject has no task to wait for


def test_below_the_schema_version_a_firing_keeps_its_transaction_and_no_mark(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An earlier release takes a firing's job for proof that its lease exists: until the
    # table is migrated, the job, the lease and the task land together.
    make_world(rig.svc)
    _rule(rig.svc)
    rig.store.save_schema(rig.store.schema_state(), SchemaState(version=RULE_MINTS_FROM_SCHEMA - 1))
    rig.clock.advance(60)  # past the service's cached schema version
    puts, transactions = watch_writes(rig, monkeypatch)
    lease = _fire(rig.svc)
    assert (puts, transactions) == ([], [3])
    stored = rig.store.get_lease(lease.id)
    assert stored is not None and stored.tp is None
    assert _fire(rig.svc).id == lease.id


@pytest.mark.parametrize("window", [0, 86_400])
def test_a_scheduled_occasion_taken_for_dead_is_minted_again_by_a_late_delivery_in_its_window(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    # Scheduler's dead-letter queue redriven after the hour. The occasion's run was never
    # noted (its invocation died before): within the rule's catch-up window the late delivery
    # mints it under a new job; past it, the occasion is missed, as any late one is.
    make_world(rig.svc)
    rig.svc.rules.schedules = NoSchedules()
    subject = {"kind": "task", "title": "nightly report"}
    rule = rig.svc.rules.create_rule(
        ADMIN,
        SPACE,
        "nightly",
        ALPHA,
        subject,
        {"schedule": "rate(1 day)"},
        catchup_window_seconds=window,
    )
    at = datetime.fromtimestamp(rig.clock.now_ms() // 60_000 * 60, UTC)
    _dies_before(rig, monkeypatch, "task")
    with pytest.raises(RuntimeError):
        rig.svc.firings.fire_scheduled(rule.id, at)
    monkeypatch.undo()
    rig.clock.advance((2 * ORPHAN_AFTER_MS + MINT_ORPHAN_AFTER_MS) / 1000)
    assert _claim(rig) is None  # taken for dead
    [dead] = _leases(rig)
    assert ends_orphan(dead) and dead.state is LeaseState.CANCELLED
    again = rig.svc.firings.fire_scheduled(rule.id, at)
    if not window:
        assert again is None and _tasks(rig) == [] and len(_leases(rig)) == 1
        return
    assert isinstance(again, Lease) and again.id != dead.id
    assert again.job_id == successor_job_id(dead.job_id)
    [task] = _tasks(rig)
    assert task.id == again.task_id and task.title == "nightly report"
    later = rig.svc.firings.fire_scheduled(rule.id, at)
    assert isinstance(later, Lease) and later.id == again.id
