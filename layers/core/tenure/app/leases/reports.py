"""Reports from the holder: start, heartbeats, and the final complete / fail / release."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, fields, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tenure.app.kernel import over
from tenure.app.leases.signals import Told, WorkerSignals
from tenure.app.ports import Change
from tenure.app.rows import LeaseRows
from tenure.app.workers import SEEN_LAG_SHARE, SEEN_WRITE_SHARE
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    InvalidTransition,
    LeaseNotFound,
    StaleLease,
    TenureError,
    ValidationFailed,
)
from tenure.domain.model import Lease, Pool, Principal
from tenure.domain.signals import Known, known_of
from tenure.domain.states import REPORTABLE, EndReason, LeaseState, PoolKind, ReportKind, Revoke
from tenure.domain.task_keys import MAX_SCANNED_CHARS, TASK_ID_SHAPE
from tenure.domain.transitions import Action, SignalKey, move, must_move
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel
    from tenure.app.workers import Workers

# What an absent field of a final report means (every field of complete is optional, and
# outcome defaults to success); two reports are the same when equal after these.
_DEFAULTS: dict[ReportKind, dict[str, Any]] = {
    ReportKind.COMPLETE: {"outcome": "success"},
    ReportKind.FAIL: {},
    ReportKind.RELEASE: {},
}
# Transport fields: they say which report this is, not what it reports.
_NOT_REPORTED = ("report_id", "fence")


@record
class Beat:
    lease: Lease
    revoke: Revoke | None
    wrote: bool = False

    @property
    def state(self) -> LeaseState:
        return self.lease.state

    @property
    def deadline(self) -> int | None:
        return self.lease.deadline


@record
class Vouched:
    """A worker heartbeat's answer for a lease its signal vouched for, unread: the last
    answer's, since nothing the heartbeat must report has happened to the lease."""

    state: LeaseState
    deadline: int | None
    revoke: Revoke | None


Answer = Beat | Vouched | TenureError


@record
class WorkerBeats:
    answers: list[tuple[str, int, Answer]]
    signal: str | None  # what the caller echoes next (None: it asked for none)


def normalized(kind: ReportKind, body: dict[str, Any]) -> dict[str, Any]:
    """The report with its defaults applied and its nulls dropped (a null is an absence)."""
    merged = {**_DEFAULTS[kind], **body}
    return {k: v for k, v in merged.items() if v is not None and k not in _NOT_REPORTED}


def report_action(kind: ReportKind, report: dict[str, Any]) -> Action:
    if kind is ReportKind.RELEASE:
        return Action.RELEASE
    if kind is ReportKind.FAIL:
        return Action.FAIL
    return Action.COMPLETE if report.get("outcome") == "success" else Action.COMPLETE_FAILURE


def revoke_signal(lease: Lease) -> Revoke | None:
    """What the heartbeat tells the holder: pause while paused, cancel or kill while an
    operator is stopping it, nothing otherwise."""
    if lease.state is LeaseState.PAUSED:
        return Revoke.PAUSE
    if lease.state is LeaseState.CANCELLING:
        return lease.revoke or Revoke.CANCEL
    return None


@record
class Ending:
    """The value a final report's `contribute` stages pass along: the lease as read, the lease
    as the report ends it, and the other rows the report's one commit writes. The ended lease is
    a field of its own, so a stage that adds a lease row (a retry's next run) can never be taken
    for it."""

    before: Lease  # the lease row the report was judged on
    ended: Lease  # the row the report writes in its place
    kind: ReportKind
    report: dict[str, Any]  # as it will be stored (after the `resolve` stages)
    rows: Change = field(default_factory=Change)  # every other row of the commit

    def with_rows(self, more: Change) -> Ending:
        """This ending with `more`'s rows added after the ones it has."""
        rows = self.rows
        joined = {f.name: [*getattr(rows, f.name), *getattr(more, f.name)] for f in fields(Change)}
        return replace(self, rows=Change(**joined))

    def change(self) -> Change:
        """The one commit: the ended lease over the row it was judged on, first, then the
        other rows."""
        return replace(self.rows, leases=[over(self.before, self.ended), *self.rows.leases])


