"""Cancelling a task: it reads cancelled at once, its pending run ends and its held run is
asked to stop, and `task.cancelled` records who and why; with `subtree` every descendant
follows, a bounded number per request and the rest by the stream's walk; a cancelled task
never opens or hands out a run again. What it refuses: a terminal task, a bad reason, a
token of another space, agents."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.leases.handover import NextClaim
from tenure.app.tasks import cancel as cancel_module
from tenure.app.tasks.filing import TaskLinks
from tenure.domain.errors import (
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    ValidationFailed,
)
from tenure.domain.events import GraphMoved
from tenure.domain.model import Principal
from tenure.domain.states import LeaseState, ReportKind, Revoke

from tests.unit.support import MEMBER, POOL, READER, SPACE, WORKER, Rig, as_lease
from tests.unit.test_api_graph import http  # noqa: F401  (the fixture)

WHY = "the release was called off"


def _status(rig: Rig, task_id: str) -> str:
    return rig.svc.graph.get_task(MEMBER, task_id).status.value


def _tree(rig: Rig, children: int, grandchildren: int = 0) -> tuple[str, list[str], list[str]]:
    top, _ = rig.task(pool=None)
    kids = [rig.task(links=TaskLinks(parent_id=top.id))[0].id for _ in range(children)]
    grand = [rig.task(links=TaskLinks(parent_id=kids[-1]))[0].id for _ in range(grandchildren)]
    return top.id, kids, grand


def test_a_queued_task_reads_cancelled_at_once_and_its_lease_is_never_claimed(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    done = rig.svc.cancellation.cancel(MEMBER, task.id, WHY, False)
    assert (done.cancelled, done.remaining) == (1, 0)
    assert _status(rig, task.id) == "cancelled"
    assert rig.lease(lease.id).state is LeaseState.CANCELLED
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    (event,) = [e for e in rig.events(task.id) if e.type == "task.cancelled"]
    assert event.data["by"] == MEMBER.token_id and event.data["reason"] == WHY
    assert event.data["actor_kind"] == "operator"


def test_a_running_task_is_asked_to_stop_and_its_completion_does_not_complete_it(
    rig: Rig,
) -> None:
    running = rig.running()
    task_id = str(running.task_id)
    rig.svc.cancellation.cancel(MEMBER, task_id, WHY, False)
    held = rig.lease(running.id)
    assert (held.state, held.revoke) == (LeaseState.CANCELLING, Revoke.CANCEL)
    assert _status(rig, task_id) == "cancelled"
    beat = rig.svc.reports.heartbeat(as_lease(running.id), running.id, None)
    assert beat.lease.revoke is Revoke.CANCEL
    rig.svc.reports.complete(as_lease(running.id), running.id, {"outcome": "success"})
    assert rig.lease(running.id).state is LeaseState.CANCELLED
    assert _status(rig, task_id) == "cancelled"
    assert rig.types(task_id).count("task.cancelled") == 1
    assert "task.rollup_completed" not in rig.types(task_id)


def test_a_held_run_whose_worker_goes_silent_ends_cancelled_not_requeued(rig: Rig) -> None:
    running = rig.running()
    rig.svc.cancellation.cancel(MEMBER, str(running.task_id), WHY, False)
    rig.advance(3600)
    rig.sweep()
    assert rig.lease(running.id).state is LeaseState.CANCELLED
    assert rig.svc.claims.claim(WORKER, POOL, "w2", None, 0, None) is None


def test_a_terminal_task_is_an_invalid_transition_and_so_is_a_second_cancel(rig: Rig) -> None:
    running = rig.running()
    rig.svc.reports.complete(as_lease(running.id), running.id, {"outcome": "success"})
    with pytest.raises(InvalidTransition):
        rig.svc.cancellation.cancel(MEMBER, str(running.task_id), WHY, False)
    task, _ = rig.task()
    rig.svc.cancellation.cancel(MEMBER, task.id, WHY, False)
    with pytest.raises(InvalidTransition):
        rig.svc.cancellation.cancel(MEMBER, task.id, WHY, True)
    assert rig.types(task.id).count("task.cancelled") == 1


@pytest.mark.parametrize("reason", ["", "x" * 501, "uses tnr_l_" + "a" * 40])
def test_a_bad_reason_is_refused_and_nothing_changes(rig: Rig, reason: str) -> None:
    task, lease = rig.task()
    assert lease is not None
    with pytest.raises(ValidationFailed):
        rig.svc.cancellation.cancel(MEMBER, task.id, reason, False)
    assert _status(rig, task.id) == "queued"


@pytest.mark.parametrize(
    "who",
    [
        READER,
        WORKER,
        Principal(kind="operator", token_id="tok-else", role="admin", spaces=("ELSE",)),
    ],
    ids=["read-role", "worker", "another-space"],
)
def test_who_may_not_cancel_is_refused_and_nothing_changes(rig: Rig, who: Principal) -> None:
    task, _ = rig.task()
    with pytest.raises(Forbidden):
        rig.svc.cancellation.cancel(who, task.id, WHY, False)
    assert _status(rig, task.id) == "queued"


def test_a_lease_token_may_not_cancel_even_its_own_task(rig: Rig) -> None:
    won = rig.claimed()
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.cancellation.cancel(as_lease(won.lease.id), str(won.lease.task_id), WHY, False)
    assert rig.lease(won.lease.id).state is LeaseState.DISPATCHED


def test_a_cancelled_task_opens_no_run_and_takes_no_child(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    rig.svc.cancellation.cancel(MEMBER, task.id, WHY, False)
    with pytest.raises(InvalidTransition):
        rig.svc.filing.enqueue(MEMBER, task.id, POOL)
    with pytest.raises(InvalidTransition):
        rig.task(links=TaskLinks(parent_id=task.id))
    assert rig.svc.graph.auto_enqueue(task.id, pool=POOL) is None


def test_a_cancelled_tasks_ended_run_is_not_retried(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    rig.svc.cancellation.cancel(MEMBER, task.id, WHY, False)
    with pytest.raises(InvalidTransition):
        rig.svc.force.retry(MEMBER, lease.id)


def test_without_subtree_the_children_go_on(rig: Rig) -> None:
    top, kids, _ = _tree(rig, 2)
    done = rig.svc.cancellation.cancel(MEMBER, top, WHY, False)
    assert (done.cancelled, done.remaining) == (1, 0)
    assert [_status(rig, k) for k in kids] == ["queued", "queued"]
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is not None


def test_a_subtree_cancel_reaches_every_descendant_and_leaves_ended_ones_be(rig: Rig) -> None:
    top, kids, grand = _tree(rig, 3, 2)
    done_kid = rig.claim()  # the oldest queued lease: the first child
    rig.svc.reports.complete(as_lease(done_kid.lease.id), done_kid.lease.id, {"outcome": "success"})
    reactor, rig.store.reactor = rig.store.reactor, None  # what the request does by itself
    done = rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    rig.store.reactor = reactor
    assert done.cancelled == 5 and done.remaining == 0  # the top, 2 children, 2 grandchildren
    assert _status(rig, str(done_kid.lease.task_id)) == "completed"
    for task_id in [top, *kids[1:], *grand]:
        assert _status(rig, task_id) == "cancelled", task_id
        (event,) = [e for e in rig.events(task_id) if e.type == "task.cancelled"]
        assert event.data["reason"] == WHY and event.data["by"] == MEMBER.token_id
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    assert rig.store.get_scheduler().cancelled == frozenset()  # the walk is over


def test_a_request_reaches_a_bounded_number_and_the_stream_reaches_the_rest(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, kids, grand = _tree(rig, 7, 3)
    monkeypatch.setattr(cancel_module, "CANCEL_BUDGET", 4)
    monkeypatch.setattr(cancel_module, "WALK_PAGE", 2)
    reactor, rig.store.reactor = rig.store.reactor, None  # the stream is late
    done = rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    assert done.cancelled == 4  # the top and three children: the request's bound
    assert done.remaining == 7 - 3
    # Not reached yet, and still read cancelled and held back from every claim.
    late = [k for k in kids if rig.store.get_task(k).cancelled is None]  # type: ignore[union-attr]
    assert len(late) == 4
    assert all(_status(rig, t) == "cancelled" for t in [*late, *grand])
    assert rig.store.get_scheduler().cancelled == frozenset({top})
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    rig.store.reactor = reactor
    for task_id in [top, *kids]:  # the stream delivers the rows the request marked
        rig.svc.cancellation.continue_walk(
            GraphMoved(None, rig.store.get_graph(task_id)), rig.svc.reactions.context()
        )
    for task_id in [*kids, *grand]:
        task = rig.store.get_task(task_id)
        assert task is not None and task.cancelled is not None, task_id
        assert task.cancelled["root"] == top
    assert rig.store.get_scheduler().cancelled == frozenset()


def test_a_descendant_under_a_walk_in_progress_cannot_be_cancelled_again(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, kids, _ = _tree(rig, 3)
    monkeypatch.setattr(cancel_module, "CANCEL_BUDGET", 1)
    rig.store.reactor = None
    rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    with pytest.raises(InvalidTransition):
        rig.svc.cancellation.cancel(MEMBER, kids[2], WHY, False)


def test_the_space_of_the_task_is_the_scope(rig: Rig) -> None:
    task, _ = rig.task()
    mine = Principal(kind="operator", token_id="tok-ops", role="member", spaces=(SPACE,))
    assert rig.svc.cancellation.cancel(mine, task.id, WHY, False).cancelled == 1


def test_the_route_answers_202_then_409_and_refuses_a_bad_body(http: Any) -> None:  # noqa: F811
    made = http("POST", "/tasks", {"space": SPACE, "title": "t", "pool": POOL})
    task_id = made.data["task"]["id"]
    for body in ({"reason": ""}, {"reason": "x" * 501}, {}, {"reason": "ok", "extra": 1}):
        bad = http("POST", f"/tasks/{task_id}/cancel", body)
        assert (bad.status, bad.code) == (422, "validation_failed"), body
    done = http("POST", f"/tasks/{task_id}/cancel", {"reason": WHY, "subtree": True})
    assert (done.status, done.data) == (202, {"cancelled": 1, "remaining": 0})
    read = http("GET", f"/tasks/{task_id}", actor=READER)
    assert read.data["task"]["status"] == "cancelled"
    again = http("POST", f"/tasks/{task_id}/cancel", {"reason": WHY})
    assert (again.status, again.code) == (409, "invalid_transition")
    missing = http("POST", "/tasks/task_nope/cancel", {"reason": WHY})
    assert missing.status == 404


def test_a_claim_that_read_the_gate_before_a_subtree_cancel_hands_nothing_out(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, kids, grand = _tree(rig, 2, 1)
    before = rig.store.get_scheduler()  # what a claim read just before the top's commit
    monkeypatch.setattr(cancel_module, "CANCEL_BUDGET", 1)  # the request reaches the top only
    reactor, rig.store.reactor = rig.store.reactor, None  # and the stream is late
    rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    monkeypatch.setattr(rig.svc.gate, "read", lambda: before)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    for task_id in [*kids, *grand]:
        task = rig.store.get_task(task_id)
        assert task is not None and task.cancelled is not None, task_id
        assert task.cancelled["root"] == top
        lease = rig.svc.kernel.newest_lease(task)
        assert lease is not None and lease.state is LeaseState.CANCELLED, task_id
        assert lease.claimed_at is not None  # claimed, then withdrawn by its own claimer
    rig.store.reactor = reactor
    for task_id in [top, *kids]:  # the walk comes by later and finds them reached
        rig.svc.cancellation.continue_walk(
            GraphMoved(None, rig.store.get_graph(task_id)), rig.svc.reactions.context()
        )
    for task_id in [*kids, *grand]:
        ends = [e.type for e in rig.events(task_id) if e.type in ("task.cancelled",)]
        assert ends == ["task.cancelled"], task_id
        stops = [e.type for e in rig.events(task_id) if e.type == "lease.cancelled"]
        assert stops == ["lease.cancelled"], task_id
    assert rig.store.get_scheduler().cancelled == frozenset()


def test_a_claim_of_a_task_with_no_parent_reads_no_graph_row(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.task()
    asked: list[list[str]] = []
    real = rig.store.get_graphs
    monkeypatch.setattr(
        rig.store, "get_graphs", lambda ids, consistent=False: asked.append(ids) or real(ids)
    )
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is not None
    assert asked == []
    top, _, _ = _tree(rig, 1)
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is not None
    assert asked == [[top]]


def test_an_exact_claim_withdrawn_under_a_subtree_cancel_says_the_lease_ended(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, kids, _ = _tree(rig, 1)
    lease = rig.svc.kernel.newest_lease(rig.store.get_task(kids[0]))  # type: ignore[arg-type]
    assert lease is not None
    before = rig.store.get_scheduler()
    monkeypatch.setattr(cancel_module, "CANCEL_BUDGET", 1)  # the request reaches the top only
    rig.store.reactor = None
    rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    assert rig.lease(lease.id).state is LeaseState.PENDING  # not reached yet
    monkeypatch.setattr(rig.svc.gate, "read", lambda: before)
    with pytest.raises(InvalidTransition, match="is cancelled"):
        rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, lease_id=lease.id)
    assert rig.lease(lease.id).state is LeaseState.CANCELLED


def _withdrawn_under_a_late_gate(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A child's lease (first in the queue) whose task a subtree cancel has just reached
    through its top only, a free lease of another task behind it, and claims that read the
    scheduler row before that cancel: the child's lease is claimed and then withdrawn."""
    top, kids, _ = _tree(rig, 1)
    withdrawn = rig.svc.kernel.newest_lease(rig.store.get_task(kids[0]))  # type: ignore[arg-type]
    _, free = rig.task()
    assert withdrawn is not None and free is not None
    before = rig.store.get_scheduler()
    monkeypatch.setattr(cancel_module, "CANCEL_BUDGET", 1)  # the request reaches the top only
    rig.store.reactor = None  # and the stream is late
    rig.svc.cancellation.cancel(MEMBER, top, WHY, True)
    monkeypatch.setattr(rig.svc.gate, "read", lambda: before)
    return withdrawn.id, free.id


