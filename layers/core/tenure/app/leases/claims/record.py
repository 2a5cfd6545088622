"""The reads and writes of a claim's claim_id record: follow it, answer its lease again, and
point it at the next candidate (the states they move through are in intent.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.leases.claims.answer import Claimed, Withdrawn
from tenure.app.leases.claims.intent import At, ClaimIntent, judge
from tenure.app.ports import ClaimRecord, RecordWrite
from tenure.app.rows import ClaimRecords, LeaseRows
from tenure.domain import fencing
from tenure.domain.errors import Conflict
from tenure.domain.events import LEASE_CLAIM_RETRIED
from tenure.domain.model import Lease, Pool
from tenure.domain.states import REPORTABLE, LeaseState

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Records:
    def __init__(
        self,
        kernel: Kernel,
        leases: LeaseRows,
        claims: ClaimRecords,
        withdrawn: Withdrawn,
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.claims = claims
        self.withdrawn = withdrawn  # Claims.withdraw's checks, asked after a claim

    @staticmethod
    def intent(pool: str, claimant: str, worker_id: str, claim_id: str) -> ClaimIntent:
        """A claim call's intent, before it has read its record."""
        key = ClaimRecord(pool, claimant, worker_id, claim_id, "", 0)
        return ClaimIntent(key, fencing.claim_ref(pool, claimant, worker_id, claim_id))

    @staticmethod
    def intent_on(ended: Lease, claimant: str, worker_id: str, claim_id: str) -> ClaimIntent:
        """The intent a final report's claim keeps on the lease it ended (`next_lease`): the
        lease picked before the report's write, still pending then, is the one this call
        takes first (its claim re-reads it, and the claim's write is conditional on it)."""
        intent = Records.intent(ended.pool, claimant, worker_id, claim_id)
        intent.on = ended
        if ended.next_lease is not None:
            intent.found(ended.next_lease, At.PENDING)
        return intent

    def _copy_shows_none(self, intent: ClaimIntent) -> bool:
        """Whether an eventually consistent copy of the claim's own record row (half a read
        unit) shows no record: what a new claim_id finds."""
        key = intent.record
        at = (key.pool, key.claimant, key.worker_id, key.claim_id)
        return intent.on is None and self.claims.find_claim(*at, consistent=False) is None

    def _find(self, intent: ClaimIntent) -> ClaimRecord | None:
        """The claim's record as it stands now: its own row, or the ended lease carrying it."""
        key = intent.record
        if intent.on is None:
            return self.claims.find_claim(key.pool, key.claimant, key.worker_id, key.claim_id)
        on = self.leases.get_lease(intent.on.id)  # consistent, as the record's own read
        if on is None or on.next_claim != intent.ref or on.next_lease is None:
            return None
        intent.on = on
        return replace(key, lease_id=on.next_lease)

    def follow(self, intent: ClaimIntent, pool: Pool, copy_first: bool = False) -> Claimed | None:
        """Read the claim's record and learn where it stands: its lease again under a fresh
        token when that lease is this claim's own and still held (a retry whose answer was
        lost); else None, with `intent` saying which lease the record names, whether the call
        may still take it (PENDING), or whether the claim_id is spent (SPENT).

        `copy_first` (a claim's first look at its record): a copy that shows no record is
        taken as none. It decides nothing on its own: the record's first write lands only if
        no record exists (`aim`), so a record the copy missed makes that write lose, and the
        claim then follows the record read consistently; and before a claim answers that
        nothing could be taken it reads the record consistently again."""
        key = intent.record
        found = None if copy_first and self._copy_shows_none(intent) else self._find(intent)
        if found is None:
            intent.found_none()
            return None
        lease = self.leases.get_lease(found.lease_id)
        if lease is None:
            intent.found(found.lease_id, At.NAMES)
            return None
        ours = lease.claim_ref == intent.ref if found.intent else lease.claimed_by is not None
        own = ours and lease.claimed_by == key.claimant and lease.worker_id == key.worker_id
        shunned = intent.ref in (lease.shunned or ())
        at = judge(own, lease.state in REPORTABLE, lease.state is LeaseState.PENDING, shunned)
        if at is At.OWN and self.withdrawn(lease):
            # Claimed under a subtree cancel, and its end by the claim that withdrew it
            # never landed: never handed out. Ended now (its `claim_ref` with it), it is
            # no longer this claim's own, and the record moves on from it.
            at = At.NAMES
        elif not own and not found.intent:
            at = At.SPENT  # a record of the old kind is written once, never moved on
        intent.found(found.lease_id, at)
        if at is At.OWN:
            again = self._claimed_before(lease, pool, intent)
            if again is not None:
                return again
            # The key's lease has ended: this is a new claim under an old key. Its record
            # stays where it is, so the new lease is taken without one.
            intent.spend()
        return None

    def _claimed_before(self, lease: Lease, pool: Pool, intent: ClaimIntent) -> Claimed | None:
        """A retried claim whose answer was lost: the same lease, under a fresh token (the
        lost one dies with the old hash). None when that lease is no longer held."""
        worker_id, claim_id = intent.record.worker_id, intent.record.claim_id

        def reissue(current: Lease) -> Claimed | None:
            if current.state not in REPORTABLE or current.worker_id != worker_id:
                return None
            token = fencing.mint_lease_token(current.id, self.kernel.ids.secret())
            now = self.kernel.clock.now_ms()
            # The worker never heard the first answer: its lease (and its self-fence) counts
            # from this one, so the deadline must too, never from the claim it missed. Like a
            # heartbeat, it leaves `due_at` (an index write) to the sweeper's re-index.
            seconds = current.lease_seconds or pool.toleration_seconds
            deadline = max(current.deadline or 0, fencing.fresh_deadline(now, 1000 * seconds))
            new = replace(
                current,
                deadline=deadline,
                token_hash=fencing.hash_token(token),
                version=current.version + 1,
                event_type=LEASE_CLAIM_RETRIED,
                event_data={"worker_id": worker_id, "claim_id": claim_id},
                updated_at=now,
            )
            self.kernel.write(current, new)
            return Claimed(lease=new, token=token, pool=pool)

        self.kernel.counters["claim_retries"] += 1
        return self.kernel.settle(lease, reissue)

    def aim(
        self, intent: ClaimIntent, lease: Lease, pool: Pool, keep: int, in_claim: bool = False
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
            before = self.leases.get_lease(intent.names)
            if before is not None and before.claim_ref == intent.ref:
                again = self.follow(intent, pool)
                return again if again is not None else False
            if (
                before is not None
                and before.state is LeaseState.PENDING
                and intent.ref not in (before.shunned or ())
                and not self._shun(before, intent)
            ):
                return False
        if intent.on is not None:
            return self._repoint(intent, lease.id)
        record = replace(intent.record, lease_id=lease.id, expires_at=keep)
        if in_claim:
            return RecordWrite(record, intent.names)
        try:
            self.claims.point_claim(record, intent.names)
        except Conflict:
            self.kernel.counters["lost_claim_races"] += 1
            return False
        intent.pointed(lease.id)
        return True

    def _repoint(self, intent: ClaimIntent, lease_id: str) -> bool:
        """Point the intent kept on an ended lease at `lease_id`: a fenced write of that row
        as this call last read it, so it lands only while the intent still names what this
        call believes (the record's own conditional move, on the ended lease). Made before the
        claim, never in its transaction: a crash between leaves the intent naming a lease the
        resend can still take, as with the record."""
        on = intent.on
        assert on is not None
        moved = replace(
            on,
            next_lease=lease_id,
            version=on.version + 1,
            event_type=None,  # no transition: nothing for the timeline
            event_data=None,
            updated_at=self.kernel.clock.now_ms(),
        )
        try:
            self.kernel.write(on, moved)
        except Conflict:
            self.kernel.counters["lost_claim_races"] += 1
            return False
        intent.on = moved
        intent.pointed(lease_id)
        return True

    def _shun(self, before: Lease, intent: ClaimIntent) -> bool:
        """Add this claim's ref to a pending lease's `shunned` before the record moves on
        from it; False when the fenced write lost (the lease changed since it was read)."""
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
        return True
