"""The lease a report is about: the lease a lease token acts on, read once per request and
refused for what its end has taken away, and a report refused as stale when it names another
fence or its lease's job has moved on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from tenure.app.catalog import note, taken
from tenure.app.ports import Clock, Ids
from tenure.app.rows import TimelineRows
from tenure.domain import authz
from tenure.domain.errors import StaleLease
from tenure.domain.events import LEASE_STALE_REPORT
from tenure.domain.model import Event, Lease, Principal


class OwnLeases:
    def __init__(self, read: Callable[[str], Lease], clock: Clock) -> None:
        self.read = read  # a consistent read of the lease (LeaseNotFound when there is none)
        self.clock = clock

    def own_lease(
        self, actor: Principal, lease_id: str, use: str = authz.ACT, read: Lease | None = None
    ) -> Lease:
        """The lease of this lease token, read once, and refused for a `use` its end has
        taken away (authz.require_lease_power): the one check on the row itself, so a
        principal cached from before the end is caught here. `read`: the row this request
        already read consistently (a worker's bound report resolves the lease first), taken
        instead of a second read; so is the row the request's own token check read
        (`token_checked`). A write judged on it is still conditional on its state and fence,
        and one that loses is judged again on a fresh read. A lease token whose digest the
        row no longer carries (a claim retry replaced it) is refused as unknown, judged on a
        consistent read (authz.require_lease_token)."""
        authz.require_lease(actor, lease_id)
        checked = self.token_checked_row(lease_id)
        if read is None or read.id != lease_id:
            read = checked
        if read is not None and read.id == lease_id:
            lease = read
            if not authz.carries_token(actor, lease) and lease is not checked:
                lease = self.read(lease_id)  # a copy may predate the claim that minted it
        else:
            lease = self.read(lease_id)
        authz.require_lease_token(actor, lease)
        authz.require_lease_power(authz.lease_ended_at(lease), self.clock.now_ms(), use)
        return lease

    def token_checked(self, lease: Lease) -> None:
        """The lease row a lease token was just checked against, read consistently in this
        request: kept for the request's first own_lease of it. Outside a request (the
        authorizer's own function) nothing is kept."""
        note("lease", lease.id, lease)

    def token_checked_row(self, lease_id: str) -> Lease | None:
        """The row `token_checked` kept for this lease in this request, handed out once."""
        return taken("lease", lease_id, Lease)

    def acting_lease(self, actor: Principal) -> Lease:
        """The lease a lease token acts from (its space, its task), while it is active."""
        return self.own_lease(actor, actor.lease_id or "")


class StaleReports:
    """Refusing a report from a lease whose job has moved on (or naming another fence), and
    recording it on the subject's timeline (`lease.stale_report`) so an operator sees the late
    worker."""

    def __init__(
        self, timeline: TimelineRows, clock: Clock, ids: Ids, counters: Counter[str]
    ) -> None:
        self.timeline = timeline
        self.clock = clock
        self.ids = ids
        self.counters = counters

    def refuse_if_stale(self, lease: Lease, what: str) -> None:
        if lease.superseded:
            self.record_stale(lease, what, lease.fence)
            raise StaleLease(
                f"lease {lease.id} (fence {lease.fence}) was {lease.end_reason or lease.state}; "
                "its job has moved on"
            )

    def refuse_old_fence(self, lease: Lease, fence: int | None, what: str) -> None:
        """A report naming a fence other than the lease's is stale, whatever became of the
        lease, and is recorded on its subject's timeline (`lease.stale_report`)."""
        if fence is not None and fence != lease.fence:
            self.record_stale(lease, what, fence)
            raise StaleLease(f"fence {fence} of lease {lease.id} is not current")

    def record_stale(self, lease: Lease, what: str, fence: int) -> None:
        self.counters["stale_reports"] += 1
        self.timeline.put_event(
            self.event(lease, LEASE_STALE_REPORT, {"report": str(what), "fence": fence})
        )

    def event(self, lease: Lease, type_: str, data: dict[str, Any]) -> Event:
        """A timeline event about the lease, at its fence, now."""
        return Event(
            id=self.ids.new_id("ev"),
            subject_kind=lease.subject_kind,
            subject_id=lease.subject_id,
            type=type_,
            at=self.clock.now_ms(),
            lease_id=lease.id,
            fence=lease.fence,
            data=data,
        )
