"""The claim_id record of one claim call, as a state machine.

A claim with a `claim_id` keeps a record, keyed by (pool, worker token, worker_id,
claim_id), that names one lease: the one the claim is taking or has taken. Calls of one
claim_id (a retry whose answer was lost, or one that timed out while the first still runs)
follow that record, so that the claim id never carries more than one lease. Where the record
stands, for one call, is one of these states (docs/protocol-model.md walks every
interleaving of them):

    NONE            no record: no call of this claim_id has picked a lease yet
    PENDING(lease)  the record names a lease still pending that this claim has not shunned:
                    the call may take it (and no other, until the record moves on)
    OWN(lease)      the lease carries this claim and is held: the call answers it again,
                    under a fresh token
    NAMES(lease)    the lease can never be this claim's (held or ended under another claim,
                    shunned by this one): the record may move on to another candidate
    SPENT           the lease carried this claim and has ended: the call claims without a
                    record, as a new claim under an old key (final)

Reading the record and its lease (`found`, sorted by `judge`) puts a call in one of them;
pointing the record at a candidate (`pointed`) and winning it (`won`) move it on; `spend`
ends it. The protocol model checker (tests/unit/test_claim_protocol_model.py) sorts every
lease read with the same `judge`, so a change to it is checked against every interleaving.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tenure.app.ports import ClaimRecord
from tenure.domain.model import Lease


class At(Enum):
    """Where a claim's record stands (the module's docstring)."""

    NONE = "none"
    PENDING = "pending"
    OWN = "own"
    NAMES = "names"
    SPENT = "spent"


def judge(own: bool, held: bool, pending: bool, shunned: bool) -> At:
    """Where a record naming a lease stands, from one read of that lease: whether it carries
    this claim (`own`), is held, is pending, and has this claim in its `shunned`."""
    if own:
        return At.OWN if held else At.SPENT
    if pending and not shunned:
        return At.PENDING
    return At.NAMES


@dataclass
class ClaimIntent:
    """One claim call's claim_id: its record's key, the ref its lease carries, and where the
    record stands (`at`, and the lease it names). With `on`, the record is not a row of its
    own but the ended lease of the final report that carries the claim (its `next_lease`, as
    this call last read or wrote that row): the same states, the same moves."""

    record: ClaimRecord
    ref: str
    at: At = At.NONE
    lease: str | None = None
    on: Lease | None = None

    @property
    def names(self) -> str | None:
        """The lease the record names, as this call last learnt it (None: no record)."""
        return self.lease

    @property
    def pending(self) -> str | None:
        """The lease this call may still take, the only one while the record names it."""
        return self.lease if self.at is At.PENDING else None

    @property
    def spent(self) -> bool:
        return self.at is At.SPENT

    # -- transitions ------------------------------------------------------------------------

    def found_none(self) -> None:
        """The record was read and is not there."""
        if self.at is not At.SPENT:
            self.at = At.NONE
        self.lease = None

    def found(self, lease_id: str, at: At) -> None:
        """The record was read naming `lease_id`, which stands `at` (from `judge`, or NAMES
        when the lease is not there)."""
        if self.at is not At.SPENT:
            self.at = at
        self.lease = lease_id

    def pointed(self, lease_id: str) -> None:
        """This call pointed the record at `lease_id`, a pending lease it is about to take."""
        self.at, self.lease = At.PENDING, lease_id

    def won(self, lease_id: str) -> None:
        """This call's claim of `lease_id`, with the record's write, committed."""
        self.at, self.lease = At.OWN, lease_id

    def spend(self) -> None:
        """The record's lease was this claim's and has ended (or the record is of the old kind,
        written once and never moved on): the call goes on without it."""
        self.at = At.SPENT
