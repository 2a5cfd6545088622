"""Attacks on a rule's mint written one row at a time, on DynamoDB Local: what an operator,
a claim and the sweeper may do to a mint a delivery left half done, and what a mail replayed
late finds. Whatever they do in between, the occasion keeps one lease, and the redelivery
never revives a lease that was ended or hands out a second one.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tenure import wiring
from tenure.domain.rules.rule import email_occasion, firing_job_id
from tenure.domain.states import LeaseState
from tenure_cli.local import lambda_host
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import SPACE, make_world
from tests.conformance.test_rule_mints import (
    _claim,
    _dies_before,
    _dies_before_its_task,
    _fire,
    _leases,
    _rule,
)
from tests.conformance.test_untransacted_filing import watch_writes
from tests.conftest import ADMIN, Rig, lease_principal


def _task_statuses(rig: Rig) -> list[str]:
    found = rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks
    return [str(t.view.status) for t in found]


@pytest.mark.parametrize("end", ["cancel", "force_fail"])
def test_an_operator_ending_a_mint_s_taskless_lease_stays_ended_after_the_redelivery(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    # The delivery died before its task: an operator sees the marked lease (GET /leases) and
    # ends it. The redelivery writes the task the job names and answers that ended lease: no
    # second lease, nothing claimable, and the task reads as its lease ended.
    make_world(rig.svc)
    _rule(rig.svc)
    _dies_before_its_task(rig, monkeypatch)
    [half] = _leases(rig)
    assert half.state is LeaseState.PENDING and half.tp is True
    if end == "cancel":
        rig.svc.operator.cancel(ADMIN, half.id)
        want = LeaseState.CANCELLED
    else:
        [row] = rig.svc.force.bulk_fail(ADMIN, [half.id], "not wanted")
        assert row.ok, row
        want = LeaseState.FAILED
    again = _fire(rig.svc)
    assert again.id == half.id and again.state is want
    assert [(x.id, x.state) for x in _leases(rig)] == [(half.id, want)]
    assert _claim(rig) is None
    assert _task_statuses(rig) == [want.value], "the task reads as its lease ended"


def test_a_mint_left_at_its_job_is_invisible_and_untouched_until_its_redelivery(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the job landed: nothing to list, to claim or to sweep, however long it waits;
    # the redelivery then mints the one lease the job names.
    make_world(rig.svc)
    rule_id = _rule(rig.svc)
    _dies_before(rig, monkeypatch, "lease")
    with pytest.raises(RuntimeError):
        _fire(rig.svc)
    monkeypatch.undo()
    job = rig.store.get_job(firing_job_id(rule_id, email_occasion("msg-1")))
    assert job is not None
    rig.clock.advance(3600)
    rig.svc.sweep.once()
    assert _claim(rig) is None
    assert _leases(rig) == [] and _task_statuses(rig) == []
    lease = _fire(rig.svc)
    assert lease.id == job.lease_id
    assert [x.id for x in _leases(rig)] == [lease.id]
    won = _claim(rig)
    assert won is not None and won.lease.id == lease.id


def test_a_mail_replayed_after_its_lease_completed_answers_that_lease_and_writes_nothing(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    first = _fire(rig.svc)
    won = _claim(rig)
    assert won is not None
    done = rig.svc.reports.complete(lease_principal(first.id), first.id, {"outcome": "success"})
    assert done.state is LeaseState.COMPLETED
    puts, transactions = watch_writes(rig, monkeypatch)
    again = _fire(rig.svc)
    assert again.id == first.id and again.state is LeaseState.COMPLETED
    assert (puts, transactions) == ([], [])
    assert [x.id for x in _leases(rig)] == [first.id]
    assert _claim(rig) is None


def test_what_an_operator_reads_of_a_taskless_mint_is_a_waiting_lease_and_no_task(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the HTTP API: the lease is listed and read as pending (its task named, not
    # there yet), the task reads as unknown and is listed nowhere; nothing fails.
    make_world(rig.svc)
    _rule(rig.svc)
    _dies_before_its_task(rig, monkeypatch)
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)
    _, raw = rig.svc.tokens.create_token(ADMIN, "reader", "operator", "read", None, None)
    [half] = _leases(rig)

    def get(path: str) -> tuple[int, Any]:
        head = {"host": "unit", "authorization": f"Bearer {raw}"}
        out = lambda_host.invoke(to_event("GET", f"/api/v1{path}", head, b""))
        return out["statusCode"], json.loads(out.get("body") or "null")

    status, lease = get(f"/leases/{half.id}")
    assert (status, lease["state"], lease["task"]["id"]) == (200, "pending", half.task_id)
    status, listed = get(f"/leases?space={SPACE}")
    assert status == 200 and [x["id"] for x in listed["leases"]] == [half.id]
    status, missing = get(f"/tasks/{half.task_id}")
    assert (status, missing["error"]["code"]) == (404, "task_not_found")
    assert get(f"/tasks?space={SPACE}") == (200, {"tasks": [], "next_cursor": None})


# SQS hands a message whose delivery died to the inbound function again only after the
# queue's visibility timeout (infra/template.yaml InboundQueue), and a schedule's invocation is
# retried for up to an hour: a claim that takes a taskless mint for dead sooner voids the task
# its redelivery would have written, and the mail's work is never filed.
REDELIVERY_AFTER_S = 60


def test_a_mail_whose_delivery_died_before_its_task_is_filed_by_its_redelivery(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_world(rig.svc)
    _rule(rig.svc)
    _dies_before_its_task(rig, monkeypatch)
    for _ in range(REDELIVERY_AFTER_S // 15):  # a worker polls the pool meanwhile
        rig.clock.advance(15)
        assert _claim(rig) is None
    again = _fire(rig.svc)
    assert again.state is LeaseState.PENDING, "the mail's lease still waits for its task"
    assert _task_statuses(rig) != [], "the mail's task was filed"
    won = _claim(rig)
    assert won is not None and won.lease.id == again.id
