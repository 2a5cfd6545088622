"""Run timeouts: a claim records the smaller of the run's and the pool's max_run_seconds and
files the lease in the due index at whichever comes first, its deadline or its run deadline
(`index_at`), so the sweeper's one due read (app/sweep.py) finds it with no read of its own.
Past its run deadline it is asked to stop as a kill asks (revoke "kill", one conditional
write), and its index entry goes back to its deadline; it ends killed with end_reason
timed_out when its worker reports, or when its toleration passes unheard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.app.kernel import over
from tenure.app.ports import Change
from tenure.domain.errors import Conflict
from tenure.domain.model import Lease
from tenure.domain.transitions import Action, move

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class RunTimeouts:
    """Asking a held lease past its run deadline to stop."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def time_out(self, lease: Lease) -> Lease | None:
        """Ask a held lease past its run deadline to stop (revoke kill); None when it moved
        on first (a report, a heartbeat, an operator) — the next pass looks again."""
        now = self.kernel.clock.now_ms()
        to = move(lease.id, lease.state, lease.revoke, Action.TIME_OUT)
        if to is None:
            return None  # asked to kill already: that kill stands
        data = {"by": "sweeper", "max_run_seconds": lease.run_limit_seconds}
        new = self.kernel.apply(lease, to, data, now, timed_out_at=now, due_at=lease.deadline)
        try:
            self.kernel.commit(Change(leases=[over(lease, new)]))
        except Conflict:
            return None
        return new


def may_time_out(lease: Lease) -> bool:
    """Whether the sweeper may still ask this lease to stop for its run timeout: it has one,
    has not been asked yet, and is not being killed already (an operator's kill stands; the
    lease then ends when its worker reports or its toleration passes, like any kill)."""
    return (
        lease.run_deadline is not None
        and lease.timed_out_at is None
        and move(lease.id, lease.state, lease.revoke, Action.TIME_OUT) is not None
    )


def index_at(lease: Lease, deadline: int) -> int:
    """Where a held lease sits in the due index: its deadline, or its run deadline if that
    comes first and the sweeper may still act on it."""
    if lease.run_deadline is not None and may_time_out(lease):
        return min(deadline, lease.run_deadline)
    return deadline
