"""The long poll of a claim, claim-next and claim-exact alike: look, and while nothing is
found and time is left, rest a poll interval and look again."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from tenure.app.catalog import POOL_REFRESH_MS
from tenure.app.leases.claims.answer import Claimed
from tenure.app.leases.claims.waits import Waiter
from tenure.domain.model import Pool

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.workers import Workers

# How long an idle long-poll waits between looks at the queue.
CLAIM_POLL_SECONDS = 0.5
# A claim about to write reads its pool again when its copy is older than this: a claim
# that read the pool before a ceiling was set then lands well inside the settle after which
# the ceiling counts the held leases a second time (setup/pools.py), with room for the
# write's own round trips. Costs a read only when a long poll finds work after resting.
FRESH_FOR_TAKE_MS = 1_000


class Again(Enum):
    """A look that found candidates but won none: a lost race is not an empty queue, so the
    poll looks again at once, without resting."""

    AT_ONCE = "at once"


# One look at the queue: the lease won, Again.AT_ONCE, or None (rest, then look again).
Look = Callable[[], "Claimed | Again | None"]


class LongPoll:
    """One claim call's wait: the pool's settings as last read (`pool`, and `closed` when it
    hands out nothing), refreshed every POOL_REFRESH_MS, and the worker marked seen after each
    rest (a worker waiting in a long poll is in contact all along: a claim is a sign of life)."""

    def __init__(
        self,
        kernel: Kernel,
        workers: Workers,
        waiter: Waiter,
        worker_id: str,
        worker_version: str | None,
    ) -> None:
        self.kernel = kernel
        self.workers = workers
        self.waiter = waiter
        self.worker_id = worker_id
        self.worker_version = worker_version
        self.give_up_at = 0
        self.pool_name = ""
        self.pool: Pool | None = None
        self.closed = False
        self.looked_at = 0

    def open(self, pool_name: str) -> Pool:
        """The pool's settings read for the first look (fresh: a paused pool or an archived
        space hands out nothing, and a ceiling just set counts, from the moment it commits)."""
        self.pool_name = pool_name
        self.pool, self.closed = self._settings(pool_name)
        self.looked_at = self.kernel.clock.now_ms()
        return self.pool

    def current(self) -> Pool:
        """The pool's settings for a claim about to write: read again when older than
        FRESH_FOR_TAKE_MS."""
        if self.pool is None or self.kernel.clock.now_ms() - self.looked_at > FRESH_FOR_TAKE_MS:
            self.open(self.pool_name)
        assert self.pool is not None
        return self.pool

    def seen(self) -> None:
        """Mark the worker seen: a claim, and every rest of its wait, is a sign of life."""
        assert self.pool is not None
        self.workers.mark_seen(self.pool, self.worker_id, self.worker_version)

    def until(self, seconds: float) -> int:
        """Wait at most `seconds` from now; the instant the wait gives up (epoch ms)."""
        self.give_up_at = self.kernel.clock.now_ms() + int(seconds * 1000)
        return self.give_up_at

    def run(self, looks: int, look: Look, rested: Callable[[Pool], None]) -> Claimed | None:
        """Up to `looks` looks, resting between those that find nothing while time is left
        and the waiter may wait; `rested` is told the pool after each rest."""
        for _ in range(looks):
            found = look()
            if isinstance(found, Claimed):
                return found
            if found is Again.AT_ONCE:
                continue
            if not self.rest():
                break
            assert self.pool is not None
            rested(self.pool)
        return None

    def rest(self) -> bool:
        """Wait one poll interval, or False when the wait is over (no time left, or no wait
        slot for this worker token)."""
        assert self.pool is not None
        remaining = (self.give_up_at - self.kernel.clock.now_ms()) / 1000
        if remaining <= 0 or not self.waiter.may_wait(remaining):
            return False
        self.kernel.clock.sleep(min(CLAIM_POLL_SECONDS, remaining))
        if self.kernel.clock.now_ms() - self.looked_at >= POOL_REFRESH_MS:
            self.open(self.pool_name)
        self.seen()
        return True

    def _settings(self, pool_name: str) -> tuple[Pool, bool]:
        """The pool as it is now, and whether it hands out nothing (paused, or its space
        archived). The pool row says whether its space is archived and whether its space and
        the instance have ceilings (every write that changes those writes it before it
        answers); until the table's schema has it, the space and instance rows are read fresh
        with it, as an earlier release did."""
        pool = self.kernel.fresh_pool(pool_name)
        if self.kernel.gates.pool_gates():
            return pool, pool.paused or pool.space_archived
        closed = pool.paused or self.kernel.fresh_space(pool.space).archived
        self.kernel.fresh_instance()
        return pool, closed
