"""Claims: a worker takes a pending lease, fenced, within the ceilings (pool, space and
instance `max_active`, the pool's `max_active_per_key` and `max_claims_per_minute`, all
enforced atomically by the claim's own write)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tenure.app.kernel import over
from tenure.app.leases.orphans import Orphans
from tenure.app.leases.waits import Waiter, Waits
from tenure.app.ports import (
    INSTANCE_CEILING,
    KEY_CEILING,
    RATE_CEILING,
    Ceiling,
    Change,
    ClaimRecord,
    RecordWrite,
    SchedulerState,
    key_ceiling,
    rate_ceiling,
    split_ceiling,
)
from tenure.app.scheduler import ClaimGate, queue_tiers
from tenure.domain import authz
from tenure.domain import fencing as rules
from tenure.domain.errors import CeilingReached, Conflict, InvalidTransition, LeaseNotFound
from tenure.domain.events import LEASE_CLAIM_RETRIED
from tenure.domain.model import Lease, Pool, Principal, Task
from tenure.domain.states import REPORTABLE, LeaseState
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.workers import Workers

# How many queue heads of one priority a claim looks at. It tries them oldest first, so one
# claimer at a time gets strict order; once it loses a race in a pool (a rival took the head
# it was writing to), it shuffles the rest, and so does every claim this process makes in
# that pool for CONTENDED_MS after, so concurrent workers spread over candidates instead of
# all paying for a lost race on the head (every losing conditional write is billed).
CLAIM_CANDIDATES = 64
CONTENDED_MS = 10_000
# While spreading, a claim reads twice the heads: rivals picking at random among more of them
# collide half as often, and a lost write (1 write unit and more, with the claim_id record
# moved on) costs more than the wider read of keys (about half a read unit more).
CONTENDED_CANDIDATES = 128
# How many candidates one claim call may lose races for before it rests a poll interval.
MAX_CLAIM_TRIES = 200
# How long an idle long-poll waits between looks at the queue.
CLAIM_POLL_SECONDS = 0.5
# A long poll looks at its pool and space rows again this often, so a pause, a resume, an
# archive or an unarchive reaches a waiting claim within this bound.
POOL_REFRESH_MS = 2_000
# How many times a claim with a claim_id follows its record, moved on by sibling calls, before
# it answers that nothing could be taken.
BEFORE_EMPTY_ROUNDS = 4
# A claim_id is remembered at least this long after its lease's deadline (DynamoDB TTL).
CLAIM_ID_KEEP_SECONDS = 86_400


# A check a claim makes after its write committed and before it answers: given the claimed
# lease, True when it must not be handed out (the check has then ended the lease itself), and
# the claim goes on to its next candidate. A subtree cancel that committed just before the
# claim's write is the case (app/tasks/cancel.py): the scheduler row the claim read to skip
# such leases was read before that commit.
Withdraw = Callable[[Lease], bool]


@dataclass(frozen=True)
class Claimed:
    lease: Lease
    token: str  # shown to the worker exactly once, never stored
    pool: Pool
    # The lease's task when the claim read it (a lease marked task-pending): the claim's
    # payload takes it from here rather than reading it again.
    task: Task | None = None


class Claims:
    def __init__(
        self,
        kernel: Kernel,
        gate: ClaimGate,
        workers: Workers,
        waits: Waits,
        orphans: Orphans,
        withdraw: tuple[Withdraw, ...] = (),
    ) -> None:
        self.gate = gate
        self.orphans = orphans  # a marked lease's task, or the end of a dead filing's lease
        self.kernel = kernel
        self.workers = workers
        self.waits = waits  # at most 8 claims of one worker token wait at once
        self.withdraw = withdraw
        # Per pool: until when this process's claims spread (shuffle) rather than go in order.
        self._contended: dict[str, int] = {}

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
    ) -> Claimed | None:
        """The next claimable lease of the pool, or with `lease_id` that one lease or
        nothing: None when nothing could be taken once `wait_seconds` have passed; an exact
        claim of a lease that is held or has ended is 409 invalid_transition. With `start`
        the worker begins the job as soon as it has the answer, so the lease is running at
        once (see _claimed_and_started)."""
        # A claim about to wait takes one of its token's wait slots, and gives it back however
        # the call ends; with every slot held it answers at once (app/leases/waits.py).
        waiter = Waiter(self.waits, actor.token_id)
        try:
            return self._claim(
                actor,
                pool_name,
                worker_id,
                worker_version,
                wait_seconds,
                lease_seconds,
                waiter,
                claim_id=claim_id,
                host=host,
                lease_id=lease_id,
                start=start,
            )
        finally:
            waiter.done()

    def _claim(
        self,
        actor: Principal,
        pool_name: str,
        worker_id: str,
        worker_version: str | None,
        wait_seconds: float,
        lease_seconds: int | None,
        waiter: Waiter,
        claim_id: str | None = None,
        host: str | None = None,
        lease_id: str | None = None,
        start: bool = False,
    ) -> Claimed | None:
        authz.require_worker(actor, pool_name)
        # Each is stored and shown to operators (the worker list, exec_target, the timeline).
        rules.refuse_token_fields(
            {
                "worker_id": worker_id,
                "worker_version": worker_version,
                "claim_id": claim_id,
                "host": host,
            }
        )
        # Fresh, not the 30 s cache: a paused pool or an archived space hands out nothing,
        # and a ceiling just set counts, from the moment the change commits (three
        # consistent reads of small rows, 1 RU each, per claim call and per refresh).
        pool, closed = self._claim_settings(pool_name)
        looked_at = self.kernel.clock.now_ms()
        self.workers.mark_seen(pool, worker_id, worker_version)  # a claim is itself a sign of life
        intent = None
        if claim_id is not None:
            key = ClaimRecord(pool.name, actor.token_id, worker_id, claim_id, "", 0)
            intent = _Intent(key, rules.claim_ref(pool.name, actor.token_id, worker_id, claim_id))
            again = self._follow(intent, pool)
            if again is not None:
                return again
        ask = _Ask(worker_id, worker_version, lease_seconds, actor.token_id, intent, host, start)
        give_up_at = self.kernel.clock.now_ms() + int(wait_seconds * 1000)
        if lease_id is not None:
            return self._claim_exact(lease_id, pool_name, pool, closed, ask, give_up_at, waiter)
        tried: set[str] = set()  # the queue index lags a claim: never retry the same lease
        held = _HeldBack()
        if intent is not None and intent.pending is not None and not closed:
            # A retry whose record names a lease still pending takes that one first: it is
            # the only lease this claim_id may take until the record moves on from it. Not
            # from a paused pool, an archived space or a paused scheduler, as any claim (the
            # scheduler row is read here only for such a retry, never for a plain claim).
            first_gate = self.gate.read()
            if not (first_gate.paused or held.rate_limited(self.kernel, pool)):
                tried.add(intent.pending)
                try:
                    won = self._try_claim(intent.pending, pool, ask, first_gate, held)
                except CeilingReached:
                    won = None  # full: the look below meets the same ceiling and waits
                if won is not None:
                    self.kernel.counters["claims"] += 1
                    return won
        # Bounded twice over: by the candidates a call may lose races for, and by the wait.
        looks = MAX_CLAIM_TRIES + math.ceil(wait_seconds / CLAIM_POLL_SECONDS) + 1
        for _ in range(looks):
            fresh: list[str] = []
            gate = self.gate.read()  # scheduler pause, paused subtrees, parked tasks
            if not closed and not gate.paused and not held.rate_limited(self.kernel, pool):
                # Highest priority first: the first partition with an untried due head is the
                # one this look takes from (a pool with no marked priority reads one).
                # Leases whose key is known full are passed over, not counted as tries, so
                # they hide neither the rest of their partition nor a lower priority's.
                skip = held.known_full()
                want = CONTENDED_CANDIDATES if self._spreading(pool.name) else CLAIM_CANDIDATES
                for priority in queue_tiers(pool):
                    fresh = self.gate.candidates(
                        pool.name, tried, gate, want, priority=priority, skip=skip
                    )
                    if fresh:
                        break
                order = fresh[:want]
                if self._spreading(pool.name):
                    order = self.kernel.ids.shuffle(order)
                while order:
                    lease_id = order.pop(0)
                    if held.key_of.get(lease_id) in held.full_keys:
                        continue  # its key was found full in this look: no read
                    tried.add(lease_id)
                    lost_before = self._rivalry()
                    withdrawn_before = self.kernel.counters["claims_withdrawn"]
                    try:
                        won = self._try_claim(lease_id, pool, ask, gate, held)
                    except CeilingReached as full:
                        if full.details.get("scope") == KEY_CEILING:
                            continue  # that key is full; other keys may still be claimable
                        fresh = []  # full: nothing is claimable until a held lease ends
                        break
                    if won is not None:
                        self.kernel.counters["claims"] += 1
                        return won
                    if self.kernel.counters["claims_withdrawn"] > withdrawn_before:
                        # The scheduler row read for this look predates a subtree cancel:
                        # read it again rather than claim and withdraw its neighbours too.
                        break
                    if self._rivalry() > lost_before:
                        # A rival is claiming here too (it won the write, or took the head
                        # since the index was read): spread from now on.
                        if not self._spreading(pool.name):
                            order = self.kernel.ids.shuffle(order)
                        self._contended[pool.name] = self.kernel.clock.now_ms() + CONTENDED_MS
            if fresh and len(tried) < MAX_CLAIM_TRIES:
                continue  # a lost race is not an empty queue: look again at once
            remaining = (give_up_at - self.kernel.clock.now_ms()) / 1000
            if remaining <= 0 or not waiter.may_wait(remaining):
                break
            self.kernel.clock.sleep(min(CLAIM_POLL_SECONDS, remaining))
            if self.kernel.clock.now_ms() - looked_at >= POOL_REFRESH_MS:
                pool, closed = self._claim_settings(pool_name)
                looked_at = self.kernel.clock.now_ms()
            # A worker waiting in a long poll is in contact all along (a claim is a sign of
            # life).
            self.workers.mark_seen(pool, worker_id, worker_version)
            tried.clear()
            held.recheck_keys(self.kernel, pool)
        if intent is not None and not intent.spent:
            again = self._before_empty(intent, pool, ask, held, closed)
            if again is not None:
                return again
        self.kernel.counters["empty_claims"] += 1
        return None

    def _before_empty(
        self, intent: _Intent, pool: Pool, ask: _Ask, held: _HeldBack, closed: bool
    ) -> Claimed | None:
        """Before a claim with a claim_id answers that nothing could be taken: a concurrent
        call with the same claim_id may have pointed the record at a lease and won it
        meanwhile (even while this call found no candidate at all), and then that lease is
        this claim's answer. Lease first, record second: the lease the record named is this
        claim's own and held (reissued), or pending and not shunned (claimed), or can never
        become this claim's; only then does the record decide: unchanged, nothing could be
        taken; moved on, it is followed. Bounded: each round follows a sibling's progress."""
        for _ in range(BEFORE_EMPTY_ROUNDS):
            if intent.names is not None:
                lease = self.kernel.store.get_lease(intent.names)
                if lease is not None and lease.claim_ref == intent.ref:
                    return self._follow(intent, pool)  # its own: reissued if still held
                if (
                    lease is not None
                    and lease.state is LeaseState.PENDING
                    and intent.ref not in (lease.shunned or ())
                ):
                    gate = self.gate.read()
                    if closed or gate.paused or held.rate_limited(self.kernel, pool):
                        return None  # nothing is handed out now, this lease neither
                    try:
                        won = self._try_claim(lease.id, pool, ask, gate, held)
                    except CeilingReached:
                        return None  # full: it waits for the next claim
                    if won is not None:
                        return won
                    now = self.kernel.store.get_lease(lease.id)
                    if now is None or now.claim_ref != intent.ref:
                        return None  # not takeable now (held back, deferred) or a rival's
                    return self._follow(intent, pool)  # a sibling won it: this claim's
            before = intent.names
            again = self._follow(intent, pool)
            if again is not None or intent.spent or intent.names == before:
                return again
        return None

    def _rivalry(self) -> int:
        """Signs of a rival claimer so far: races lost, and heads found taken already."""
        return self.kernel.counters["lost_claim_races"] + self.kernel.counters["heads_taken"]

    def _spreading(self, pool: str) -> bool:
        until = self._contended.get(pool)
        if until is None:
            return False
        if until <= self.kernel.clock.now_ms():
            del self._contended[pool]
            return False
        return True

    def _claim_exact(
        self,
        lease_id: str,
        pool_name: str,
        pool: Pool,
        closed: bool,
        ask: _Ask,
        give_up_at: int,
        waiter: Waiter,
    ) -> Claimed | None:
        """That lease or nothing, through every gate a claim-next passes (pause, archive,
        the scheduler, held-back tasks, not_before, ceilings), with the same single-owner
        condition; a lease held or ended (a rival's claim included) is 409."""
        looked_at = self.kernel.clock.now_ms()
        looks = math.ceil(max(0, give_up_at - looked_at) / 1000 / CLAIM_POLL_SECONDS) + 1
        held = _HeldBack()
        for _ in range(looks):
            lease = self.kernel.lease(lease_id)  # consistent: who holds it now
            if lease.pool != pool.name:
                raise LeaseNotFound(f"lease {lease_id} is not in pool {pool.name}")
            if lease.state is not LeaseState.PENDING:
                raise InvalidTransition(f"lease {lease_id} is {lease.state}; it is not queued")
            gate = self.gate.read()
            if not closed and not gate.paused and not held.rate_limited(self.kernel, pool):
                try:
                    won = self._try_claim(lease_id, pool, ask, gate, held)
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
            remaining = (give_up_at - self.kernel.clock.now_ms()) / 1000
            if remaining <= 0 or not waiter.may_wait(remaining):
                break
            self.kernel.clock.sleep(min(CLAIM_POLL_SECONDS, remaining))
            if self.kernel.clock.now_ms() - looked_at >= POOL_REFRESH_MS:
                pool, closed = self._claim_settings(pool_name)
                looked_at = self.kernel.clock.now_ms()
            self.workers.mark_seen(pool, ask.worker_id, ask.worker_version)
            held.recheck_keys(self.kernel, pool)
        self.kernel.counters["empty_claims"] += 1
        return None

    def claimed_again(
        self, actor: Principal, pool_name: str, worker_id: str, claim_id: str
    ) -> Claimed | None:
        """The lease a claim with this `claim_id` already won, again under a fresh token, or
        None: never a new claim. What a replayed report answers for the claim it carried."""
        authz.require_worker(actor, pool_name)
        pool = self.kernel.pool(pool_name)
        key = ClaimRecord(pool.name, actor.token_id, worker_id, claim_id, "", 0)
        intent = _Intent(key, rules.claim_ref(pool.name, actor.token_id, worker_id, claim_id))
        return self._follow(intent, pool)

    def _claim_settings(self, pool_name: str) -> tuple[Pool, bool]:
        """The pool as it is now, and whether it hands out nothing (paused, or its space
        archived); the space and instance rows are refreshed with it (their ceilings)."""
        pool = self.kernel.fresh_pool(pool_name)
        closed = pool.paused or self.kernel.fresh_space(pool.space).archived
        self.kernel.fresh_instance()
        return pool, closed

    def _follow(self, intent: _Intent, pool: Pool) -> Claimed | None:
        """Read the claim's record and learn where it stands: its lease again under a fresh
        token when that lease is this claim's own and still held (a retry whose answer was
        lost); else None, with `intent` saying which lease the record names, whether the call
        may still take it (`pending`), or whether the claim_id is spent (`spent`)."""
        key = intent.record
        found = self.kernel.store.find_claim(key.pool, key.claimant, key.worker_id, key.claim_id)
        intent.names = intent.pending = None
        if found is None:
            return None
        intent.names = found.lease_id
        lease = self.kernel.store.get_lease(found.lease_id)
        if lease is None:
            return None
        ours = lease.claim_ref == intent.ref if found.intent else lease.claimed_by is not None
        if ours and lease.claimed_by == key.claimant and lease.worker_id == key.worker_id:
            if lease.state in REPORTABLE and any(check(lease) for check in self.withdraw):
                # Claimed under a subtree cancel, and its end by the claim that withdrew it
                # never landed: never handed out. Ended now (its `claim_ref` with it), it is
                # no longer this claim's own, and the record moves on from it.
                return None
            again = self._claimed_before(lease, pool, intent)
            if again is not None:
                return again
            # The key's lease has ended: this is a new claim under an old key. Its record
            # stays where it is, so the new lease is taken without one.
            intent.spent = True
            return None
        if not found.intent:
            intent.spent = True  # a record of the old kind is written once, never moved on
        elif lease.state is LeaseState.PENDING and intent.ref not in (lease.shunned or ()):
            intent.pending = lease.id
        return None

    def _claimed_before(self, lease: Lease, pool: Pool, intent: _Intent) -> Claimed | None:
        """A retried claim whose answer was lost: the same lease, under a fresh token (the
        lost one dies with the old hash). None when that lease is no longer held."""
        worker_id, claim_id = intent.record.worker_id, intent.record.claim_id

        def reissue(current: Lease) -> Claimed | None:
            if current.state not in REPORTABLE or current.worker_id != worker_id:
                return None
            token = rules.mint_lease_token(current.id, self.kernel.ids.secret())
            now = self.kernel.clock.now_ms()
            # The worker never heard the first answer: its lease (and its self-fence) counts
            # from this one, so the deadline must too, never from the claim it missed. Like a
            # heartbeat, it leaves `due_at` (an index write) to the sweeper's re-index.
            seconds = current.lease_seconds or pool.toleration_seconds
            deadline = max(current.deadline or 0, rules.fresh_deadline(now, 1000 * seconds))
            new = replace(
                current,
                deadline=deadline,
                token_hash=rules.hash_token(token),
                version=current.version + 1,
                event_type=LEASE_CLAIM_RETRIED,
                event_data={"worker_id": worker_id, "claim_id": claim_id},
                updated_at=now,
            )
            self.kernel.write(current, new)
            return Claimed(lease=new, token=token, pool=pool)

        if lease.state not in REPORTABLE:
            return None
        self.kernel.counters["claim_retries"] += 1
        return self.kernel.settle(lease, reissue)

    def _aim(
        self, intent: _Intent, lease: Lease, pool: Pool, keep: int, in_claim: bool = False
    ) -> Claimed | bool | RecordWrite:
        """Point the claim's record at `lease`, just before the claim writes it, so that a
        crash between the two leaves a record naming a lease the retry can still take. True:
        pointed (or already pointing there). False: another call with this claim_id wrote the
        record first (the caller follows it). A Claimed: the lease the record named is this
        claim's own after all (a concurrent retry won it), under a fresh token. With
        `in_claim` the record's write is not made but answered, for the claim's own
        transaction (a claim with ceiling counters is one anyway): a full ceiling then
        cancels it with the claim, so the record never names a lease that stays pending.

        The record moves on only from a lease this claim can no longer take: one held or
        ended, or one still pending that first gets this claim's ref in its `shunned` (a
        fenced write), so a concurrent retry that read the old record cannot take it too."""
        if intent.names == lease.id:
            return True
        if intent.names is not None:
            before = self.kernel.store.get_lease(intent.names)
            if before is not None and before.claim_ref == intent.ref:
                again = self._follow(intent, pool)
                return again if again is not None else False
            if (
                before is not None
                and before.state is LeaseState.PENDING
                and intent.ref not in (before.shunned or ())
            ):
                shunned = replace(
                    before,
                    shunned=(*(before.shunned or ()), intent.ref),
                    version=before.version + 1,
                    event_type=None,  # no transition: nothing for the timeline
                    event_data=None,
                    updated_at=self.kernel.clock.now_ms(),
                )
                try:
                    self.kernel.write(before, shunned)
                except Conflict:
                    self.kernel.counters["lost_claim_races"] += 1
                    return False
        record = replace(intent.record, lease_id=lease.id, expires_at=keep)
        if in_claim:
            return RecordWrite(record, intent.names)
        try:
            self.kernel.store.point_claim(record, intent.names)
        except Conflict:
            self.kernel.counters["lost_claim_races"] += 1
            return False
        intent.names = lease.id
        return True

    def _try_claim(
        self,
        lease_id: str,
        pool: Pool,
        ask: _Ask,
        gate: SchedulerState | None = None,
        held: _HeldBack | None = None,
        chase: bool = True,
    ) -> Claimed | None:
        lease = self.kernel.store.get_lease(lease_id, consistent=False)
        if lease is None or lease.state is not LeaseState.PENDING:
            self.kernel.counters["heads_taken"] += 1  # the index lagged a claim (or an end)
            return None
        if held is not None and lease.concurrency_key is not None:
            held.key_of[lease.id] = lease.concurrency_key
            if lease.concurrency_key in held.full_keys:
                return None  # its key is full: not worth a write that would lose
        if gate is not None and self.gate.held_back(lease, gate):
            return None
        now = self.kernel.clock.now_ms()
        if lease.not_before is not None and lease.not_before > now:
            return None  # deferred: not before its instant, whatever the index says
        if lease.queue_expires_at is not None and lease.queue_expires_at <= now:
            return None  # past its queue timeout: the sweeper ends it, nobody runs it
        task = None
        if lease.tp:
            # Written before its task: handed out only once the task is there.
            task = self.orphans.task_of(lease)
            if task is None:
                return None
        token = rules.mint_lease_token(lease.id, self.kernel.ids.secret())
        seconds = ask.lease_seconds or pool.toleration_seconds
        deadline = rules.fresh_deadline(now, 1000 * seconds)
        ceilings = self._ceilings(pool, lease, now)
        # The minute's claim count is never given back; every other counter is, at the end.
        counted = tuple(f"{c.scope}:{c.name}" for c in ceilings if c.scope != RATE_CEILING)
        # The run timeout: the smaller of the run's own and the pool's, from this claim. The
        # sweeper's index entry comes due at whichever is first, it or the deadline.
        limits = [x for x in (lease.max_run_seconds, pool.max_run_seconds) if x is not None]
        run_limit = min(limits) if limits else None
        run_deadline = now + 1000 * run_limit if run_limit is not None else None
        new = self.kernel.apply(
            lease,
            must_move(lease.id, lease.state, lease.revoke, Action.CLAIM),
            {"worker_id": ask.worker_id, "worker_version": ask.worker_version},
            now,
            worker_id=ask.worker_id,
            worker_version=ask.worker_version,
            host=ask.host,
            token_hash=rules.hash_token(token),
            claimed_by=ask.claimant,
            lease_seconds=seconds,
            renew_seconds=pool.renew_seconds,
            claimed_at=now,
            heartbeat_at=now,
            deadline=deadline,
            due_at=min(deadline, run_deadline) if run_deadline is not None else deadline,
            counted=counted or None,
            run_limit_seconds=run_limit,
            run_deadline=run_deadline,
        )
        if ask.start:
            new = self._claimed_and_started(new, now)
        intent = ask.intent if ask.intent is not None and not ask.intent.spent else None
        records: list[RecordWrite] = []
        if intent is not None:
            if intent.ref in (lease.shunned or ()):
                return None  # this claim's record moved on from it: never this claim's lease
            keep = deadline // 1000 + CLAIM_ID_KEEP_SECONDS
            aimed = self._aim(intent, lease, pool, keep, in_claim=bool(ceilings))
            if isinstance(aimed, Claimed):
                return aimed
            if isinstance(aimed, RecordWrite):
                records.append(aimed)
            elif not aimed:
                # A concurrent call with this claim_id wrote the record first: follow it, and
                # when it names a lease still pending, take that one (once) rather than a new
                # candidate, whose aim would shun the very lease the sibling is claiming.
                again = self._follow(intent, pool)
                if again is None and chase and intent.pending is not None:
                    return self._try_claim(intent.pending, pool, ask, gate, held, chase=False)
                return again
            new = replace(new, claim_ref=intent.ref)
        # Who shunned it mattered only while it was pending, and its task is there now: a
        # claimed lease sheds the list and the task-pending mark.
        new = replace(new, shunned=None, tp=None)
        try:
            self.kernel.commit(
                Change(leases=[over(lease, new)], ceilings=ceilings, records=records)
            )
        except CeilingReached as full:
            if held is not None:
                held.note(full, lease)
            raise
        except Conflict:
            self.kernel.counters["lost_claim_races"] += 1  # paid for: the cost bench counts these
            if records and intent is not None:
                # The lease or the record lost: a sibling call with this claim_id may have
                # moved the record on (or won), so learn where it stands before going on.
                return self._follow(intent, pool)
            return None
        if records and intent is not None:
            intent.names = lease.id
        if any(check(new) for check in self.withdraw):
            self.kernel.counters["claims_withdrawn"] += 1
            return None  # ended by the check: never handed out, the claim looks further
        return Claimed(lease=new, token=token, pool=pool, task=task)

    def _claimed_and_started(self, claimed: Lease, now: int) -> Lease:
        """The claimed lease started by the same write, when the worker says it starts the
        job at once: the first heartbeat then has nothing to write. The write is two
        transitions (claimed, then started: two versions), so it is made only where the row
        holds both as stamps, which is how the timeline and the reactor tell each of them
        (domain/timeline.py); anywhere else the lease is claimed alone, and its first
        heartbeat or start call starts it as without `start`. Not either while the table's
        schema is below the version that allows it (Kernel.claims_may_start)."""
        if claimed.tl is None or claimed.tl.get("c") != claimed.version:
            return claimed
        if not self.kernel.claims_may_start():
            return claimed
        started = self.kernel.apply(
            claimed,
            must_move(claimed.id, claimed.state, claimed.revoke, Action.START),
            {"by": "claim"},
            now,
            started_at=now,
        )
        stamps = started.tl or {}
        if stamps.get("c") != claimed.version or stamps.get("s") != started.version:
            return claimed
        return started

    def _ceilings(self, pool: Pool, lease: Lease, now: int) -> list[Ceiling]:
        """The counters a claim of `lease` in `pool` must stay under (each is unlimited unless
        set, and then adds nothing to the claim's write)."""
        found = []
        if pool.max_active is not None:
            found.append(Ceiling("pool", pool.name, +1, pool.max_active))
        if pool.max_active_per_key is not None and lease.concurrency_key is not None:
            name = key_ceiling(pool.name, lease.concurrency_key)
            found.append(Ceiling(KEY_CEILING, name, +1, pool.max_active_per_key))
        if pool.max_claims_per_minute is not None:
            name = rate_ceiling(pool.name, now // 60_000)
            found.append(Ceiling(RATE_CEILING, name, +1, pool.max_claims_per_minute))
        space = self.kernel.space_cached(pool.space)
        if space.max_active is not None:
            found.append(Ceiling("space", space.key, +1, space.max_active))
        instance = self.kernel.instance()
        if instance.max_active is not None:
            found.append(Ceiling(INSTANCE_CEILING, INSTANCE_CEILING, +1, instance.max_active))
        return found


@dataclass(frozen=True)
class _Ask:
    """What the claiming worker asked for."""

    worker_id: str
    worker_version: str | None
    lease_seconds: int | None
    claimant: str  # the worker token's id: only it renews what it claimed
    intent: _Intent | None  # with a claim_id: where its record stands
    host: str | None
    start: bool = False  # the worker starts the job on the answer: claim it running


@dataclass
class _Intent:
    """One claim call's claim_id: its record's key, the ref its lease will carry, the lease
    the record names now (None: no record yet), whether that lease may still be taken by
    this claim (`pending`), and whether the claim_id is spent (its lease ended: the call
    claims without a record, as a new claim under an old key)."""

    record: ClaimRecord
    ref: str
    names: str | None = None
    pending: str | None = None
    spent: bool = False


@dataclass
class _HeldBack:
    """What one claim call has learnt is full, so that it does not pay again for writes that
    would lose: the concurrency keys found full (re-read after each poll interval, one small
    read per key) with the key of each lease read, and the minute whose claims ran out."""

    full_keys: set[str] = field(default_factory=set)
    key_of: dict[str, str] = field(default_factory=dict)
    rate_full_in: int | None = None

    def note(self, full: CeilingReached, lease: Lease) -> None:
        """What a claim's lost write says was full: the lease's key, or the minute whose
        counter was (not the clock's minute when the answer came)."""
        scope = full.details.get("scope")
        if scope == KEY_CEILING and lease.concurrency_key is not None:
            self.full_keys.add(lease.concurrency_key)
        elif scope == RATE_CEILING:
            self.rate_full_in = int(split_ceiling(str(full.details["name"]))[1])

    def known_full(self) -> set[str]:
        """The leases read so far whose key is full now."""
        return {lease_id for lease_id, key in self.key_of.items() if key in self.full_keys}

    def rate_limited(self, kernel: Kernel, pool: Pool) -> bool:
        """The pool's claims for this minute are used up (a fixed window: the next minute
        starts afresh, and so does a pool whose limit was lifted)."""
        if self.rate_full_in is None:
            return False
        if (
            pool.max_claims_per_minute is None
            or kernel.clock.now_ms() // 60_000 != self.rate_full_in
        ):
            self.rate_full_in = None
        return self.rate_full_in is not None

    def recheck_keys(self, kernel: Kernel, pool: Pool) -> None:
        if pool.max_active_per_key is None:
            self.full_keys.clear()
            return
        limit = pool.max_active_per_key
        self.full_keys = {
            key
            for key in self.full_keys
            if kernel.store.held_count(KEY_CEILING, key_ceiling(pool.name, key)) >= limit
        }
