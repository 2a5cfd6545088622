"""The history checker on hand-made histories: each property is shown to hold and to fail."""

from __future__ import annotations

from typing import Any

from tests.reliability import checker
from tests.reliability.history import (
    Exchange,
    Hold,
    LeaseTruth,
    Op,
    TaskTruth,
    Truth,
    derive,
)

T0 = 1_700_000_000.0


def lease(
    lease_id: str,
    fence: int,
    state: str,
    task: str = "task_a",
    job: str = "job_a",
    created: float = T0,
    ended: float | None = None,
    end_reason: str | None = None,
    outcome: str | None = None,
) -> LeaseTruth:
    if ended is None and state not in ("pending", "dispatched", "running"):
        ended = created + 1
    return LeaseTruth(lease_id, task, job, fence, state, end_reason, outcome, created, ended)


def ev(type_: str, lease_id: str, fence: int, at: float = T0) -> dict[str, Any]:
    return {"type": type_, "at": at, "lease_id": lease_id, "fence": fence, "data": {}}


def truth(leases: list[LeaseTruth], tasks: list[TaskTruth]) -> Truth:
    return Truth(tasks={t.id: t for t in tasks}, leases={x.id: x for x in leases})


def op(kind: str, lease_id: str, start: float, status: int | None, **kw: Any) -> Op:
    fields: dict[str, Any] = {"worker": "w1", "fate": "delivered", "task_id": "task_a"}
    fields.update(kw)
    return Op(kind=kind, lease_id=lease_id, start=start, end=start + 0.1, status=status, **fields)


# A clean history: lease 1 expired (lost), lease 2 (fence 2) completed.
CLEAN = truth(
    [
        lease("l1", 1, "lost", created=T0, ended=T0 + 10, end_reason="expired"),
        lease("l2", 2, "completed", created=T0 + 10, ended=T0 + 15, outcome="success"),
    ],
    [
        TaskTruth(
            "task_a",
            "completed",
            [
                ev("lease.created", "l1", 1),
                ev("lease.lost", "l1", 1),
                ev("lease.created", "l2", 2),
                ev("lease.stale_report", "l1", 1),
                ev("lease.completed", "l2", 2),
            ],
        )
    ],
)


def test_a_clean_history_passes_every_check() -> None:
    ops = [
        op("claim", "l1", T0, 200, fence=1),
        op("claim", "l2", T0 + 10.5, 200, fence=2),
        op("complete", "l1", T0 + 12, 409, code="stale_lease"),
        op("complete", "l2", T0 + 14, 200),
    ]
    holds = [
        Hold("w1", "l1", "task_a", 1, T0, T0 + 6),
        Hold("w2", "l2", "task_a", 2, T0 + 10.5, T0 + 14),
    ]
    assert checker.check(ops, holds, CLEAN, ["task_a"]) == []


def test_a_fence_that_does_not_grow_is_a_violation() -> None:
    bad = truth(
        [lease("l1", 2, "lost", created=T0), lease("l2", 2, "completed", created=T0 + 10)],
        [TaskTruth("task_a", "completed")],
    )
    found = checker.fences_increase([], bad)
    assert len(found) == 1 and "fence 2" in found[0]


def test_a_claim_answer_with_an_older_fence_than_an_earlier_claim_is_a_violation() -> None:
    ops = [
        op("claim", "l2", T0, 200, fence=2),
        op("claim", "l1", T0 + 1, 200, fence=1),
    ]
    found = checker.fences_increase(ops, CLEAN)
    assert any("claimed with fence 1 after" in f for f in found), found


def test_a_timeline_that_creates_fences_out_of_order_is_a_violation() -> None:
    bad = truth(
        list(CLEAN.leases.values()),
        [
            TaskTruth(
                "task_a", "completed", [ev("lease.created", "l2", 2), ev("lease.created", "l1", 1)]
            )
        ],
    )
    assert any("timeline creates fence 1" in f for f in checker.fences_increase([], bad))


def test_two_holders_acting_at_once_is_a_violation() -> None:
    holds = [
        Hold("w1", "l1", "task_a", 1, T0, T0 + 11),
        Hold("w2", "l2", "task_a", 2, T0 + 10.5, T0 + 14),
    ]
    found = checker.holders_do_not_overlap(holds)
    assert len(found) == 1 and "both acted for 0.50s" in found[0]


def test_an_overlap_within_the_bound_is_not_a_violation() -> None:
    holds = [
        Hold("w1", "l1", "task_a", 1, T0, T0 + 10.6),
        Hold("w2", "l2", "task_a", 2, T0 + 10.5, T0 + 14),
    ]
    assert checker.holders_do_not_overlap(holds, bound=0.25) == []