# The stages of a final report (complete, fail, release), each a named, ordered tuple built
# by the composition root. `prepare` runs before the write, on the lease as read and the body
# as sent, and may refuse the report (the lease stays as it was) or return the body as it is
# to be taken (a task's key read as its id); `resolve` rewrites the report as it will be
# stored (before the lease row is built); `contribute` adds rows to the one conditional
# commit; `after` runs once the report has landed and never fails it.
Prepare = Callable[[Lease, ReportKind, dict[str, Any]], dict[str, Any]]
Resolve = Callable[[Lease, ReportKind, dict[str, Any]], dict[str, Any]]
Contribute = Callable[[Ending], Ending]
After = Callable[[Lease, Lease, ReportKind, dict[str, Any]], None]


class Applies(Enum):
    """What a stage applies to, declared with it in `compose()` and checked here, on the
    report and the lease, before the stage runs: a report a stage has nothing to do with never
    enters the stage's module. (A `prepare` stage sees no ended lease yet, so only the report's
    own terms apply to it.)"""

    EVERY_REPORT = "every report"
    CREATED_TASKS = "a complete naming created tasks"
    TASK_IDS_IN_RESULT = "a complete whose result holds task-id-shaped text"
    CLASSIFIER_SUCCESS = "a success on a classifier pool"
    FAILURE = "a report that ends the lease failed"


S = TypeVar("S")  # the stage's function: a Prepare, Resolve, Contribute or After


@record
class Stage(Generic[S]):
    run: S
    applies: Applies = Applies.EVERY_REPORT


@record
class Completion:
    prepare: tuple[Stage[Prepare], ...] = ()
    resolve: tuple[Stage[Resolve], ...] = ()
    contribute: tuple[Stage[Contribute], ...] = ()
    after: tuple[Stage[After], ...] = ()


def _holds_task_ids(result: Any) -> bool:
    if result is None:
        return False
    text = result if isinstance(result, str) else repr(result)
    return TASK_ID_SHAPE.search(text[:MAX_SCANNED_CHARS]) is not None