@pytest.mark.parametrize("wait", [0, 2])
def test_a_claim_id_whose_first_lease_was_withdrawn_takes_the_next_and_a_retry_finds_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, wait: float
) -> None:
    withdrawn, free = _withdrawn_under_a_late_gate(rig, monkeypatch)
    won = rig.svc.claims.claim(WORKER, POOL, "w1", None, wait, None, claim_id="c1")
    assert rig.lease(withdrawn).state is LeaseState.CANCELLED
    assert rig.lease(withdrawn).claim_ref is None  # no longer this claim's own
    assert won is not None and won.lease.id == free
    record = rig.store.find_claim(POOL, WORKER.token_id, "w1", "c1")
    assert record is not None and record.lease_id == free
    again = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="c1")
    assert again is not None and again.lease.id == free and again.token != won.token


def test_a_withdrawn_lease_still_held_is_never_handed_to_a_retry(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    withdrawn, free = _withdrawn_under_a_late_gate(rig, monkeypatch)
    monkeypatch.setattr(cancel_module, "CANCEL_TRIES", 0)  # its holder's end never lands
    answers = [
        rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="c1") for _ in range(3)
    ]
    assert rig.lease(withdrawn).state is not LeaseState.PENDING  # claimed, not ended
    assert all(a is None or a.lease.id != withdrawn for a in answers)
    monkeypatch.setattr(cancel_module, "CANCEL_TRIES", 3)
    last = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None, claim_id="c1")
    assert rig.lease(withdrawn).state is LeaseState.CANCELLED
    assert last is not None and last.lease.id == free


def test_a_report_whose_next_claim_was_withdrawn_takes_the_next_and_its_replay_finds_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = rig.running()
    withdrawn, free = _withdrawn_under_a_late_gate(rig, monkeypatch)
    ask = NextClaim(worker_id="w1", claim_id="next-1")
    done = {"outcome": "success"}
    kind = ReportKind.COMPLETE
    ended, won = rig.svc.handover.report_then_claim(WORKER, running.id, kind, done, ask)
    assert ended.state is LeaseState.COMPLETED
    assert rig.lease(withdrawn).state is LeaseState.CANCELLED
    assert won is not None and won.lease.id == free
    _, replayed = rig.svc.handover.report_then_claim(WORKER, running.id, kind, done, ask)
    assert replayed is not None and replayed.lease.id == free
