"""Waiting claims: a worker token has at most MAX_WAITING_CLAIMS claims waiting in long polls
at once, across every function instance that serves it.

A waiting claim holds a function instance (and so a unit of its reserved concurrency) for the
whole wait: without a bound, one token's idle long polls (an agent looping on
`task_run_claim_next {wait: true}`, or a fleet of idle runners) could fill the claim
function, and every other worker's claims would be throttled behind them. The bound is per
token, kept in the table (one small row per token, `Store.wait_slots`), so it holds however
many instances serve the token's claims.

A claim takes a slot only when it is about to wait: its first look found nothing and it has
time left. So a claim that finds work at once (every claim of a busy worker) reads and writes
nothing here. With every slot held, the claim answers at once, as with `wait_seconds: 0`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from tenure.app.rows import ClaimRecords
from tenure.domain.errors import Conflict, Unavailable
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

# Claims of one worker token that may wait at once; the next answers at once.
MAX_WAITING_CLAIMS = 8
# Claims over MCP that may wait at once, of every token together. They wait in the API
# function, whose concurrency (50 reserved on AWS) also serves the operators, the board and
# MCP's heartbeats and reports: eight a token, a fleet of a few tokens' idle agents would take
# all of it. Past this, such a claim answers at once, as with `wait: false`.
SHARED_WAITING_CLAIMS = 16
# The key of their one row of slots: no token's id has this shape.
SHARED_WAITS = "api-function"
# A slot is held this long past the wait it was taken for (the wait's last look, the answer):
# a claim whose function died while waiting holds its slot no longer than its wait and this.
SLOT_MARGIN_MS = 2_000
# How many times one claim tries for a slot (one consistent read of the token's row and at
# most one conditional write each) before it answers at once: rivals that take the slots it
# read as free are other waiting claims of the same token.
SLOT_TRIES = 3


@record
class WaitSlot:
    token_id: str
    slot: int
    until: int  # epoch ms: the slot is this claim's until then


class Waits:
    def __init__(
        self, kernel: Kernel, records: ClaimRecords, slots: int = MAX_WAITING_CLAIMS
    ) -> None:
        self.kernel = kernel
        self.records = records  # the token's wait slots row
        self.slots = slots

    def take(self, token_id: str, wait_ms: int) -> WaitSlot | None:
        """A slot of the token's, held for `wait_ms` (and the margin), or None when every
        slot is held: the claim then answers without waiting."""
        store, clock = self.records, self.kernel.clock
        for _ in range(SLOT_TRIES):
            now = clock.now_ms()
            held = store.wait_slots(token_id)
            free = [slot for slot in range(self.slots) if held.get(slot, -1) < now]
            if not free:
                break
            # A free slot at random: rivals of the same token that read the row together
            # spread over the free slots rather than all lose the race for the first.
            slot = free[min(len(free) - 1, int(self.kernel.ids.jitter() * len(free)))]
            until = now + wait_ms + SLOT_MARGIN_MS
            try:
                store.take_wait_slot(token_id, slot, now, until)
            except Conflict:
                self.kernel.counters["lost_wait_slot_races"] += 1
                continue
            return WaitSlot(token_id, slot, until)
        self.kernel.counters["claims_not_waited"] += 1
        return None

    def give_back(self, held: WaitSlot) -> None:
        """Free the slot, unless it ran out and another claim took it. Never fails the claim
        that held it: a slot that cannot be written back runs out by itself at `until`."""
        with contextlib.suppress(Conflict, Unavailable):
            self.records.free_wait_slot(held.token_id, held.slot, held.until)


class Waiter:
    """One claim call's slots: its token's, and with `shared` one of those every token's
    claims share (MCP's, SHARED_WAITS), taken the first time the claim is about to wait and
    given back when the call ends (`done`), however it ends. Without both it does not wait."""

    def __init__(self, waits: Waits, token_id: str, shared: Waits | None = None) -> None:
        self.rows = [(waits, token_id)] + ([(shared, SHARED_WAITS)] if shared else [])
        self.held: list[tuple[Waits, WaitSlot]] = []
        self.refused = False

    def may_wait(self, seconds: float) -> bool:
        """Whether the claim may wait (on): it holds its slots, taken now if it has none."""
        if not self.held and not self.refused:
            for waits, key in self.rows:
                slot = waits.take(key, int(seconds * 1000))
                if slot is None:
                    self.done()
                    self.refused = True
                    break
                self.held.append((waits, slot))
        return bool(self.held)

    def done(self) -> None:
        held, self.held = self.held, []
        for waits, slot in held:
            waits.give_back(slot)