class Reports:
    """A holder's reports: start, heartbeats (its own and a worker's for all its leases) and
    the final reports, each one conditional write judged by the transition table."""

    def __init__(
        self,
        kernel: Kernel,
        workers: Workers,
        completion: Completion,
        *,
        leases: LeaseRows,
        signals: WorkerSignals,
    ) -> None:
        self.kernel = kernel
        self.leases = leases
        self.signals = signals
        self.workers = workers
        self.completion = completion

    def start(self, actor: Principal, lease_id: str) -> Lease:
        lease = self.kernel.owned.own_lease(actor, lease_id, authz.REPORT)

        def step(current: Lease) -> Lease:
            authz.require_lease_token(actor, current)  # a fresh read after a lost write too
            self.kernel.stale.refuse_if_stale(current, "start")
            step_to = move(current.id, current.state, current.revoke, Action.START)
            if step_to is None:
                return current  # already started: starting again changes nothing
            pool = self.kernel.catalog.pool(current.pool)
            seconds = current.lease_seconds or pool.toleration_seconds
            new = self._started(current, seconds, pool, "start")
            self.kernel.write(current, new)
            return new

        return self.kernel.settle(lease, step)

    def heartbeat(self, actor: Principal, lease_id: str, lease_seconds: int | None) -> Beat:
        authz.require_lease(actor, lease_id)
        # A row the request's token check read consistently is what the cheap read and the
        # consistent read after it would be for: the heartbeat is judged on it.
        # A copy that does not carry this token's digest is read again consistently.
        lease = self.kernel.owned.token_checked_row(lease_id) or self._read_for_beats(
            [(lease_id, None)], lease_seconds, lambda row: authz.carries_token(actor, row)
        ).get(lease_id)
        if lease is None:
            raise LeaseNotFound(f"lease {lease_id} does not exist")
        beat = self._beat(lease, lease_seconds, actor)
        if lease.worker_id:
            # One write per heartbeat at most: the worker's last_seen waits a beat when the
            # lease's deadline was just written, unless it is getting old.
            self.workers.mark_seen(
                self.kernel.catalog.pool(lease.pool),
                lease.worker_id,
                lease.worker_version,
                SEEN_LAG_SHARE if beat.wrote else SEEN_WRITE_SHARE,
            )
        return beat

    def worker_heartbeat(
        self,
        actor: Principal,
        worker_id: str,
        leases: list[tuple[str, int]],
        runtime: dict[str, Any] | None = None,
        credentials: dict[str, Any] | None = None,
        pool: str | None = None,
    ) -> list[tuple[str, int, Answer]]:
        """`worker_beats` for a caller that asks for no signal: every lease read."""
        return self.worker_beats(actor, worker_id, leases, runtime, credentials, pool).answers

    def worker_beats(
        self,
        actor: Principal,
        worker_id: str,
        leases: list[tuple[str, int]],
        runtime: dict[str, Any] | None = None,
        credentials: dict[str, Any] | None = None,
        pool: str | None = None,
        signal: str | None = None,
    ) -> WorkerBeats:
        """Renew every lease one worker holds in one call; one answer per lease. `runtime` and
        `credentials` are noted for the pools of those leases, and for `pool` —
        which a token limited to one pool may leave out. Never dropped: when no lease accepted
        here tells the pool and the token covers several, the heartbeat is 422 naming `pool`
        (nothing was renewed then: every lease it listed was refused).

        `signal`: what the caller's last answer carried ("" for none yet; None: the caller
        asks for none, and every lease is read as before). While the worker's signal epoch has
        not moved since, a lease it vouches for, named at its fence and with no deadline due,
        is answered from it unread (domain/signals.py); the answer carries the next signal."""
        authz.require_worker(actor, None)
        fencing.refuse_token_fields(
            {
                "worker_id": worker_id,
                "runtime.reason": (runtime or {}).get("reason"),
                "credentials.reason": (credentials or {}).get("reason"),
            }
        )
        says = runtime is not None or credentials is not None
        if pool is None and says and actor.pools is not None and len(actor.pools) == 1:
            pool = actor.pools[0]
        if pool is not None:
            authz.require_worker(actor, pool)
            self.kernel.catalog.pool(pool)  # an unknown pool is 404 before anything is renewed
        told = self.signals.told(SignalKey(str(actor.token_id), worker_id), signal)
        said = {"runtime": runtime, "credentials": credentials}
        answers, known, seen = self._beats(actor, worker_id, leases, told, said)
        if pool is not None and pool not in seen:
            self.workers.worker_says(
                self.kernel.catalog.pool(pool), worker_id, runtime, credentials
            )
        elif pool is None and says and not seen:
            raise ValidationFailed(
                "pool: name the pool that runtime and credentials are about"
                " (the worker holds no lease here to tell it, and its token covers several pools)"
            )
        return WorkerBeats(answers, None if told is None else self.signals.sealed(told, known))

    def _beats(
        self,
        actor: Principal,
        worker_id: str,
        leases: list[tuple[str, int]],
        told: Told | None,
        said: dict[str, dict[str, Any] | None],
    ) -> tuple[list[tuple[str, int, Answer]], dict[str, Known], set[str]]:
        """Each lease's answer, what the next signal may vouch for, and the pools where the
        worker was seen (noted once a pool, with what it `said` of its runtime and
        credentials)."""

        def holds(lease: Lease) -> bool:
            return (
                (actor.pools is None or lease.pool in actor.pools)
                and lease.worker_id == worker_id
                and lease.claimed_by == actor.token_id
            )

        now = self.kernel.clock.now_ms()
        vouched = {
            lease_id: k
            for lease_id, fence in leases
            if told is not None
            and (k := told.vouched.get(lease_id)) is not None
            and k.fence == fence
            and not k.due(now)
            and (actor.pools is None or k.pool in actor.pools)
        }
        rest: list[tuple[str, int | None]] = [(i, f) for i, f in leases if i not in vouched]
        # With a signal, what is read may be vouched for later: only a consistent read may.
        found = self._read_for_beats(rest, None, holds, consistent=told is not None)
        answers: list[tuple[str, int, Answer]] = []
        known: dict[str, Known] = {}
        seen: set[str] = set()
        for lease_id, fence in leases:
            try:
                if lease_id in vouched:
                    kept = vouched[lease_id]
                    answer: Answer = Vouched(kept.state, kept.deadline, kept.revoke)
                    where, version = kept.pool, kept.worker_version
                    vouch: Known | None = kept
                else:
                    lease = found.get(lease_id)
                    if lease is None:
                        raise LeaseNotFound(f"lease {lease_id} does not exist")
                    authz.require_pool_of(actor, lease)
                    authz.require_worker(actor, lease.pool)
                    if lease.worker_id != worker_id or lease.claimed_by != actor.token_id:
                        raise StaleLease(f"lease {lease_id} is not held by worker {worker_id}")
                    self.kernel.stale.refuse_old_fence(lease, fence, "heartbeat")
                    answer = beat = self._beat(lease, None)
                    where, version = lease.pool, lease.worker_version
                    vouch = known_of(beat.lease, beat.revoke)  # as read consistently or written
                answers.append((lease_id, fence, answer))
                if vouch is not None:
                    known[lease_id] = vouch
                if where not in seen:
                    seen.add(where)
                    self.workers.mark_seen(
                        self.kernel.catalog.pool(where),
                        worker_id,
                        version,
                        runtime=said["runtime"],
                        credentials=said["credentials"],
                    )
            except TenureError as refused:
                answers.append((lease_id, fence, refused))
        return answers, known, seen

    def _beat(
        self, lease: Lease, lease_seconds: int | None, actor: Principal | None = None
    ) -> Beat:
        """`actor`: the lease token renewing it, checked on every row the renewal is judged
        on (a worker token's heartbeat is checked on its leases' holder instead)."""

        def step(current: Lease) -> Beat:
            if actor is not None:
                authz.require_lease_token(actor, current)
            self.kernel.stale.refuse_if_stale(current, "heartbeat")
            if current.state not in REPORTABLE:
                raise InvalidTransition(f"lease {current.id} is {current.state}; nothing to renew")
            pool = self.kernel.catalog.pool(current.pool)
            now = self.kernel.clock.now_ms()
            wanted, due = self._renewal(current, lease_seconds, pool, now)
            if current.state is LeaseState.DISPATCHED:  # the first heartbeat starts it
                new = self._started(current, wanted, pool, "heartbeat")
                self.kernel.write(current, new)
                return Beat(lease=new, revoke=revoke_signal(new), wrote=True)
            if due:
                new = replace(
                    current,
                    lease_seconds=wanted,
                    heartbeat_at=now,
                    deadline=fencing.fresh_deadline(now, 1000 * wanted),
                )
                # A shorter lease_seconds brings the deadline before the sweeper's index entry:
                # move the entry too (2 index writes, only on the heartbeat that shortens it),
                # or the sweeper would not look at the lease until the old, later bound.
                shortened = new.deadline is not None and (
                    current.due_at is None or new.deadline < current.due_at
                )
                if shortened:
                    new = replace(new, due_at=new.deadline)
                # A changed lease_seconds is news to the worker's signal (must_signal).
                self.leases.renew(
                    new,
                    expect=(current.state, current.fence),
                    move_due=shortened,
                    signal=self.kernel.signal_bump(current, new),
                )
                return Beat(lease=new, revoke=revoke_signal(new), wrote=True)
            return Beat(lease=current, revoke=revoke_signal(current))

        return self.kernel.settle(lease, step)

    @staticmethod
    def _renewal(
        current: Lease, lease_seconds: int | None, pool: Pool, now: int
    ) -> tuple[int, bool]:
        """The toleration a heartbeat keeps the lease at, and whether its deadline must be
        written for it (written ahead, it mostly need not: domain/fencing.py)."""
        wanted = lease_seconds or current.lease_seconds or pool.toleration_seconds
        due = wanted != current.lease_seconds or fencing.deadline_needs_write(
            current, now, 1000 * wanted
        )
        return wanted, due

    def _read_for_beats(
        self,
        beats: list[tuple[str, int | None]],
        lease_seconds: int | None,
        holds: Callable[[Lease], bool],
        consistent: bool = False,
    ) -> dict[str, Lease]:
        """The leases a heartbeat judges, each (id, fence named) in `beats` (`consistent`:
        each read consistently at once, as what a signal vouches for must be).

        Read eventually consistent first, at half a read unit a lease: heartbeats are most
        of a lease's reads. A lease is answered from that copy only when the copy says the
        common thing, that the lease is running, held by this caller (`holds`) at the fence
        named, with no deadline to write. Every other lease is read again, consistently,
        before it is judged, so no refusal, start or write ever rests on a copy that may be
        behind. A copy that lags (DynamoDB's replicas catch up within about a second) can
        then only bring a cancel, a kill, a pause or an operator's end into the answer that
        much later; it can neither refuse a lease just claimed nor keep alive a lease that
        expired, whose deadline has passed, so that its heartbeat must write, and that write
        is conditional on the row itself."""
        if not beats:
            return {}
        if consistent:
            return self.leases.get_leases([lease_id for lease_id, _ in beats])
        now = self.kernel.clock.now_ms()
        found = self.leases.get_leases([lease_id for lease_id, _ in beats], consistent=False)
        doubtful = [
            lease_id
            for lease_id, fence in beats
            if not self._quiet(found.get(lease_id), fence, lease_seconds, holds, now)
        ]
        if doubtful:
            for lease_id in doubtful:
                found.pop(lease_id, None)
            found.update(self.leases.get_leases(doubtful))
        return found

    def _quiet(
        self,
        lease: Lease | None,
        fence: int | None,
        lease_seconds: int | None,
        holds: Callable[[Lease], bool],
        now: int,
    ) -> bool:
        """A heartbeat on `lease`, as read, would renew nothing and refuse nothing."""
        if lease is None or lease.superseded or lease.state is LeaseState.DISPATCHED:
            return False
        if lease.state not in REPORTABLE or (fence is not None and fence != lease.fence):
            return False
        if not holds(lease):
            return False
        try:
            pool = self.kernel.catalog.pool(lease.pool)
        except TenureError:
            return False
        return not self._renewal(lease, lease_seconds, pool, now)[1]

    def _started(self, lease: Lease, lease_seconds: int, pool: Pool, by: str) -> Lease:
        """The dispatched lease running, its deadline one toleration (`lease_seconds`) out."""
        now = self.kernel.clock.now_ms()
        return self.kernel.apply(
            lease,
            must_move(lease.id, lease.state, lease.revoke, Action.START),
            {"by": by},
            now,
            lease_seconds=lease_seconds,
            started_at=now,
            heartbeat_at=now,
            deadline=fencing.fresh_deadline(now, 1000 * lease_seconds),
        )

    # ------------------------------------------------------------------ final reports

    def complete(
        self,
        actor: Principal,
        lease_id: str,
        body: dict[str, Any],
        next_claim: str | None = None,
        read: Lease | None = None,
        next_lease: str | None = None,
    ) -> Lease:
        """End the lease with `body`; `next_claim` is the claim the report carried, kept on
        the ended row (app/leases/handover.py), with `next_lease` the lease it will take;
        `read`: the lease row as this request read it already, if it did (consistently, or
        a copy showing it held: `held_copy`; OwnLeases.own_lease)."""
        return self._report(
            actor, lease_id, ReportKind.COMPLETE, body, next_claim, read, next_lease
        )

    def fail(
        self,
        actor: Principal,
        lease_id: str,
        body: dict[str, Any],
        next_claim: str | None = None,
        read: Lease | None = None,
        next_lease: str | None = None,
    ) -> Lease:
        return self._report(actor, lease_id, ReportKind.FAIL, body, next_claim, read, next_lease)

    def release(
        self, actor: Principal, lease_id: str, body: dict[str, Any], read: Lease | None = None
    ) -> Lease:
        return self._report(actor, lease_id, ReportKind.RELEASE, body, read=read)

    def _report(
        self,
        actor: Principal,
        lease_id: str,
        kind: ReportKind,
        body: dict[str, Any],
        next_claim: str | None = None,
        read: Lease | None = None,
        next_lease: str | None = None,
    ) -> Lease:
        authz.require_lease(actor, lease_id)
        if read is None:
            read = self.kernel.owned.token_checked_row(lease_id) or self.held_copy(lease_id)
        lease = self.kernel.owned.own_lease(actor, lease_id, authz.REPORT, read)
        for prepare in self.completion.prepare:
            if self._applies(prepare.applies, lease, kind, body):
                body = prepare.run(lease, kind, body)
        fencing.refuse_tokens(body, "the report")
        report = normalized(kind, body)
        fp = fencing.fingerprint(kind, report)
        report_id = body.get("report_id")
        fence = body.get("fence")
        replayed: list[Lease] = []

        def step(current: Lease) -> Lease:
            authz.require_lease_token(actor, current)  # a fresh read after a lost write too
            self.kernel.stale.refuse_old_fence(current, fence, kind)
            if current.state.terminal:
                # The same report again (same body, or same report_id *and* kind): the first
                # answer, unchanged. Anything else on an ended lease is refused.
                if current.report_kind is kind and (
                    current.report_fingerprint == fp
                    or (report_id is not None and current.report_id == report_id)
                ):
                    replayed.append(current)
                    return current
                self.kernel.stale.refuse_if_stale(current, kind)
                raise InvalidTransition(f"lease {current.id} already ended {current.state}")
            if current.state not in REPORTABLE:
                raise InvalidTransition(f"lease {current.id} is {current.state}; it has no holder")
            ending = self.final_ending(current, kind, report, fp, report_id, next_claim, next_lease)
            self.kernel.commit(ending.change())
            return ending.ended

        done = self.kernel.settle(lease, step)
        # A replay ended nothing: its after-stages see the ended row before it too, though
        # `lease` (a copy behind the table) may still show it held.
        before = done if replayed else lease
        for after in self.completion.after:
            if self._applies(after.applies, before, kind, body, done):
                after.run(before, done, kind, body)
        return done

    def held_copy(self, lease_id: str) -> Lease | None:
        """An eventually consistent copy of the lease (half a read unit) when it shows the
        lease held, else None (then the row is read consistently). A final report judged on
        it writes conditionally on that very row (state, fence, version and deadline), so a
        copy behind the table loses its write and the report is judged again on a fresh
        read; a copy showing anything else (queued, ended, superseded, or no row) may be
        behind a claim or an end, so nothing is decided on it: no refusal, no replay."""
        if len(lease_id) > fencing.MAX_ID_LENGTH:
            return None
        copy = self.leases.get_lease(lease_id, consistent=False)
        return copy if copy is not None and copy.state in REPORTABLE else None

    def _applies(
        self,
        applies: Applies,
        lease: Lease,
        kind: ReportKind,
        report: dict[str, Any],
        ended: Lease | None = None,
    ) -> bool:
        """Whether a stage declared to apply to `applies` runs on this report: `lease` as
        read, `report` as the stage will see it, `ended` the lease the report ends it to (none
        before the write)."""
        if applies is Applies.EVERY_REPORT:
            return True
        if applies is Applies.CREATED_TASKS:
            return kind is ReportKind.COMPLETE and bool(report.get("created_task_ids"))
        if applies is Applies.TASK_IDS_IN_RESULT:
            return kind is ReportKind.COMPLETE and _holds_task_ids(report.get("result"))
        if applies is Applies.FAILURE:
            return ended is not None and ended.state is LeaseState.FAILED
        return (  # Applies.CLASSIFIER_SUCCESS
            ended is not None
            and ended.end_reason is EndReason.COMPLETED
            and ended.outcome == "success"
            and lease.task_id is not None
            and self.kernel.pool(lease.pool).kind is PoolKind.CLASSIFIER
        )

    def final_ending(
        self,
        lease: Lease,
        kind: ReportKind,
        report: dict[str, Any],
        fp: str,
        report_id: str | None,
        next_claim: str | None = None,
        next_lease: str | None = None,
    ) -> Ending:
        for resolve in self.completion.resolve:
            if self._applies(resolve.applies, lease, kind, report):
                report = resolve.run(lease, kind, report)
        now = self.kernel.clock.now_ms()
        to = must_move(lease.id, lease.state, lease.revoke, report_action(kind, report))
        ended = self.kernel.apply(
            lease,
            to,
            {"report": kind.value},
            now,
            outcome=report.get("outcome") if kind is ReportKind.COMPLETE else None,
            report_kind=kind,
            report_fingerprint=fp,
            report_id=report_id,
            report={k: v for k, v in report.items() if k != "outcome"} or None,
            next_claim=next_claim,
            next_lease=next_lease,
        )
        ending = Ending(before=lease, ended=ended, kind=kind, report=report)
        for contribute in self.completion.contribute:
            if self._applies(contribute.applies, lease, kind, ending.report, ended):
                ending = contribute.run(ending)
        if to.requeue:
            return replace(
                ending, rows=self.kernel.with_successor(ending.rows, lease, recovered=False)
            )
        return ending