def test_a_task_that_ends_twice_is_a_violation() -> None:
    bad = truth(
        [
            lease("l1", 1, "failed", created=T0),
            lease("l2", 2, "completed", created=T0 + 10, outcome="success"),
        ],
        [TaskTruth("task_a", "completed")],
    )
    found = checker.tasks_end_once(bad, ["task_a"])
    assert any("ended 2 times" in f for f in found), found


def test_a_task_that_never_ends_is_a_violation() -> None:
    bad = truth([lease("l1", 1, "running")], [TaskTruth("task_a", "running")])
    found = checker.tasks_end_once(bad, ["task_a"])
    assert any("never ended" in f for f in found) and any("ended 0 times" in f for f in found)


def test_a_task_status_that_contradicts_its_lease_is_a_violation() -> None:
    bad = truth(
        [lease("l1", 1, "completed", outcome="success")],
        [TaskTruth("task_a", "failed", [ev("lease.completed", "l1", 1)])],
    )
    found = checker.tasks_end_once(bad, ["task_a"])
    assert found == ["task task_a: lease l1 ended completed (success) but the task is failed"]


def test_an_acknowledged_completion_that_is_lost_is_a_violation() -> None:
    # The service answered 200 to complete on l1, yet l1 ended lost.
    ops = [op("complete", "l1", T0 + 5, 200, fate="dropped")]
    found = checker.acknowledged_reports_kept(ops, CLEAN)
    assert len(found) == 1 and "ended lost" in found[0]


def test_an_acknowledged_release_must_leave_the_lease_released() -> None:
    ok = truth(
        [lease("l1", 1, "cancelled", end_reason="released")], [TaskTruth("task_a", "completed")]
    )
    assert checker.acknowledged_reports_kept([op("release", "l1", T0, 200)], ok) == []
    assert checker.acknowledged_reports_kept([op("fail", "l1", T0, 200)], ok) != []


def test_a_heartbeat_acknowledged_after_the_lease_was_lost_is_a_violation() -> None:
    ops = [op("heartbeat", "l1", T0 + 11, 200, batched=True)]
    found = checker.acknowledged_reports_kept(ops, CLEAN)
    assert len(found) == 1 and "after the lease ended lost" in found[0]


def test_a_stale_report_that_was_accepted_is_a_violation() -> None:
    ops = [op("fail", "l1", T0 + 12, 409, code="invalid_transition")]
    found = checker.stale_reports_refused(ops, CLEAN)
    assert len(found) == 1 and "answered 409 invalid_transition" in found[0]


def test_a_stale_refusal_missing_from_the_timeline_is_a_violation() -> None:
    ops = [
        op("complete", "l1", T0 + 12, 409, code="stale_lease"),
        op("heartbeat", "l1", T0 + 13, 409, code="stale_lease"),
    ]
    found = checker.stale_reports_refused(ops, CLEAN)
    assert found == [
        "lease l1: 2 reports refused as stale, 1 recorded on the timeline of task task_a"
    ]


def test_a_report_racing_the_expiry_or_unanswered_is_no_verdict() -> None:
    ops = [
        op("complete", "l1", T0 + 9.9, 409, code="invalid_transition"),  # sent before the end
        op("complete", "l1", T0 + 12, None, fate="cut"),
        op("complete", "l1", T0 + 12, 503, code="unavailable"),
    ]
    assert checker.stale_reports_refused(ops, CLEAN) == []


def test_derive_splits_a_batched_heartbeat_into_one_operation_per_lease() -> None:
    claim = Exchange(
        "w1",
        "POST",
        "/api/v1/pools/p/claim",
        T0,
        T0 + 0.1,
        "dropped",
        200,
        {"worker_id": "w1"},
        {"lease": {"id": "l1", "task": {"id": "task_a"}}, "fence": 1, "token": "[redacted]"},
    )
    beat = Exchange(
        "w1",
        "POST",
        "/api/v1/workers/w1/heartbeat",
        T0 + 1,
        T0 + 1.1,
        "delivered",
        200,
        {"leases": [{"id": "l1", "fence": 1}, {"id": "l0", "fence": 3}]},
        {
            "leases": [
                {"id": "l1", "state": "running"},
                {"id": "l0", "error": {"code": "stale_lease", "message": "moved on"}},
            ]
        },
    )
    done = Exchange(
        "w1", "POST", "/api/v1/leases/l1/complete", T0 + 2, T0 + 2.1, "delivered", 200, {}, {}
    )
    ops = derive([done, beat, claim], {})
    assert [(o.kind, o.lease_id, o.status, o.code) for o in ops] == [
        ("claim", "l1", 200, None),
        ("heartbeat", "l1", 200, None),
        ("heartbeat", "l0", 409, "stale_lease"),
        ("complete", "l1", 200, None),
    ]
    assert ops[0].fence == 1 and ops[3].task_id == "task_a" and ops[3].outcome == "success"
    assert ops[0].fate == "dropped"
