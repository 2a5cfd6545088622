"""Claims: a worker takes a pending lease, fenced, within the ceilings (pool, space and
instance `max_active`, the pool's `max_active_per_key` and `max_claims_per_minute`, all
enforced atomically by the claim's own write)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tenure.app.dispatch_controls import ClaimGate
from tenure.app.leases.claims.answer import Ask, Claimed, Pick, Withdraw
from tenure.app.leases.claims.attempt import Attempt
from tenure.app.leases.claims.candidates import Candidates, HeldBack
from tenure.app.leases.claims.intent import ClaimIntent
from tenure.app.leases.claims.poll import CLAIM_POLL_SECONDS, Again, LongPoll
from tenure.app.leases.claims.record import Records
from tenure.app.leases.claims.waits import Waiter, Waits
from tenure.app.leases.orphans import Orphans
from tenure.app.ports import KEY_CEILING, SchedulerState
from tenure.app.rows import ClaimRecords, LeaseRows, QueueRows
from tenure.domain import authz, fencing
from tenure.domain.errors import CeilingReached, InvalidTransition, LeaseNotFound
from tenure.domain.model import Lease, Pool, Principal
from tenure.domain.states import LeaseState

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.workers import Workers

# How many candidates one claim call may lose races for before it rests a poll interval.
MAX_CLAIM_TRIES = 200
# How many times a claim with a claim_id follows its record, moved on by sibling calls, before
# it answers that nothing could be taken.
BEFORE_EMPTY_ROUNDS = 4


class Claims:
    def __init__(
        self,
        kernel: Kernel,
        gate: ClaimGate,
        workers: Workers,
        waits: Waits,
        orphans: Orphans,
        leases: LeaseRows,
        claims: ClaimRecords,
        queues: QueueRows,
        withdraw: tuple[Withdraw, ...] = (),
        shared_waits: Waits | None = None,
    ) -> None:
        self.gate = gate
        self.kernel = kernel
        self.workers = workers
        self.waits = waits  # at most 8 claims of one worker token wait at once
        # With `shared_wait`, and at most 16 of every token's together (MCP's, waits.py).
        self.shared_waits = shared_waits
        self.leases = leases
        self.withdraw = withdraw
        self.records = Records(kernel, leases, claims, self.withdrawn)
        self.candidates = Candidates(kernel, gate, queues)
        self.attempt = Attempt(
            kernel,
            leases,
            gate,
            orphans,
            self.records,
            self.withdrawn,
            contended=self.candidates.spreading,
        )

    def claim(
        self,
        actor: Principal,
        pool_name: str,
        worker_id: str,
        worker_version: str | None,
        wait_seconds: float,
        lease_seconds: int | None,
        claim_id: str | None = None,
        host: str | None = None,
        lease_id: str | None = None,
        start: bool = False,
        handover: Lease | None = None,
        looked: SchedulerState | None = None,
        shared_wait: bool = False,
    ) -> Claimed | None:
        """The next claimable lease of the pool, or with `lease_id` that one lease or
        nothing: None when nothing could be taken once `wait_seconds` have passed; an exact
        claim of a lease that is held or has ended is 409 invalid_transition. With `start`
        the worker begins the job as soon as it has the answer, so the lease is running at
        once (Attempt._claimed_and_started). With `handover`, the ended lease of the final
        report that carries this claim keeps its claim_id's intent (`next_lease`) in place of
        a record of its own, and `looked` is the scheduler row its pick read (`Pick`). With
        `shared_wait` it waits only on a slot of the shared row as well (MCP's claims)."""
        # A claim about to wait takes one of its token's wait slots, and gives it back however
        # the call ends; with every slot held it answers at once (claims/waits.py).
        waiter = Waiter(self.waits, actor.token_id, self.shared_waits if shared_wait else None)
        try:
            authz.require_worker(actor, pool_name)
            # Each is stored and shown to operators (the worker list, exec_target, the
            # timeline).
            fields = {"worker_id": worker_id, "worker_version": worker_version}
            fencing.refuse_token_fields({**fields, "claim_id": claim_id, "host": host})
            # Fresh, not the 30 s cache (the pool row, consistent, per claim call and per
            # refresh; with the space and instance rows until the schema has the pool's gates).
            poll = LongPoll(self.kernel, self.workers, waiter, worker_id, worker_version)
            pool = poll.open(pool_name)
            poll.seen()  # a claim is itself a sign of life
            intent = None
            if claim_id is not None and handover is not None:
                # Its lease, picked before the report's write, is read by the try itself.
                intent = self.records.intent_on(handover, actor.token_id, worker_id, claim_id)
            elif claim_id is not None:
                intent = self.records.intent(pool.name, actor.token_id, worker_id, claim_id)
                again = self.records.follow(intent, pool, copy_first=True)
                if again is not None:
                    return again
            ask = Ask(worker_id, worker_version, lease_seconds, actor.token_id, intent, host, start)
            poll.until(wait_seconds)
            if lease_id is not None:
                return self._claim_exact(lease_id, poll, ask)
            return self._claim_next(poll, ask, wait_seconds, looked)
        finally:
            waiter.done()

    def _claim_next(
        self, poll: LongPoll, ask: Ask, wait_seconds: float, looked: SchedulerState | None
    ) -> Claimed | None:
        """The next claimable lease of the pool, by priority, looking again while the wait
        lasts; with a claim_id, the lease its record names still pending first."""
        tried: set[str] = set()  # the queue index lags a claim: never retry the same lease
        held = self.candidates.held_back()
        first = self._retry_first(poll, ask, tried, held, looked)
        if first is not None:
            return first

        def rested(pool: Pool) -> None:
            tried.clear()
            held.recheck_keys(pool)

        # Bounded twice over: by the candidates a call may lose races for, and by the wait.
        looks = MAX_CLAIM_TRIES + math.ceil(wait_seconds / CLAIM_POLL_SECONDS) + 1
        won = poll.run(looks, lambda: self._look(poll, ask, tried, held), rested)
        if won is not None:
            return won
        intent = ask.intent
        if intent is not None and not intent.spent:
            assert poll.pool is not None
            again = self._before_empty(intent, poll, ask, held)
            if again is not None:
                return again
        self.kernel.counters["empty_claims"] += 1
        return None

    def _retry_first(
        self,
        poll: LongPoll,
        ask: Ask,
        tried: set[str],
        held: HeldBack,
        looked: SchedulerState | None,
    ) -> Claimed | None:
        """A retry whose record names a lease still pending takes that one first: it is the
        only lease this claim_id may take until the record moves on from it. Not from a
        paused pool, an archived space or a paused scheduler, as any claim (the scheduler row
        is read here only for such a retry, never for a plain claim; a final report's claim
        goes by the row its pick read a moment before, `looked`: one look, one read)."""
        intent, pool = ask.intent, poll.pool
        if intent is None or intent.pending is None or poll.closed or pool is None:
            return None
        gate = looked if looked is not None else self.gate.read()
        if gate.paused or held.rate_limited(pool):
            return None
        tried.add(intent.pending)
        try:
            won = self.attempt.take(intent.pending, poll, ask, gate, held)
        except CeilingReached:
            won = None  # full: the look below meets the same ceiling and waits
        if won is not None:
            self.kernel.counters["claims"] += 1
        return won

    def _look(
        self, poll: LongPoll, ask: Ask, tried: set[str], held: HeldBack
    ) -> Claimed | Again | None:
        """One look at the queue's heads: the first won, or whether to look again at once."""
        pool = poll.pool
        assert pool is not None
        gate = self.gate.read()  # scheduler pause, paused subtrees, parked tasks
        if poll.closed or gate.paused or held.rate_limited(pool):
            return None
        heads = self.candidates.look(pool, tried, gate, held)
        for lease_id in heads:
            try:
                won = self.attempt.take(lease_id, poll, ask, gate, held)
            except CeilingReached as full:
                if full.details.get("scope") == KEY_CEILING:
                    continue  # that key is full; other keys may still be claimable
                heads.full()
                break
            if won is not None:
                self.kernel.counters["claims"] += 1
                return won
            if heads.withdrawn():
                break
            heads.raced()
        return Again.AT_ONCE if heads.found and len(tried) < MAX_CLAIM_TRIES else None

    def _before_empty(
        self, intent: ClaimIntent, poll: LongPoll, ask: Ask, held: HeldBack
    ) -> Claimed | None:
        """Before a claim with a claim_id answers that nothing could be taken: a concurrent
        call with the same claim_id may have pointed the record at a lease and won it
        meanwhile (even while this call found no candidate at all), and then that lease is
        this claim's answer. Lease first, record second: the lease the record named is this
        claim's own and held (reissued), or pending and not shunned (claimed), or can never
        become this claim's; only then does the record decide: unchanged, nothing could be
        taken; moved on, it is followed. Bounded: each round follows a sibling's progress."""
        pool = poll.current()
        for _ in range(BEFORE_EMPTY_ROUNDS):
            if intent.names is not None:
                lease = self.leases.get_lease(intent.names)
                if lease is not None and lease.claim_ref == intent.ref:
                    return self.records.follow(intent, pool)  # its own: reissued if still held
                if (
                    lease is not None
                    and lease.state is LeaseState.PENDING
                    and intent.ref not in (lease.shunned or ())
                ):
                    gate = self.gate.read()
                    if poll.closed or gate.paused or held.rate_limited(pool):
                        return None  # nothing is handed out now, this lease neither
                    try:
                        won = self.attempt.take(lease.id, poll, ask, gate, held)
                    except CeilingReached:
                        return None  # full: it waits for the next claim
                    if won is not None:
                        return won
                    now = self.leases.get_lease(lease.id)
                    if now is None or now.claim_ref != intent.ref:
                        return None  # not takeable now (held back, deferred) or a rival's
                    return self.records.follow(intent, pool)  # a sibling won it: this claim's
            before = intent.names
            again = self.records.follow(intent, pool)
            if again is not None or intent.spent or intent.names == before:
                return again
        return None

    def _claim_exact(self, lease_id: str, poll: LongPoll, ask: Ask) -> Claimed | None:
        """That lease or nothing, through every gate a claim-next passes (pause, archive,
        the scheduler, held-back tasks, not_before, ceilings), with the same single-owner
        condition; a lease held or ended (a rival's claim included) is 409."""
        poll.looked_at = self.kernel.clock.now_ms()
        remaining_ms = max(0, poll.give_up_at - poll.looked_at)
        looks = math.ceil(remaining_ms / 1000 / CLAIM_POLL_SECONDS) + 1
        held = self.candidates.held_back()

        def look() -> Claimed | None:
            pool = poll.pool
            assert pool is not None
            # Consistent: who holds it now.
            lease = (
                self.leases.get_lease(lease_id) if len(lease_id) <= fencing.MAX_ID_LENGTH else None
            )
            if lease is None or lease.pool != pool.name:
                # One answer for a lease of another pool and for none at all: a lease's id
                # may be derived from another space's task key, and a worker limited to its
                # pools must not learn from it whether that task exists.
                raise LeaseNotFound(f"lease {lease_id} is not in pool {pool.name}")
            if lease.state is not LeaseState.PENDING:
                raise InvalidTransition(f"lease {lease_id} is {lease.state}; it is not queued")
            gate = self.gate.read()
            if poll.closed or gate.paused or held.rate_limited(pool):
                return None
            try:
                won = self.attempt.take(lease_id, poll, ask, gate, held)
            except CeilingReached:
                won = None  # full (a ceiling, its key, the minute's claims): it waits
            if won is not None:
                self.kernel.counters["claims"] += 1
                return won
            again = self.kernel.lease(lease_id)
            if again.state.terminal:  # withdrawn by this claim (its task was cancelled)
                raise InvalidTransition(f"lease {lease_id} is {again.state.value}")
            if again.state is not LeaseState.PENDING:
                raise InvalidTransition(f"lease {lease_id} was claimed by another worker")
            return None

        won = poll.run(looks, look, held.recheck_keys)
        if won is None:
            self.kernel.counters["empty_claims"] += 1
        return won

    def withdrawn(self, lease: Lease) -> bool:
        """Whether a check ends `lease`, claimed, rather than let it be handed out."""
        return any(check(lease) for check in self.withdraw)

    def claimed_again(
        self,
        actor: Principal,
        pool_name: str,
        worker_id: str,
        claim_id: str,
        handover: Lease | None = None,
    ) -> Claimed | None:
        """The lease a claim with this `claim_id` already won, again under a fresh token, or
        None: never a new claim. What a replayed report answers for the claim it carried
        (kept on its ended lease, `handover`, or in a record of its own)."""
        authz.require_worker(actor, pool_name)
        pool = self.kernel.pool(pool_name)
        if handover is not None:
            intent = self.records.intent_on(handover, actor.token_id, worker_id, claim_id)
        else:
            intent = self.records.intent(pool.name, actor.token_id, worker_id, claim_id)
        # A lease not this claim's own is no answer yet: the first call of this claim_id may
        # have lost it and moved the record on since it was read, to a lease it then won. The
        # record decides, read after the lease, as before a claim answers empty: unchanged,
        # nothing is held under the claim; moved on, it is followed (each round follows a
        # sibling's progress). A lease still pending needs no second look: the record never
        # leaves a pending lease this claim has not shunned.
        named = None
        for _ in range(BEFORE_EMPTY_ROUNDS):
            again = self.records.follow(intent, pool)
            if again is not None or intent.names in (None, named) or intent.pending:
                return again
            named = intent.names
        return None

    def pick(self, pool_name: str) -> Pick:
        """The lease a final report's claim will take first, picked before the report's
        write so that the write can carry the claim's intent (None: the queue showed none).
        A stale pick costs nothing but a re-point: the claim re-reads it and takes it only
        if it is still pending."""
        pool = self.kernel.pool(pool_name)
        gate = self.gate.read()
        held = self.candidates.held_back()
        heads = self.candidates.look(pool, set(), gate, held, first_only=True)
        return Pick(next(iter(heads), None), gate)
