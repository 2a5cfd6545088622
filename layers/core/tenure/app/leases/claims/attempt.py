"""One try at one candidate: read it, decide (domain/claims.py) and commit the claim's change,
with the claim_id record's write when the claim has one.

A rival's claim that lands between this claim's read of the lease and its write makes that
write lose, and every lost conditional write is billed (a write unit at least). Between the
two sit the round trips the decision needs: the task's read for a lease filed before its task,
and the claim_id record's write. While the pool is contended (this process has seen a rival
there lately), a claim that made such round trips reads the lease again (eventually
consistent, half a read unit) just before its write, and writes only when the lease is still
as it read it first: the window a rival can land in is then that one read. The write stays
conditional on the state, fence and version of the first read, and a version only grows, so
the second read spares only a write that would lose for certain: a changed lease is given up
as a lost write gives it up.

The pool's settings come from the claim's own copy, read again first when it is older than
PoolCopy.FRESH_FOR_TAKE_MS: a claim counts itself toward a ceiling only when its copy has one,
and a ceiling just set counts the leases already held twice, the second time a settle later
(setup/pools.py), so a claim that read the pool before the ceiling must land before that."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from tenure.app.dispatch_controls import ClaimGate
from tenure.app.kernel import over
from tenure.app.leases.claims.answer import Ask, Claimed, Withdrawn
from tenure.app.leases.claims.candidates import HeldBack
from tenure.app.leases.claims.intent import ClaimIntent
from tenure.app.leases.claims.record import Records
from tenure.app.leases.orphans import Orphans
from tenure.app.ports import (
    INSTANCE_CEILING,
    KEY_CEILING,
    RATE_CEILING,
    Ceiling,
    Change,
    RecordWrite,
    SchedulerState,
    key_ceiling,
    rate_ceiling,
)
from tenure.app.rows import LeaseRows
from tenure.domain import fencing
from tenure.domain.claims import ClaimTerms, Refusal, claim_terms
from tenure.domain.errors import CeilingReached, Conflict
from tenure.domain.model import Lease, Pool
from tenure.domain.states import LeaseState
from tenure.domain.transitions import Action, must_move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# A claim_id is remembered at least this long after its lease's deadline (DynamoDB TTL).
CLAIM_ID_KEEP_SECONDS = 86_400


class PoolCopy(Protocol):
    """A claim's copy of its pool's settings (claims/poll.py's LongPoll); `closed` when the
    pool hands out nothing (paused, or its space archived)."""

    closed: bool

    def current(self) -> Pool:
        """The settings, read again first when the copy is older than FRESH_FOR_TAKE_MS."""
        ...


class Attempt:
    def __init__(
        self,
        kernel: Kernel,
        leases: LeaseRows,
        gate: ClaimGate,
        orphans: Orphans,
        records: Records,
        withdrawn: Withdrawn,
        contended: Callable[[str], bool],
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.gate = gate
        self.orphans = orphans  # a marked lease's task, or the end of a dead filing's lease
        self.records = records
        self.withdrawn = withdrawn  # Claims.withdraw's checks, asked after a claim
        self.contended = contended  # whether a rival has lately claimed in the pool too

    def take(
        self,
        lease_id: str,
        copy: PoolCopy,
        ask: Ask,
        gate: SchedulerState | None = None,
        held: HeldBack | None = None,
        chase: bool = True,
    ) -> Claimed | None:
        """The lease claimed for `ask`, or None when it is not this claim's to take now; a
        full ceiling raises CeilingReached (noted in `held`)."""
        lease = self.leases.get_lease(lease_id, consistent=False)
        if lease is None or lease.state is not LeaseState.PENDING:
            self.kernel.counters["heads_taken"] += 1  # the index lagged a claim (or an end)
            return None
        if held is not None and lease.concurrency_key is not None:
            held.key_of[lease.id] = lease.concurrency_key
            if lease.concurrency_key in held.full_keys:
                return None  # its key is full: not worth a write that would lose
        if gate is not None and self.gate.held_back(lease, gate):
            return None
        pool = copy.current()
        if copy.closed:
            return None  # paused (or its space archived) since the copy was read
        now = self.kernel.clock.now_ms()
        terms = claim_terms(lease, pool, ask.lease_seconds, now)
        if isinstance(terms, Refusal):
            return None
        task = None
        if lease.tp:
            # Written before its task: handed out only once the task is there.
            task = self.orphans.task_of(lease)
            if task is None:
                return None
        token = fencing.mint_lease_token(lease.id, self.kernel.ids.secret())
        ceilings = self.ceilings(pool, lease, now)
        # The minute's claim count is never given back; every other counter is, at the end.
        counted = tuple(f"{c.scope}:{c.name}" for c in ceilings if c.scope != RATE_CEILING)
        new = self._claimed(lease, pool, ask, terms, counted, token, now)
        intent = ask.intent if ask.intent is not None and not ask.intent.spent else None
        records: list[RecordWrite] = []
        if intent is not None:
            if intent.ref in (lease.shunned or ()):
                return None  # this claim's record moved on from it: never this claim's lease
            keep = terms.deadline // 1000 + CLAIM_ID_KEEP_SECONDS
            aimed = self.records.aim(intent, lease, pool, keep, in_claim=bool(ceilings))
            if isinstance(aimed, Claimed):
                return aimed
            if isinstance(aimed, RecordWrite):
                records.append(aimed)
            elif not aimed:
                return self._follow_sibling(intent, copy, ask, gate, held, chase)
            new = replace(new, claim_ref=intent.ref)
        # Who shunned it mattered only while it was pending, and its task is there now: a
        # claimed lease sheds the list and the task-pending mark.
        new = replace(new, shunned=None, tp=None)
        # Round trips since the lease was read: its task's, or the record's own write.
        if (lease.tp or (intent is not None and not records)) and self._changed(lease, pool):
            return None  # taken (or changed) meanwhile: as a lost write, without its cost
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
                return self.records.follow(intent, pool)
            return None
        if records and intent is not None:
            intent.won(lease.id)
        if self.withdrawn(new):
            self.kernel.counters["claims_withdrawn"] += 1
            return None  # ended by the check: never handed out, the claim looks further
        return Claimed(lease=new, token=token, pool=pool, task=task)

    def _follow_sibling(
        self,
        intent: ClaimIntent,
        copy: PoolCopy,
        ask: Ask,
        gate: SchedulerState | None,
        held: HeldBack | None,
        chase: bool,
    ) -> Claimed | None:
        """A concurrent call with this claim_id wrote the record first: follow it, and when it
        names a lease still pending, take that one (once) rather than a new candidate, whose
        aim would shun the very lease the sibling is claiming."""
        again = self.records.follow(intent, copy.current())
        if again is None and chase and intent.pending is not None:
            return self.take(intent.pending, copy, ask, gate, held, chase=False)
        return again

    def _changed(self, lease: Lease, pool: Pool) -> bool:
        """While the pool is contended, whether the lease is no longer as this claim read it
        before its round trips (read again, eventually consistent). Uncontended: not read."""
        if not self.contended(pool.name):
            return False
        now = self.leases.get_lease(lease.id, consistent=False)
        if now is not None and now.version == lease.version:
            return False
        self.kernel.counters["heads_taken"] += 1  # a rival's sign, as a head found taken
        return True

    def _claimed(
        self,
        lease: Lease,
        pool: Pool,
        ask: Ask,
        terms: ClaimTerms,
        counted: tuple[str, ...],
        token: str,
        now: int,
    ) -> Lease:
        """The lease as this claim writes it (started too, when the worker asked to start)."""
        new = self.kernel.apply(
            lease,
            must_move(lease.id, lease.state, lease.revoke, Action.CLAIM),
            {"worker_id": ask.worker_id, "worker_version": ask.worker_version},
            now,
            worker_id=ask.worker_id,
            worker_version=ask.worker_version,
            host=ask.host,
            token_hash=fencing.hash_token(token),
            claimed_by=ask.claimant,
            lease_seconds=terms.lease_seconds,
            renew_seconds=pool.renew_seconds,
            claimed_at=now,
            heartbeat_at=now,
            deadline=terms.deadline,
            due_at=terms.due_at,
            counted=counted or None,
            run_limit_seconds=terms.run_limit_seconds,
            run_deadline=terms.run_deadline,
        )
        if ask.start:
            new = self._claimed_and_started(new, now)
        return new

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

    def ceilings(self, pool: Pool, lease: Lease, now: int) -> list[Ceiling]:
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
        gated = self.kernel.gates.pool_gates()  # the pool row says which of the two have one
        if not gated or pool.space_ceiling:
            space = self.kernel.space_cached(pool.space)
            limit = space.max_active
            if limit is None and gated:
                limit = self.kernel.fresh_space(pool.space).max_active  # the copy was behind
            if limit is not None:
                found.append(Ceiling("space", space.key, +1, limit))
        if not gated or pool.instance_ceiling:
            limit = self.kernel.instance().max_active
            if limit is None and gated:
                limit = self.kernel.fresh_instance().max_active  # set since it was cached
            if limit is not None:
                found.append(Ceiling(INSTANCE_CEILING, INSTANCE_CEILING, +1, limit))
        return found
