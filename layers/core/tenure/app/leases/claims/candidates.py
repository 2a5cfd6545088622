"""Which candidate a claim-next tries next: the queue's heads by priority tier, in order or
spread after a lost race, passing over keys known full (`HeldBack`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tenure.app.dispatch_controls import ClaimGate, queue_tiers
from tenure.app.ports import KEY_CEILING, RATE_CEILING, SchedulerState, key_ceiling, split_ceiling
from tenure.app.rows import QueueRows
from tenure.domain.errors import CeilingReached
from tenure.domain.model import Lease, Pool

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.ports import Clock

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


@dataclass
class HeldBack:
    """What one claim call has learnt is full, so that it does not pay again for writes that
    would lose: the concurrency keys found full (re-read after each poll interval, one small
    read per key) with the key of each lease read, and the minute whose claims ran out."""

    queues: QueueRows
    clock: Clock
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

    def rate_limited(self, pool: Pool) -> bool:
        """The pool's claims for this minute are used up (a fixed window: the next minute
        starts afresh, and so does a pool whose limit was lifted)."""
        if self.rate_full_in is None:
            return False
        if pool.max_claims_per_minute is None or self.clock.now_ms() // 60_000 != self.rate_full_in:
            self.rate_full_in = None
        return self.rate_full_in is not None

    def recheck_keys(self, pool: Pool) -> None:
        if pool.max_active_per_key is None:
            self.full_keys.clear()
            return
        limit = pool.max_active_per_key
        self.full_keys = {
            key
            for key in self.full_keys
            if self.queues.held_count(KEY_CEILING, key_ceiling(pool.name, key)) >= limit
        }


class Candidates:
    """The heads a look tries, and, per pool, until when this process's claims spread
    (shuffle) rather than go in order."""

    def __init__(self, kernel: Kernel, gate: ClaimGate, queues: QueueRows) -> None:
        self.kernel = kernel
        self.gate = gate
        self.queues = queues
        self._contended: dict[str, int] = {}

    def held_back(self) -> HeldBack:
        return HeldBack(self.queues, self.kernel.clock)

    def look(
        self,
        pool: Pool,
        tried: set[str],
        gate: SchedulerState,
        held: HeldBack,
        first_only: bool = False,
    ) -> Heads:
        """This look's heads. Highest priority first: the first partition with an untried
        due head is the one this look takes from (a pool with no marked priority reads one).
        Leases whose key is known full are passed over, not counted as tries, so they hide
        neither the rest of their partition nor a lower priority's. `first_only`: the caller
        takes the first head alone (a final report's pick), so while the heads go in order
        one is read, the same one the full read would put first; while spreading, as many
        as ever, to draw from."""
        skip = held.known_full()
        want = CONTENDED_CANDIDATES if self.spreading(pool.name) else CLAIM_CANDIDATES
        if first_only and not self.spreading(pool.name):
            want = 1
        fresh: list[str] = []
        for priority in queue_tiers(pool):
            fresh = self.gate.candidates(pool.name, tried, gate, want, priority=priority, skip=skip)
            if fresh:
                break
        order = fresh[:want]
        if self.spreading(pool.name):
            order = self.kernel.ids.shuffle(order)
        return Heads(self, pool.name, order, tried, held)

    def rivalry(self) -> int:
        """Signs of a rival claimer so far: races lost, and heads found taken already."""
        return self.kernel.counters["lost_claim_races"] + self.kernel.counters["heads_taken"]

    def contend(self, pool: str) -> None:
        """This process's claims in `pool` spread for CONTENDED_MS from now."""
        self._contended[pool] = self.kernel.clock.now_ms() + CONTENDED_MS

    def spreading(self, pool: str) -> bool:
        until = self._contended.get(pool)
        if until is None:
            return False
        if until <= self.kernel.clock.now_ms():
            del self._contended[pool]
            return False
        return True


class Heads:
    """One look's candidates, tried one at a time (each added to `tried`: the queue index
    lags a claim, so a call never retries the same lease before it rests)."""

    def __init__(
        self, of: Candidates, pool: str, order: list[str], tried: set[str], held: HeldBack
    ) -> None:
        self.of = of
        self.pool = pool
        self.order = order
        self.found = bool(order)
        self.tried = tried
        self.held = held
        self._lost_before = 0
        self._withdrawn_before = 0

    def __iter__(self) -> Iterator[str]:
        while self.order:
            lease_id = self.order.pop(0)
            if self.held.key_of.get(lease_id) in self.held.full_keys:
                continue  # its key was found full in this look: no read
            self.tried.add(lease_id)
            self._lost_before = self.of.rivalry()
            self._withdrawn_before = self.of.kernel.counters["claims_withdrawn"]
            yield lease_id

    def withdrawn(self) -> bool:
        """The last try's claim was withdrawn: the scheduler row read for this look predates
        a subtree cancel, so the look ends rather than claim and withdraw its neighbours."""
        return self.of.kernel.counters["claims_withdrawn"] > self._withdrawn_before

    def raced(self) -> None:
        """After a try that won nothing: a rival is claiming here too (it won the write, or
        took the head since the index was read), so spread from now on."""
        if self.of.rivalry() > self._lost_before:
            if not self.of.spreading(self.pool):
                self.order = self.of.kernel.ids.shuffle(self.order)
            self.of.contend(self.pool)

    def full(self) -> None:
        """A ceiling other than a key's is full: nothing is claimable until a held lease
        ends, so this look found nothing to go on with."""
        self.found = False
