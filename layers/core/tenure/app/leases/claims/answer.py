"""What a claim answers, what the worker asked for, and the checks that may withdraw a claim."""

from __future__ import annotations

from collections.abc import Callable

from tenure.app.leases.claims.intent import ClaimIntent
from tenure.app.ports import SchedulerState
from tenure.domain.model import Lease, Pool, Task
from tenure.records import record

# A check a claim makes after its write committed and before it answers: given the claimed
# lease, True when it must not be handed out (the check has then ended the lease itself), and
# the claim goes on to its next candidate. A subtree cancel that committed just before the
# claim's write is the case (app/tasks/cancel.py): the scheduler row the claim read to skip
# such leases was read before that commit.
Withdraw = Callable[[Lease], bool]
# Whether any of the claim's Withdraw checks ended the lease.
Withdrawn = Callable[[Lease], bool]


@record
class Claimed:
    lease: Lease
    token: str  # shown to the worker exactly once, never stored
    pool: Pool
    # The lease's task when the claim read it (a lease marked task-pending): the claim's
    # payload takes it from here rather than reading it again.
    task: Task | None = None


@record
class Ask:
    """What the claiming worker asked for."""

    worker_id: str
    worker_version: str | None
    lease_seconds: int | None
    claimant: str  # the worker token's id: only it renews what it claimed
    intent: ClaimIntent | None  # with a claim_id: where its record stands
    host: str | None
    start: bool = False  # the worker starts the job on the answer: claim it running


@record
class Pick:
    """The lease a final report's claim will take first (None: the queue showed none), and
    the scheduler row the pick read: the pick and that claim's first try are one look at the
    queue, so the try goes by the same row rather than read it again."""

    lease_id: str | None
    gate: SchedulerState
