"""Claim, start and heartbeats: tokens, deadlines and revoke signals."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Collection
from dataclasses import replace

import pytest
from tenure.app.leases.reports import Beat
from tenure.app.ports import Change, LeaseWrite
from tenure.domain.errors import (
    Forbidden,
    InvalidTransition,
    LeaseNotFound,
    LeaseTokenMismatch,
    NotFound,
    StaleLease,
)
from tenure.domain.fencing import DEADLINE_SLACK
from tenure.domain.model import Principal, Worker
from tenure.domain.states import LeaseState, Revoke, TaskStatus
from tenure.wiring import ManualClock

from tests.unit.support import MEMBER, POOL, READER, T0, WORKER, Rig, as_lease


def test_claim_on_an_empty_queue_answers_none_once_wait_seconds_have_passed(rig: Rig) -> None:
    assert rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 5, None) is None
    assert T0 + 5000 <= rig.clock.now_ms() <= T0 + 5500


def test_claim_without_wait_answers_none_at_once(rig: Rig) -> None:
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None) is None
    assert rig.clock.now_ms() == T0


class _EnqueueWhileWaiting(ManualClock):
    """A clock on which a task arrives after the claimer has waited `after` seconds."""

    def __init__(self, rig: Rig, after: float) -> None:
        super().__init__(T0)
        self.rig, self.at = rig, T0 + int(after * 1000)
        self.done = False

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if not self.done and self.now >= self.at:
            self.done = True
            self.rig.task()


def test_claim_with_wait_takes_a_lease_that_arrives_during_the_wait(rig: Rig) -> None:
    clock = _EnqueueWhileWaiting(rig, after=3)
    rig.svc.kernel.clock = clock
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.0", 20, None)
    assert won is not None
    assert won.lease.state is LeaseState.DISPATCHED
    assert T0 + 3000 <= clock.now_ms() < T0 + 4000


def test_claim_dispatches_the_lease_and_shows_the_token_once(rig: Rig) -> None:
    task, lease = rig.task()
    assert lease is not None
    rig.advance(2)
    won = rig.svc.claims.claim(WORKER, POOL, "w1", "1.2.3", 0, None)
    assert won is not None
    got = won.lease
    assert (got.id, got.state, got.fence, got.attempt) == (lease.id, LeaseState.DISPATCHED, 1, 1)
    assert (got.worker_id, got.worker_version, got.claimed_at) == ("w1", "1.2.3", T0 + 2000)
    assert won.token.startswith(f"tnr_l_{lease.id}.")
    assert len(won.token.rsplit(".", 1)[1]) >= 22  # >= 128 bits of url-safe base64
    assert got.token_hash == hashlib.sha256(won.token.encode()).hexdigest()
    stored = rig.lease(lease.id)
    assert stored.token_hash == got.token_hash
    assert won.token not in rig.store.everything()
    assert rig.store.queue_candidates(POOL, 10) == []
    assert rig.svc.graph.get_task(READER, task.id).status is TaskStatus.QUEUED
    claimed = rig.events(task.id)[-1]
    assert (claimed.type, claimed.lease_id, claimed.fence) == ("lease.claimed", lease.id, 1)
    assert claimed.data["worker_id"] == "w1"
    assert won.token not in json.dumps(claimed.data)


def test_each_claim_mints_a_different_token(rig: Rig) -> None:
    rig.task()
    rig.task()
    one, two = rig.claim("w1"), rig.claim("w2")
    assert one.token != two.token
    assert one.lease.token_hash != two.lease.token_hash


def test_claim_sets_the_deadline_from_the_pools_toleration_or_lease_seconds(rig: Rig) -> None:
    rig.task()
    rig.task()
    plain = rig.claim("w1")
    assert plain.lease.lease_seconds == 300
    assert plain.lease.deadline == T0 + 450_000
    assert plain.lease.due_at == plain.lease.deadline
    short = rig.claim("w2", lease_seconds=20)
    assert short.lease.lease_seconds == 20
    assert rig.lease(short.lease.id).deadline == T0 + 30_000


def test_claim_takes_the_oldest_pending_lease_first(rig: Rig) -> None:
    _, first = rig.task()
    rig.advance(1)
    _, second = rig.task()
    assert first is not None and second is not None
    assert rig.claim("w1").lease.id == first.id
    assert rig.claim("w2").lease.id == second.id
    assert rig.svc.claims.claim(WORKER, POOL, "w3", None, 0, None) is None


def test_claim_looks_past_a_head_it_cannot_take(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    _, head = rig.task()
    _, second = rig.task()
    assert head is not None and second is not None
    first = head

    class HeadAlreadyTaken:
        """Another worker wins the head between our read and our write."""

        def __init__(self) -> None:
            self.raced = False
            self.real = rig.store.get_lease

        def get_lease(self, lease_id: str, consistent: bool = True) -> object:
            lease = self.real(lease_id, consistent)
            if lease_id == first.id and not self.raced:
                self.raced = True
                rival = self.real(lease_id)
                assert rival is not None
                taken = replace(rival, state=LeaseState.DISPATCHED, worker_id="rival", version=2)
                write = LeaseWrite(taken, expect=(LeaseState.PENDING, 1))
                rig.store.commit(Change(leases=[write]))
            return lease

    # The claim reads leases through its own port, the same store object.
    monkeypatch.setattr(rig.store, "get_lease", HeadAlreadyTaken().get_lease)
    won = rig.svc.claims.claim(WORKER, POOL, "w1", None, 0, None)
    assert won is not None and won.lease.id == second.id
    assert rig.lease(first.id).worker_id == "rival"


def test_claim_from_a_paused_pool_finds_nothing(rig: Rig) -> None:
    rig.store.pools[POOL] = replace(rig.store.pools[POOL], paused=True)
    rig.svc.kernel.catalog._pools.clear()
    rig.task()
    assert rig.svc.claims.claim(WORKER, POOL, "w1", None, 1, None) is None
    assert len(rig.store.queue_candidates(POOL, 10)) == 1


def test_claim_needs_a_worker_token_allowed_in_the_pool(rig: Rig) -> None:
    rig.task()
    other = Principal(kind="worker", token_id="w", pools=("deployers",))
    with pytest.raises(Forbidden):
        rig.svc.claims.claim(other, POOL, "w1", None, 0, None)
    with pytest.raises(Forbidden):
        rig.svc.claims.claim(MEMBER, POOL, "w1", None, 0, None)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.claims.claim(as_lease("x"), POOL, "w1", None, 0, None)
    with pytest.raises(NotFound):
        rig.svc.claims.claim(WORKER, "nope", "w1", None, 0, None)
    assert len(rig.store.queue_candidates(POOL, 10)) == 1


def test_start_moves_a_dispatched_lease_to_running_and_again_changes_nothing(rig: Rig) -> None:
    won = rig.claimed()
    rig.advance(4)
    started = rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    assert (started.state, started.started_at) == (LeaseState.RUNNING, T0 + 4000)
    assert started.deadline == T0 + 4000 + 450_000
    assert rig.lease(won.lease.id).state is LeaseState.RUNNING
    rig.advance(4)
    again = rig.svc.reports.start(as_lease(won.lease.id), won.lease.id)
    assert again == rig.lease(won.lease.id)
    assert again.started_at == T0 + 4000
    assert rig.types(won.lease.task_id or "").count("lease.started") == 1


def test_start_of_a_pending_lease_is_an_invalid_transition(rig: Rig) -> None:
    _, lease = rig.task()
    assert lease is not None
    with pytest.raises(InvalidTransition):
        rig.svc.reports.start(as_lease(lease.id), lease.id)


def test_first_heartbeat_starts_a_dispatched_lease(rig: Rig) -> None:
    won = rig.claimed()
    rig.advance(10)
    beat = rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    assert (beat.lease.state, beat.revoke) == (LeaseState.RUNNING, None)
    stored = rig.lease(won.lease.id)
    assert (stored.state, stored.started_at) == (LeaseState.RUNNING, T0 + 10_000)
    assert stored.deadline == T0 + 10_000 + 450_000
    events = rig.events(won.lease.task_id or "")
    assert (events[-1].type, events[-1].data) == ("lease.started", {"by": "heartbeat"})


def test_steady_heartbeats_write_the_lease_at_most_once_per_slack_of_a_toleration(
    rig: Rig,
) -> None:
    won = rig.claimed()
    me, lid = as_lease(won.lease.id), won.lease.id
    rig.svc.reports.start(me, lid)
    lease_writes: list[int] = []
    for _ in range(90):  # 15 minutes of 10 s heartbeats on a 300 s toleration
        rig.advance(10)
        before = len(rig.store.writes)
        beat = rig.svc.reports.heartbeat(me, lid, None)
        new = rig.store.writes[before:]
        assert new.count("renew") + new.count("commit") <= 1
        assert len(new) <= 1, f"one heartbeat wrote {new}"
        if "renew" in new:
            lease_writes.append(rig.clock.now_ms())
        assert beat.lease.state is LeaseState.RUNNING and beat.revoke is None
        assert rig.lease(lid).deadline >= rig.clock.now_ms() + 300_000  # type: ignore[operator]
    gaps = [b - a for a, b in itertools.pairwise(lease_writes)]
    slack_ms = 300_000 * DEADLINE_SLACK
    assert lease_writes and min(gaps) >= slack_ms
    assert len(lease_writes) <= 900_000 // slack_ms


def test_heartbeat_with_lease_seconds_resets_the_toleration_of_that_lease(rig: Rig) -> None:
    won = rig.claimed()
    me, lid = as_lease(won.lease.id), won.lease.id
    rig.svc.reports.start(me, lid)
    rig.advance(10)
    beat = rig.svc.reports.heartbeat(me, lid, 3600)
    stored = rig.lease(lid)
    assert stored.lease_seconds == 3600
    assert stored.deadline == rig.clock.now_ms() + 5400_000
    assert beat.lease.deadline == stored.deadline


def test_heartbeat_answers_the_revoke_signal_of_each_state(rig: Rig) -> None:
    paused = rig.running("w1")
    cancelled = rig.running("w2")
    killed = rig.running("w3")
    rig.svc.operator.pause(MEMBER, paused.id)
    rig.svc.operator.cancel(MEMBER, cancelled.id)
    rig.svc.operator.kill(MEMBER, killed.id)
    answers = {
        lease.id: rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None).revoke
        for lease in (paused, cancelled, killed)
    }
    assert answers == {
        paused.id: Revoke.PAUSE,
        cancelled.id: Revoke.CANCEL,
        killed.id: Revoke.KILL,
    }
    rig.svc.operator.resume(MEMBER, paused.id)
    assert rig.svc.reports.heartbeat(as_lease(paused.id), paused.id, None).revoke is None


def test_heartbeat_on_a_finished_lease_is_an_invalid_transition(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {"outcome": "success"})
    with pytest.raises(InvalidTransition):
        rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)


def test_heartbeat_on_another_lease_is_a_lease_token_mismatch(rig: Rig) -> None:
    one, two = rig.running("w1"), rig.running("w2")
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.reports.heartbeat(as_lease(one.id), two.id, None)
    with pytest.raises(Forbidden):
        rig.svc.reports.heartbeat(MEMBER, two.id, None)


def test_claim_and_heartbeat_mark_the_worker_seen(rig: Rig) -> None:
    won = rig.claimed("w1")
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None and (seen.last_seen, seen.worker_version) == (T0, "1.0")
    rig.advance(40)
    rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    rig.advance(40)
    rig.svc.reports.heartbeat(as_lease(won.lease.id), won.lease.id, None)
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None and seen.last_seen >= T0 + 40_000


# Long enough after a start (300 s toleration) for a heartbeat to rewrite the deadline: past
# the slack, the stored deadline would fall short of one toleration.
RENEWING_S = int(300 * DEADLINE_SLACK) + 10


def _answers(rig: Rig, worker_id: str, leases: list[tuple[str, int]]) -> dict[str, object]:
    return {
        lid: answer
        for lid, _, answer in rig.svc.reports.worker_heartbeat(WORKER, worker_id, leases)
    }


def test_worker_heartbeat_renews_every_lease_it_holds(rig: Rig) -> None:
    one, two = rig.running("w1"), rig.running("w1")
    rig.advance(RENEWING_S)
    answers = _answers(rig, "w1", [(one.id, one.fence), (two.id, two.fence)])
    for lease in (one, two):
        beat = answers[lease.id]
        assert isinstance(beat, Beat)
        assert (beat.lease.state, beat.revoke) == (LeaseState.RUNNING, None)
        assert rig.lease(lease.id).deadline == T0 + RENEWING_S * 1000 + 450_000


def test_worker_heartbeat_with_a_wrong_fence_marks_that_lease_stale_and_renews_the_others(
    rig: Rig,
) -> None:
    one, two = rig.running("w1"), rig.running("w1")
    rig.advance(RENEWING_S)
    answers = _answers(rig, "w1", [(one.id, one.fence + 1), (two.id, two.fence)])
    assert isinstance(answers[one.id], StaleLease)
    assert answers[one.id].code == "stale_lease"  # type: ignore[attr-defined]
    assert isinstance(answers[two.id], Beat)
    assert rig.lease(two.id).deadline == T0 + RENEWING_S * 1000 + 450_000
    assert rig.lease(one.id).deadline == one.deadline  # not renewed
    assert rig.lease(one.id).state is LeaseState.RUNNING
    stale = [e for e in rig.events(one.task_id or "") if e.type == "lease.stale_report"]
    assert [(e.lease_id, e.data["fence"]) for e in stale] == [(one.id, one.fence + 1)]


def test_worker_heartbeat_refuses_leases_of_another_worker_and_unknown_ones(rig: Rig) -> None:
    mine, theirs = rig.running("w1"), rig.running("w2")
    answers = _answers(rig, "w1", [(mine.id, 1), (theirs.id, 1), ("lease_nope", 1)])
    assert isinstance(answers[mine.id], Beat)
    assert isinstance(answers[theirs.id], StaleLease)
    assert isinstance(answers["lease_nope"], LeaseNotFound)
    assert rig.lease(theirs.id).worker_id == "w2"


def test_worker_heartbeat_answers_revoke_signals(rig: Rig) -> None:
    one, two = rig.running("w1"), rig.running("w1")
    rig.svc.operator.kill(MEMBER, one.id)
    answers = _answers(rig, "w1", [(one.id, 1), (two.id, 1)])
    killed, running = answers[one.id], answers[two.id]
    assert isinstance(killed, Beat) and isinstance(running, Beat)
    assert (killed.revoke, running.revoke) == (Revoke.KILL, None)


def _workers(rig: Rig) -> dict[str, tuple[bool, list[str]]]:
    return {
        view.worker.worker_id: (view.reachable, [x.id for x in view.leases])
        for view in rig.svc.workers.list_workers(READER, POOL)
    }


def test_a_worker_heartbeating_every_renew_is_always_reachable_and_shows_its_leases(
    rig: Rig,
) -> None:
    one, two = rig.running("w1"), rig.running("w1")
    for step in range(60):
        rig.advance(10)
        if step % 2:
            rig.svc.reports.heartbeat(as_lease(one.id), one.id, None)
            rig.svc.reports.heartbeat(as_lease(two.id), two.id, None)
        else:
            rig.svc.reports.worker_heartbeat(WORKER, "w1", [(one.id, 1), (two.id, 1)])
        assert _workers(rig) == {"w1": (True, [one.id, two.id])}


def test_the_worker_heartbeat_writes_last_seen_every_half_grace_and_stays_reachable(
    rig: Rig,
) -> None:
    # Grace 50 s, renewals every 10 s: the batched heartbeat may let last_seen lag by up to
    # half a grace, so it writes the worker row on every third heartbeat, not every second.
    one, two = rig.running("w1"), rig.running("w1")
    writes: list[int] = []
    put = rig.store.note_worker

    def counted(worker: Worker, heard: Collection[str]) -> None:
        writes.append(rig.clock.now_ms())
        put(worker, heard)

    rig.store.note_worker = counted  # type: ignore[method-assign]
    for _ in range(18):
        rig.advance(10)
        rig.svc.reports.worker_heartbeat(WORKER, "w1", [(one.id, 1), (two.id, 1)])
        assert _workers(rig)["w1"] == (True, [one.id, two.id])
    assert len(writes) == 6
    assert {b - a for a, b in itertools.pairwise(writes)} == {30_000}


def test_a_worker_not_heard_from_for_longer_than_grace_is_unreachable(rig: Rig) -> None:
    # Grace 50 s; last_seen may lag the last contact by up to half a grace (coalesced
    # writes), so a worker reads unreachable 50-75 s after its last contact, never earlier.
    lease = rig.running("w1")
    assert (
        rig.svc.claims.claim(WORKER, POOL, "idle", None, 0, None) is None
    )  # a claim is a sign of life
    rig.advance(75)
    assert _workers(rig) == {"idle": (True, []), "w1": (True, [lease.id])}
    rig.advance(1)
    assert _workers(rig) == {"idle": (False, []), "w1": (False, [lease.id])}
    rig.svc.reports.heartbeat(as_lease(lease.id), lease.id, None)
    assert _workers(rig)["w1"] == (True, [lease.id])


def test_a_finished_lease_is_no_longer_listed_under_its_worker(rig: Rig) -> None:
    lease = rig.running("w1")
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    assert _workers(rig) == {"w1": (True, [])}


def test_worker_heartbeat_refuses_a_lease_of_a_pool_the_token_may_not_use(rig: Rig) -> None:
    lease = rig.running("w1")
    narrow = Principal(kind="worker", token_id="w", pools=("deployers",))
    rig.advance(200)
    [(_, _, answer)] = rig.svc.reports.worker_heartbeat(narrow, "w1", [(lease.id, 1)])
    # As a lease that does not exist: the token learns nothing of other pools' leases.
    assert isinstance(answer, LeaseNotFound)
    assert str(answer) == f"lease {lease.id} does not exist"
    assert rig.lease(lease.id).deadline == lease.deadline


class _StaleQueueIndex:
    """The queue index still lists a lease that was claimed (a GSI converges later)."""

    def __init__(self, rig: Rig, ghost: str, reads_until_converged: int) -> None:
        self.rig, self.ghost, self.left = rig, ghost, reads_until_converged
        self.reads = 0
        self.real = rig.store.queue_candidates

    def queue_candidates(
        self, pool: str, limit: int, due_by: int | None = None, priority: int | None = None
    ) -> list[str]:
        self.reads += 1
        fresh = self.real(pool, limit, due_by, priority)
        if self.left > 0:
            self.left -= 1
            return [self.ghost, *fresh][:limit]
        return fresh


def test_a_claim_that_finds_nothing_claimable_does_not_spin_on_a_stale_queue_index(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    ghost = rig.claimed("w1").lease.id  # claimed: no longer claimable, but still indexed
    stale = _StaleQueueIndex(rig, ghost, reads_until_converged=1000)
    monkeypatch.setattr(rig.store, "queue_candidates", stale.queue_candidates)
    assert rig.svc.claims.claim(WORKER, POOL, "w2", None, 0, None) is None
    assert 1 <= stale.reads <= 5, f"a claim with wait_seconds=0 read the queue {stale.reads} times"
