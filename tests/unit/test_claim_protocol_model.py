"""An explicit-state model checker for the claim protocol: every interleaving, every crash.

The claim protocol keeps its promises (one holder per job, one lease per claim id, a retried
claim finds its first lease) only through the conditions on its writes. Unit tests drive a few
chosen orderings; this file walks *all* of them for a small world and checks the promises in
every state it reaches. The model is the protocol as the service writes it to its table,
step by step, so that it can be read next to the code.

What is modelled: one JOB row per job (its fence and current lease), LEASE rows (state, claim,
number of state changes, who completed it), the timeline (events per lease, kept apart from
the rows so that a change without its event shows), and CLAIM records keyed by (worker, claim
id), each naming one lease. The service's table is not imported, but a call's decisions are the
service's own: every read of the lease its record names is sorted by the claim's state machine
(`judge` and its states `At`, in tenure/app/leases/claims/intent.py), so a change there is
checked against every interleaving here. The actors:

* claim calls. Each claimer is one worker with one claim id. Its client may start another call
  with the same claim id at any time while it has calls left: its earlier call crashed, its
  answer was lost, or it timed out while the earlier call still runs, so calls of one claim id
  can be in flight together. Every read and every conditional write is a step of its own and
  a call may crash after any of them, losing all it had read.
* holders. A call's answer lets its worker start and complete the lease it names.
* with `handover`, each claimer's calls are copies of one final report with `next` (the claim
  its worker sends with the report of the lease it holds, a lease outside the jobs here). The
  first copy to apply the report ends that lease and, in the same conditional write, keeps
  the claim's intent on it: the candidate it picked before the write (any lease ever pending,
  as a stale queue index may give), or none, when the claim falls back to a record of its own.
  The intent is then the claim's record, moved on by the same conditional re-point. A copy that
  loses the report's write follows the intent and claims as any call; a copy sent after the
  report was applied (a resend) only follows it: its own lease again, or nothing new.
* the sweeper. It reads a held lease whose deadline has passed (time is abstract: any held
  lease may expire at any moment), then writes one transaction: that lease becomes lost, the
  job moves to fence + 1 and a new pending lease is put at that fence. It may crash between.
* an operator, who may change a queued lease (its priority, say): a write that leaves it
  pending but moves its version on, so that a claim which read it before loses its write
  while the lease is still there to take.

Every lease write is conditional on the version read as well as on the state, and moves the
version on. A call may give up on a pending lease it cannot take now (held back, deferred, a
full ceiling: reasons outside this model, so the choice is free); before moving its record
away from it, it *shuns* the lease for its claim id (a fenced write), so that no sibling call
that read the record before can take it afterwards.

A lease is named by (job, fence), since a job has one lease per fence. That makes names
canonical (no renaming is needed to merge equal states) and makes "fence == the fence read" true
of any lease read by its name, so the conditions that can fail are the others: the state, the
claim, the record and the job. The claimers are distinct workers running the same program, so
two states that differ only by which claimer is which are explored once (`visit_key`).

The search is breadth first over a visited set, so a violation comes back with a shortest
trace. `Flaws` switches single conditions off; the tests at the bottom show that the checker
finds each weakening, and which one it cannot (the sweeper's job condition, see there), and
that a `judge` broken the same way is found too.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import pytest
from tenure.app.leases.claims import intent as claim_intent
from tenure.app.leases.claims.intent import At

PENDING = "pending"
CLAIMED = "claimed"
RUNNING = "running"
COMPLETED = "completed"
LOST = "lost"
HELD = frozenset({CLAIMED, RUNNING})
ENDED = frozenset({COMPLETED, LOST})

LeaseId = tuple[int, int]  # (job, fence)
NO_LEASE: LeaseId = (-1, -1)  # sorts before every lease; only inside sort keys

# The step a claim call takes next, numbered as in the docstrings of the steps below. Where the
# record stands (the service's `At`) decides the step after a read: NONE puts a record (2.),
# OWN reissues (3a.), SPENT answers "ended" (3b.), PENDING claims (3c.), NAMES looks elsewhere
# (3d.).
READ_RECORD = "read-record"  # 1.
PUT_RECORD = "put-record"  # 2.
READ_LEASE = "read-lease"  # 3.
REISSUE = "reissue"  # 3a.
CLAIM = "claim"  # 3c.
REPORT = "report"  # 0. (with `handover`)
REPOINT = "repoint"  # 3d.
SHUN = "shun"  # 3e.
RECHECK = "recheck"  # 4.
RECHECK_RECORD = "recheck-record"  # 4b.
EMIT_EVENT = "emit-event"  # only with Flaws.claim_event_after_write

# What a finished claim call answered.
ANSWER_LEASE = "lease"
ANSWER_EMPTY = "empty"
ANSWER_ENDED = "ended"


@dataclass(frozen=True)
class Flaws:
    """Deliberate weakenings of the protocol. All off is the protocol itself; each one on
    drops one condition (or splits one write), so the tests can show the checker notices."""

    # The claim write checks the fence only, not that the lease is still pending.
    claim_ignores_state: bool = False
    # The re-point of a claim record does not check that it still names the lease read.
    repoint_ignores_record: bool = False
    # A call may re-point its record away from a lease it read as pending without shunning it.
    repoint_from_pending: bool = False
    # The claim write checks the state, not the version read (a shun in between goes unseen).
    claim_ignores_version: bool = False
    # A call that found no candidate answers empty at once, without re-reading its record.
    empty_without_recheck: bool = False
    # The sweeper's job write does not check the job's fence and current lease.
    sweep_ignores_job_fence: bool = False
    # The sweeper's lease write checks the fence only, not that the lease is still held.
    sweep_ignores_lease_state: bool = False
    # A claim that lost its condition looks for another candidate instead of re-reading.
    lost_claim_repoints: bool = False
    # The claim's timeline event is written in a step of its own, after the claim.
    claim_event_after_write: bool = False
    # The report's write is not conditional on its lease still being held: a copy that lost
    # the race writes its own pick over the intent the first copy kept.
    report_overwrites_intent: bool = False
    # A resend whose intent names a lease not its own answers empty without re-reading the
    # intent (its first copy may have moved it on and won another lease meanwhile).
    resend_without_reread: bool = False


@dataclass(frozen=True)
class Config:
    """The world to explore. Every bound here is what keeps the state space finite."""

    claimers: int = 2  # workers w1, w2, ..., each with its claim id c1
    jobs: int = 1
    calls: int = 3  # claim calls per claimer: the first and up to two retries
    overlap: int = 2  # calls of one claim id in flight at once (a retry after a timeout)
    requeues: int = 1  # expiries per job
    start: bool = True  # holders may move claimed -> running before completing
    bumps: int = 0  # operator changes of a queued lease, in the whole run
    give_ups: int = 0  # pending leases each claimer may give up (3e), in the whole run
    # The queue index may answer no candidate at any moment (a fresh read when nothing is
    # pending, or a lagging one). Off, a call answers empty only when no other lease exists.
    index_may_miss: bool = False
    # Each claimer's calls are copies of a final report with `next` (the module's docstring).
    handover: bool = False
    flaws: Flaws = field(default_factory=Flaws)
    max_states: int = 2_000_000  # a guard against a runaway configuration


class Job(NamedTuple):
    fence: int
    lease: LeaseId


class Lease(NamedTuple):
    id: LeaseId
    state: str
    claim: int | None  # the claimer whose (worker, claim id) it carries; its worker holds it
    changes: int  # state changes so far, its creation included
    completed_by: int | None  # the claimer whose report completed it
    version: int = 1  # moved on by every write of the lease
    shunned: tuple[int, ...] = ()  # claimers whose record moved on from it while pending


class Call(NamedTuple):
    """One claim call in flight: whose it is, its next step, the lease it has read (from its
    claim record) and that lease's version as read. A crash drops the whole tuple."""

    claimer: int
    pc: str
    lease: LeaseId | None
    seen: int = 0
    resend: bool = False  # a copy of a report already applied: it follows, never claims


class Claimer(NamedTuple):
    calls_left: int
    answers: tuple[LeaseId, ...]  # leases its calls answered (a sorted set): its worker's
    give_ups_left: int = 0
    reported: bool = False  # with `handover`: the report ended its lease (the intent's write)


class State(NamedTuple):
    jobs: tuple[Job, ...]
    leases: tuple[Lease, ...]  # sorted by id
    events: tuple[tuple[LeaseId, int], ...]  # the timeline: events per lease, sorted by id
    records: tuple[LeaseId | None, ...]  # the claim record of each claimer
    claimed_under: tuple[tuple[LeaseId, ...], ...]  # each claim's every lease (a sorted set)
    claimers: tuple[Claimer, ...]
    calls: tuple[Call, ...]  # sorted by `_call_key`
    sweeper: LeaseId | None  # the held lease the sweeper has read and is about to expire
    bumps_left: int = 0


class Answer(NamedTuple):
    claimer: int
    kind: str
    lease: LeaseId | None


class Step(NamedTuple):
    kind: str  # what happened, for `Result.kinds`
    label: tuple[object, ...]  # joined into one line of a trace
    state: State
    answer: Answer | None = None


@dataclass
class Result:
    """What one exploration found. `violation` is None when every reachable state passed;
    otherwise `trace` is a shortest path of step labels from the start to it."""

    states: int
    transitions: int
    terminal: int
    seconds: float
    violation: str | None
    trace: list[str]
    kinds: Counter[str]  # transitions taken, by what happened in them


# -- small helpers ---------------------------------------------------------------------------


def _name(lease_id: LeaseId | None) -> str:
    return "none" if lease_id is None else f"L{lease_id[0]}.{lease_id[1]}"


def _who(claimer: int | None) -> str:
    return "nobody" if claimer is None else f"w{claimer + 1}/c1"


def _lease(s: State, lease_id: LeaseId) -> Lease:
    for lease in s.leases:
        if lease.id == lease_id:
            return lease
    raise KeyError(lease_id)


def _with_lease(leases: tuple[Lease, ...], new: Lease) -> tuple[Lease, ...]:
    kept = [lease for lease in leases if lease.id != new.id]
    return tuple(sorted([*kept, new]))


def _emit(events: tuple[tuple[LeaseId, int], ...], lease_id: LeaseId) -> tuple:
    """One more timeline event for the lease (its first, for a new lease)."""
    counts = dict(events)
    counts[lease_id] = counts.get(lease_id, 0) + 1
    return tuple(sorted(counts.items()))


def _change(lease: Lease, state: str, **fields: Any) -> Lease:
    """The lease moved to `state`: one more state change, which its writer must also emit."""
    return lease._replace(
        state=state, changes=lease.changes + 1, version=lease.version + 1, **fields
    )


def _call_key(call: Call) -> tuple[int, str, LeaseId, int, bool]:
    return (call.claimer, call.pc, call.lease or NO_LEASE, call.seen, call.resend)


def _add(items: tuple[LeaseId, ...], item: LeaseId) -> tuple[LeaseId, ...]:
    """A sorted tuple used as a set: hashable, and equal sets are equal tuples."""
    return items if item in items else tuple(sorted((*items, item)))


def _add_int(items: tuple[int, ...], item: int) -> tuple[int, ...]:
    return items if item in items else tuple(sorted((*items, item)))


def _judge(lease: Lease, claimer: int) -> At:
    """Where a record naming `lease` stands for `claimer`'s calls: the service's own rule
    (looked up on its module each time, so a test can break it)."""
    return claim_intent.judge(
        own=lease.claim == claimer,
        held=lease.state in HELD,
        pending=lease.state == PENDING,
        shunned=claimer in lease.shunned,
    )


def _set(items: tuple, index: int, value: object) -> tuple:
    return (*items[:index], value, *items[index + 1 :])


def initial_state(cfg: Config) -> State:
    """Each job with its first lease pending at fence 1; no records; nobody calling yet."""
    first = tuple((job, 1) for job in range(cfg.jobs))
    n = cfg.claimers
    return State(
        jobs=tuple(Job(1, lease_id) for lease_id in first),
        leases=tuple(Lease(lease_id, PENDING, None, 1, None) for lease_id in first),
        events=tuple((lease_id, 1) for lease_id in first),
        records=(None,) * n,
        claimed_under=((),) * n,
        claimers=(Claimer(cfg.calls, (), cfg.give_ups),) * n,
        calls=(),
        sweeper=None,
        bumps_left=cfg.bumps,
    )


# -- a claim call, one function per step ----------------------------------------------------


class _Move:
    """Builds the steps of one call from one state: it moves on, or it answers and is gone."""

    def __init__(self, cfg: Config, s: State, i: int) -> None:
        self.cfg, self.s, self.i = cfg, s, i
        self.call = s.calls[i]
        self.who = _who(self.call.claimer)

    def _calls(self, nxt: Call | None) -> tuple[Call, ...]:
        rest = [*self.s.calls[: self.i], *self.s.calls[self.i + 1 :]]
        if nxt is not None:
            rest.append(nxt)
        return tuple(sorted(rest, key=_call_key))

    def on(self, kind: str, label: tuple[object, ...], nxt: Call, **changes: Any) -> Step:
        """The call moves to `nxt`, with `changes` written to the table in the same step."""
        s = self.s._replace(calls=self._calls(nxt), **changes)
        return Step(kind, (self.who, *label), s)

    def answers(
        self,
        kind: str,
        label: tuple[object, ...],
        answer: str,
        lease: LeaseId | None,
        **changes: Any,
    ) -> Step:
        """The call answers (and is gone), with `changes` written in the same step."""
        c = self.call.claimer
        s = self.s._replace(calls=self._calls(None), **changes)
        if answer == ANSWER_LEASE:
            assert lease is not None
            who = s.claimers[c]
            s = s._replace(
                claimers=_set(s.claimers, c, who._replace(answers=_add(who.answers, lease)))
            )
        return Step(kind, (self.who, *label), s, Answer(c, answer, lease))

    def empty(self, label: tuple[object, ...]) -> Step:
        """No candidate: the call re-reads its record before it answers empty (4.)."""
        if self.cfg.flaws.empty_without_recheck:
            return self.answers("answer empty", (*label, "answers empty"), ANSWER_EMPTY, None)
        nxt = self.call._replace(pc=RECHECK)
        return self.on("no candidate", (*label, "re-reads its record first"), nxt)


def _read_record(m: _Move) -> Iterator[Step]:
    """1. Read the claim record: none means this claim id has not picked a lease yet."""
    record = m.s.records[m.call.claimer]
    if record is None and m.call.resend:
        label = ("reads its claim's intent: none, a resend claims nothing new",)
        yield m.answers("resend answered", label, ANSWER_EMPTY, None)
        return
    if record is None:
        nxt = m.call._replace(pc=PUT_RECORD, lease=None)
    else:
        nxt = m.call._replace(pc=READ_LEASE, lease=record)
    yield m.on("read record", ("reads its claim record:", _name(record)), nxt)


def _put_record(m: _Move) -> Iterator[Step]:
    """2. No record yet: pick a candidate and put the record, only if it is still new.

    The queue index is eventually consistent, so a candidate is any lease that was ever
    pending (every lease starts pending), not only one pending now: the conditions must make
    a stale pick harmless. A put refused because the record exists means a concurrent call of
    the same claim id wrote it first: go back and follow the record.
    """
    candidates = [lease.id for lease in m.s.leases]
    if not candidates or m.cfg.index_may_miss:
        yield m.empty(("finds no candidate:",))
    if m.s.records[m.call.claimer] is not None:
        label = ("puts its claim record: refused, a concurrent call wrote it first",)
        yield m.on("record put refused", label, m.call._replace(pc=READ_RECORD))
        return
    for candidate in candidates:
        yield m.on(
            "record put",
            ("puts its claim record ->", _name(candidate)),
            m.call._replace(pc=READ_LEASE, lease=candidate),
            records=_set(m.s.records, m.call.claimer, candidate),
        )


def _read_lease(m: _Move) -> Iterator[Step]:
    """3. Read the record's lease (a consistent read) and decide what this claim may do."""
    assert m.call.lease is not None
    lease = _lease(m.s, m.call.lease)
    at = _judge(lease, m.call.claimer)
    seen = ("reads", _name(lease.id), lease.state, "under", _who(lease.claim) + ":")
    if m.call.resend and at is At.PENDING:
        # The intent cannot have left a lease still pending unshunned since it was read, so no
        # lease is held under the claim now: empty is true.
        label = (*seen, "pending: a resend claims nothing new")
        yield m.answers("resend answered", label, ANSWER_EMPTY, None)
        return
    if m.call.resend and at is not At.OWN and m.cfg.flaws.resend_without_reread:
        label = (*seen, "not its own: a resend claims nothing new")
        yield m.answers("resend answered", label, ANSWER_EMPTY, None)
        return
    if m.call.resend and at is not At.OWN:
        # Its intent may have moved on since it was read (its first copy lost this lease and
        # took another): the intent decides, as before an empty answer (4b.).
        label = (*seen, "not its own: re-reads the intent")
        yield m.on("read lease", label, m.call._replace(pc=RECHECK_RECORD))
        return
    if at is At.OWN:  # a.
        yield m.on("read lease", (*seen, "its own: reissue"), m.call._replace(pc=REISSUE))
        return
    if at is At.SPENT:  # b.
        label = (*seen, "its own, ended: answers ended")
        yield m.answers("answer ended", label, ANSWER_ENDED, lease.id)
        return
    if at is At.PENDING:  # c.
        read = m.call._replace(seen=lease.version)
        yield m.on("read lease", (*seen, "claim it"), read._replace(pc=CLAIM))
        # e. Or it cannot take it now (held back, deferred, a full ceiling): shun it first.
        c = m.call.claimer
        claimer = m.s.claimers[c]
        if claimer.give_ups_left:
            fewer = _set(m.s.claimers, c, claimer._replace(give_ups_left=claimer.give_ups_left - 1))
            nxt = read._replace(pc=REPOINT if m.cfg.flaws.repoint_from_pending else SHUN)
            yield m.on("read lease", (*seen, "give it up"), nxt, claimers=fewer)
        return
    # d. Held or ended under another claim, or shunned by this one: look elsewhere.
    yield m.on("read lease", (*seen, "look elsewhere"), m.call._replace(pc=REPOINT))


def _claim(m: _Move) -> Iterator[Step]:
    """3c. Claim the lease read as pending, only if it is still pending at the fence read.

    A lost condition means someone claimed it first, and that someone may be a concurrent call
    of this very claim id, so the call re-reads the lease (where 3a finds it) rather than
    looking elsewhere.
    """
    assert m.call.lease is not None
    lease = _lease(m.s, m.call.lease)
    c = m.call.claimer
    flaws = m.cfg.flaws
    pending = flaws.claim_ignores_state or lease.state == PENDING
    unchanged = flaws.claim_ignores_version or lease.version == m.call.seen
    if not (pending and unchanged):
        nxt = m.call._replace(pc=REPOINT if flaws.lost_claim_repoints else READ_LEASE)
        yield m.on("claim refused", ("claims", _name(lease.id), "refused"), nxt)
        return
    won = {
        "leases": _with_lease(m.s.leases, _change(lease, CLAIMED, claim=c)),
        "claimed_under": _set(m.s.claimed_under, c, _add(m.s.claimed_under[c], lease.id)),
    }
    if flaws.claim_event_after_write:
        label = ("claims", _name(lease.id), "won (its event not written yet)")
        yield m.on("claim won", label, m.call._replace(pc=EMIT_EVENT), **won)
        return
    label = ("claims", _name(lease.id), "won: answers it")
    events = _emit(m.s.events, lease.id)
    yield m.answers("claim won", label, ANSWER_LEASE, lease.id, events=events, **won)


def _report(m: _Move) -> Iterator[Step]:
    """0. The final report with `next`: end the worker's lease and keep the claim's intent on
    it in the same write, only if that lease is still held (the report not applied yet). The
    candidate was picked before the write: any lease ever pending, or none (the claim then
    keeps a record of its own, put if new, 2.). A refused write means a copy of this report
    applied it first: follow the intent that copy kept, as any call of the claim id."""
    c = m.call.claimer
    claimer = m.s.claimers[c]
    if claimer.reported and not m.cfg.flaws.report_overwrites_intent:
        record = m.s.records[c]
        nxt = m.call._replace(pc=PUT_RECORD if record is None else READ_LEASE, lease=record)
        label = ("reports: refused, a copy ended it first; follows its intent:", _name(record))
        yield m.on("report refused", label, nxt)
        return
    claimers = _set(m.s.claimers, c, claimer._replace(reported=True))
    if not claimer.reported:
        label = ("reports, ending its lease with no intent: the queue showed none",)
        nxt = m.call._replace(pc=PUT_RECORD, lease=None)
        yield m.on("report", label, nxt, claimers=claimers)
    for candidate in [lease.id for lease in m.s.leases]:
        yield m.on(
            "report",
            ("reports, ending its lease with its intent ->", _name(candidate)),
            m.call._replace(pc=READ_LEASE, lease=candidate),
            claimers=claimers,
            records=_set(m.s.records, c, candidate),
        )


def _emit_event(m: _Move) -> Iterator[Step]:
    """Only with Flaws.claim_event_after_write: the claim's event, written late."""
    assert m.call.lease is not None
    label = ("writes the claim's event of", _name(m.call.lease), "and answers it")
    events = _emit(m.s.events, m.call.lease)
    yield m.answers("event", label, ANSWER_LEASE, m.call.lease, events=events)


def _reissue(m: _Move) -> Iterator[Step]:
    """3a. A retry found its own held lease: mint a fresh token, only if the lease is still
    held under this claim at the fence read. A lost condition re-reads the lease."""
    assert m.call.lease is not None
    lease = _lease(m.s, m.call.lease)
    if lease.state in HELD and lease.claim == m.call.claimer:
        yield m.answers(
            "reissue", ("reissues", _name(lease.id) + ": answers it"), ANSWER_LEASE, lease.id
        )
        return
    label = ("reissues", _name(lease.id), "refused")
    yield m.on("reissue refused", label, m.call._replace(pc=READ_LEASE))


def _repoint(m: _Move) -> Iterator[Step]:
    """3d. The record's lease can never be this claim's: point the record at another
    candidate, only if it still names the lease read. A lost condition means a concurrent call
    of this claim id re-pointed it first: follow the record again. No other candidate means
    the call answers empty, and the record keeps naming the lease it named."""
    assert m.call.lease is not None
    c = m.call.claimer
    candidates = [lease.id for lease in m.s.leases if lease.id != m.call.lease]
    if not candidates or m.cfg.index_may_miss:
        yield m.empty(("finds no other candidate:",))
    if not candidates:
        return
    if not m.cfg.flaws.repoint_ignores_record and m.s.records[c] != m.call.lease:
        label = ("re-points its record away from", _name(m.call.lease), "refused")
        yield m.on("repoint refused", label, m.call._replace(pc=READ_RECORD, lease=None))
        return
    for candidate in candidates:
        yield m.on(
            "repoint",
            ("re-points its record", _name(m.call.lease), "->", _name(candidate)),
            m.call._replace(pc=READ_LEASE, lease=candidate),
            records=_set(m.s.records, c, candidate),
        )


def _shun(m: _Move) -> Iterator[Step]:
    """3e. Give up a pending lease: add this claim to its `shunned`, only if it is still
    pending at the version read (a fenced write, which moves the version on, so a sibling call
    that read the lease before can no longer claim it). Then the record may move on. A lost
    condition re-reads the lease."""
    assert m.call.lease is not None
    lease = _lease(m.s, m.call.lease)
    c = m.call.claimer
    if lease.state == PENDING and lease.version == m.call.seen:
        shunned = lease._replace(version=lease.version + 1, shunned=_add_int(lease.shunned, c))
        label = ("shuns", _name(lease.id))
        yield m.on(
            "shun",
            label,
            m.call._replace(pc=REPOINT),
            leases=_with_lease(m.s.leases, shunned),
        )
        return
    yield m.on(
        "shun refused", ("shuns", _name(lease.id), "refused"), m.call._replace(pc=READ_LEASE)
    )


def _recheck(m: _Move) -> Iterator[Step]:
    """4. Before answering empty, look again, lease first and record second: a concurrent
    call of the same claim id may have pointed the record at a lease and won it meanwhile.

    With no lease known, read the record: none means no call of this claim id has picked a
    lease (one must point the record before it claims), so empty is true; a record, follow
    it. With a lease known, read it: this claim's own and held, reissue it; pending and not
    shunned, claim it; anything else can never become this claim's, so read the record
    (4b): unchanged, empty is true at that moment; moved on, follow it."""
    c = m.call.claimer
    if m.call.lease is None:
        record = m.s.records[c]
        if record is None:
            label = ("re-reads its claim record: none, answers empty",)
            yield m.answers("answer empty", label, ANSWER_EMPTY, None)
            return
        label = ("re-reads its claim record:", _name(record), "follows it")
        yield m.on("read record", label, m.call._replace(pc=READ_LEASE, lease=record))
        return
    lease = _lease(m.s, m.call.lease)
    seen = ("re-reads", _name(lease.id), lease.state, "under", _who(lease.claim) + ":")
    at = _judge(lease, c)
    if at is At.OWN:
        yield m.on("read lease", (*seen, "its own: reissue"), m.call._replace(pc=REISSUE))
    elif at is At.PENDING:
        nxt = m.call._replace(pc=CLAIM, seen=lease.version)
        yield m.on("read lease", (*seen, "claim it"), nxt)
    else:
        nxt = m.call._replace(pc=RECHECK_RECORD)
        yield m.on("read lease", (*seen, "not for it: re-read the record"), nxt)


def _recheck_record(m: _Move) -> Iterator[Step]:
    """4b. The lease known can never be this claim's: the record decides."""
    record = m.s.records[m.call.claimer]
    if record == m.call.lease:
        label = ("re-reads its claim record:", _name(record), "unchanged, answers empty")
        kind = "resend answered" if m.call.resend else "answer empty"
        yield m.answers(kind, label, ANSWER_EMPTY, None)
        return
    label = ("re-reads its claim record:", _name(record), "moved on: follows it")
    yield m.on("read record", label, m.call._replace(pc=READ_LEASE, lease=record))


CALL_STEPS = {
    READ_RECORD: _read_record,
    PUT_RECORD: _put_record,
    READ_LEASE: _read_lease,
    CLAIM: _claim,
    REISSUE: _reissue,
    REPOINT: _repoint,
    SHUN: _shun,
    RECHECK: _recheck,
    RECHECK_RECORD: _recheck_record,
    EMIT_EVENT: _emit_event,
    REPORT: _report,
}


def _start_call(cfg: Config, s: State) -> Iterator[Step]:
    """A client starts another call of its claim id, while it has calls left and fewer than
    `overlap` in flight. Starting is invisible to everyone else, so it is taken together with
    the call's first read, that of its claim record (1.)."""
    for c, claimer in enumerate(s.claimers):
        in_flight = sum(1 for call in s.calls if call.claimer == c)
        if not claimer.calls_left or in_flight >= cfg.overlap:
            continue
        record = s.records[c]
        pc = PUT_RECORD if record is None else READ_LEASE
        call = Call(c, pc, record, 0)
        number = cfg.calls - claimer.calls_left + 1
        label = (f"starts claim call {number}, reads its claim record:", _name(record))
        if cfg.handover and not claimer.reported:
            call = Call(c, REPORT, None, 0)
            label = (f"starts claim call {number} (a report with next), finds its lease held",)
        elif cfg.handover:
            call = Call(c, READ_RECORD, None, 0, resend=True)
            label = (f"starts claim call {number} (a report with next), finds it applied",)
        yield Step(
            "call",
            (_who(c), *label),
            s._replace(
                claimers=_set(s.claimers, c, claimer._replace(calls_left=claimer.calls_left - 1)),
                calls=tuple(sorted([*s.calls, call], key=_call_key)),
            ),
        )


# -- holders and the sweeper -----------------------------------------------------------------


def _holder_steps(cfg: Config, s: State) -> Iterator[Step]:
    """A worker starts or completes a lease one of its calls answered.

    The condition is the report's: the lease is held at the fence it was answered with (the
    fence is part of the lease's name here). It does not ask whose the lease is; whether the
    answer really made this worker its holder is what the invariants check."""
    for c, claimer in enumerate(s.claimers):
        for lease_id in claimer.answers:
            lease = _lease(s, lease_id)
            if cfg.start and lease.state == CLAIMED:
                yield Step(
                    "start",
                    (_who(c), "starts", _name(lease_id)),
                    s._replace(
                        leases=_with_lease(s.leases, _change(lease, RUNNING)),
                        events=_emit(s.events, lease_id),
                    ),
                )
            if lease.state in HELD:
                done = _change(lease, COMPLETED, completed_by=c)
                yield Step(
                    "complete",
                    (_who(c), "completes", _name(lease_id)),
                    s._replace(
                        leases=_with_lease(s.leases, done), events=_emit(s.events, lease_id)
                    ),
                )


def _operator_steps(cfg: Config, s: State) -> Iterator[Step]:
    """An operator changes a queued lease: it stays pending, its version moves on."""
    if not s.bumps_left:
        return
    for lease in s.leases:
        if lease.state == PENDING:
            yield Step(
                "operator change",
                ("an operator changes", _name(lease.id), "while it is queued"),
                s._replace(
                    leases=_with_lease(s.leases, lease._replace(version=lease.version + 1)),
                    bumps_left=s.bumps_left - 1,
                ),
            )


def _sweeper_steps(cfg: Config, s: State) -> Iterator[Step]:
    """Expire a held lease: a read, then one transaction (lease lost, job to fence + 1, a new
    pending lease at that fence, put only if it does not exist). It may crash between."""
    if s.sweeper is None:
        for lease in s.leases:
            if lease.state in HELD and lease.id[1] <= cfg.requeues:
                yield Step(
                    "sweep read",
                    ("sweeper reads", _name(lease.id), lease.state, "past its deadline"),
                    s._replace(sweeper=lease.id),
                )
        return
    yield Step("crash", ("sweeper crashes",), s._replace(sweeper=None))
    lease = _lease(s, s.sweeper)
    job_no, fence = lease.id
    job = s.jobs[job_no]
    successor = (job_no, fence + 1)
    lease_ok = cfg.flaws.sweep_ignores_lease_state or lease.state in HELD
    job_ok = cfg.flaws.sweep_ignores_job_fence or job == (fence, lease.id)
    fresh = all(other.id != successor for other in s.leases)
    if not (lease_ok and job_ok and fresh):
        # The transaction as a whole is refused; the kind names the first failing condition.
        why = "lease" if not lease_ok else "job" if not job_ok else "successor"
        yield Step(
            f"sweep refused: {why}",
            ("sweeper expires", _name(lease.id), f"refused (the {why} condition)"),
            s._replace(sweeper=None),
        )
        return
    leases = _with_lease(s.leases, _change(lease, LOST))
    leases = _with_lease(leases, Lease(successor, PENDING, None, 1, None))
    yield Step(
        "sweep",
        ("sweeper expires", _name(lease.id), "and requeues its job as", _name(successor)),
        s._replace(
            jobs=_set(s.jobs, job_no, Job(fence + 1, successor)),
            leases=leases,
            events=_emit(_emit(s.events, lease.id), successor),
            sweeper=None,
        ),
    )


def successors(cfg: Config, s: State) -> Iterator[Step]:
    """Every step any actor can take from `s`. None of them leaves `s` unchanged."""
    yield from _start_call(cfg, s)
    for i, call in enumerate(s.calls):
        if i and call == s.calls[i - 1]:
            continue  # an identical sibling call: the same steps, to the same states
        m = _Move(cfg, s, i)
        yield from CALL_STEPS[call.pc](m)
        label = (f"call crashes before its {call.pc} step",)
        yield Step("crash", (m.who, *label), s._replace(calls=m._calls(None)))
    yield from _holder_steps(cfg, s)
    yield from _sweeper_steps(cfg, s)
    yield from _operator_steps(cfg, s)


# -- symmetry ----------------------------------------------------------------------------------


def visit_key(s: State) -> tuple:
    """The key under which the search visits `s`: all of it, but with each claimer's part
    (its record, history, calls left, answers, calls in flight, and the leases it claimed or
    completed) gathered into one tuple and those tuples sorted, so no claimer is named.

    The claimers are distinct workers running the same program, so renaming them maps
    reachable states to reachable states and violations to violations: states that differ
    only by a renaming are one state to explore. The key loses nothing else, since the state
    can be rebuilt from it up to such a renaming."""
    n = len(s.claimers)
    claimed: list[list[LeaseId]] = [[] for _ in range(n)]
    completed: list[list[LeaseId]] = [[] for _ in range(n)]
    shunned: list[list[LeaseId]] = [[] for _ in range(n)]
    leases = []
    for x in s.leases:
        leases.append((x.id, x.state, x.changes, x.version))
        if x.claim is not None:
            claimed[x.claim].append(x.id)
        if x.completed_by is not None:
            completed[x.completed_by].append(x.id)
        for c in x.shunned:
            shunned[c].append(x.id)
    in_flight: list[list[tuple[str, LeaseId, int, bool]]] = [[] for _ in range(n)]
    for call in s.calls:
        in_flight[call.claimer].append((call.pc, call.lease or NO_LEASE, call.seen, call.resend))
    parts = sorted(
        (
            s.records[c] or NO_LEASE,
            s.claimed_under[c],
            s.claimers[c],
            tuple(in_flight[c]),
            tuple(claimed[c]),
            tuple(completed[c]),
            tuple(shunned[c]),
        )
        for c in range(n)
    )
    return (s.jobs, tuple(leases), s.events, s.sweeper, s.bumps_left, tuple(parts))


# -- the invariants ----------------------------------------------------------------------------


def state_violation(cfg: Config, s: State) -> str | None:
    """What is wrong with one state, or None. Checked in every reachable state."""
    events = dict(s.events)
    for job_no, job in enumerate(s.jobs):
        mine = [lease for lease in s.leases if lease.id[0] == job_no]
        if all(lease.id != job.lease for lease in mine) or job.fence != job.lease[1]:
            return f"job {job_no} names {_name(job.lease)} at fence {job.fence}: no such lease"
        held = [lease for lease in mine if lease.state in HELD]
        if len(held) > 1:
            return f"job {job_no} has {len(held)} holders: {', '.join(_name(x.id) for x in held)}"
        for lease in mine:
            if lease.id != job.lease and lease.state not in ENDED:
                return (
                    f"{_name(lease.id)} is {lease.state} but job {job_no} is on {_name(job.lease)}"
                )
    for c in range(cfg.claimers):
        under = s.claimed_under[c]
        if len(under) > 1:
            names = ", ".join(sorted(map(_name, under)))
            return f"the claim of {_who(c)} has carried {len(under)} leases: {names}"
        record = s.records[c]
        if record is not None and all(x.id != record for x in s.leases):
            return f"the claim record of {_who(c)} names {_name(record)}, which does not exist"
    for lease in s.leases:
        if events.get(lease.id, 0) != lease.changes:
            return (
                f"{_name(lease.id)} changed state {lease.changes} times "
                f"but has {events.get(lease.id, 0)} events"
            )
        if lease.claim is not None and lease.claim in lease.shunned:
            return f"{_name(lease.id)} was claimed under {_who(lease.claim)}, which shunned it"
        if lease.state == COMPLETED and lease.completed_by != lease.claim:
            return (
                f"{_name(lease.id)} was completed by {_who(lease.completed_by)}, "
                f"not by its holder {_who(lease.claim)}"
            )
    return None


def step_violation(cfg: Config, before: State, step: Step) -> str | None:
    """What is wrong with one step, or None: an ended lease changed, or a call answered other
    than the one lease its claim id carries.

    An answer of a lease must name the lease that carries the call's claim id, the first and
    only one ever to. Any answer given while a held lease carries the claim id must be that
    lease: never empty, never ended, never another. An answer is checked in the step that
    decides it, the moment its last read was true."""
    after = step.state
    if after.leases is not before.leases:
        now = {lease.id: lease for lease in after.leases}
        for lease in before.leases:
            if lease.state in ENDED and now[lease.id] != lease:
                return f"{_name(lease.id)} had ended ({lease.state}) but was changed"
    answer = step.answer
    if answer is None:
        return None
    c = answer.claimer
    if answer.kind == ANSWER_LEASE:
        assert answer.lease is not None
        if _lease(after, answer.lease).claim != c:
            return f"a call of {_who(c)} answered {_name(answer.lease)}, which is not under it"
        if after.claimed_under[c] != (answer.lease,):
            return f"a call of {_who(c)} answered {_name(answer.lease)}, not the first under it"
    held = [x.id for x in after.leases if x.claim == c and x.state in HELD]
    if held and (answer.kind != ANSWER_LEASE or answer.lease != held[0]):
        return (
            f"a call of {_who(c)} answered {answer.kind} {_name(answer.lease)} "
            f"while {_name(held[0])} is held under it"
        )
    return None


def terminal_violation(cfg: Config, s: State) -> str | None:
    """What is wrong with a state no step leaves: nothing may be left half done."""
    if s.calls or s.sweeper is not None:
        return "no step leaves a state with an actor half way through its work"
    for job_no, job in enumerate(s.jobs):
        if _lease(s, job.lease).state == LOST:
            return f"job {job_no} ends on {_name(job.lease)}, lost and never handed on"
    return state_violation(cfg, s)


# -- the search ----------------------------------------------------------------------------------


def explore(cfg: Config) -> Result:
    """Breadth first over every reachable state; stops at the first violation.

    The visited set holds `visit_key`s; the queue holds each state as first reached, so the
    labels along a trace all name the claimers the same way."""
    began = time.perf_counter()
    start = initial_state(cfg)
    parents: dict[tuple, tuple[tuple | None, tuple[object, ...]]] = {visit_key(start): (None, ())}
    queue = deque([(start, visit_key(start))])
    transitions = terminal = 0
    kinds: Counter[str] = Counter()

    def result(problem: str | None, last: tuple | None, label: tuple[object, ...] = ()) -> Result:
        trace = [] if label == () else [" ".join(map(str, label))]
        while last is not None:
            last, step_label = parents[last]
            if step_label:
                trace.append(" ".join(map(str, step_label)))
        seconds = time.perf_counter() - began
        return Result(len(parents), transitions, terminal, seconds, problem, trace[::-1], kinds)

    problem = state_violation(cfg, start)
    if problem is not None:
        return result(problem, None, ("(the initial state)",))
    while queue:
        s, key = queue.popleft()
        moved = False
        for step in successors(cfg, s):
            moved = True
            transitions += 1
            kinds[step.kind] += 1
            child = visit_key(step.state)
            entry = (key, step.label)
            new = parents.setdefault(child, entry) is entry
            problem = state_violation(cfg, step.state) if new else None
            if problem is None:
                problem = step_violation(cfg, s, step)
            if problem is not None:
                if new:
                    del parents[child]
                return result(problem, key, step.label)
            if new:
                queue.append((step.state, child))
                if len(parents) > cfg.max_states:
                    raise RuntimeError(f"more than {cfg.max_states} states: bound the config")
        if not moved:
            terminal += 1
            problem = terminal_violation(cfg, s)
            if problem is not None:
                return result(problem, key)
    return result(None, None)


# -- the tests -----------------------------------------------------------------------------------

# The worlds the suite explores. More claimers make more interleavings, so the bounds shrink as
# the world grows: `calls` is a claimer's first call and its retries, `overlap` how many of them
# may be in flight at once. `python -m tests.unit.test_claim_protocol_model` prints the numbers.
WORLDS = {
    "2 claimers, 1 job": Config(claimers=2, jobs=1, calls=2, overlap=2, requeues=1),
    "2 claimers, 2 jobs": Config(claimers=2, jobs=2, calls=2, overlap=2, requeues=1),
    "3 claimers, 1 job": Config(claimers=3, jobs=1, calls=2, overlap=1, requeues=1),
    "3 claimers, 2 jobs": Config(claimers=3, jobs=2, calls=2, overlap=1, requeues=1, start=False),
    # Calls of one claim id that give up a pending lease (and shun it), beside an operator's
    # change that makes a claim lose its write while the lease stays pending.
    "1 claimer, 2 jobs, a give-up and a change": Config(
        claimers=1, jobs=2, calls=3, overlap=2, requeues=1, give_ups=1, bumps=1
    ),
    "2 claimers, 1 job, a give-up each": Config(
        claimers=2, jobs=1, calls=2, overlap=1, requeues=1, give_ups=1
    ),
    # Each claimer's calls are copies of a final report with `next`: the claim's intent is
    # kept on the lease the report ends, written with that end.
    "2 claimers, 1 job, reports with next": Config(
        claimers=2, jobs=1, calls=2, overlap=2, requeues=1, handover=True
    ),
    "1 claimer, 2 jobs, reports with next, a give-up and a change": Config(
        claimers=1, jobs=2, calls=3, overlap=2, requeues=1, give_ups=1, bumps=1, handover=True
    ),
}
# Floors a little under the counts measured, so that a change which quietly shrinks the
# exploration (a step never enabled, a bound that cuts too much) fails here.
MIN_STATES = {
    "2 claimers, 1 job": 10_000,
    "2 claimers, 2 jobs": 34_000,
    "3 claimers, 1 job": 18_000,
    "3 claimers, 2 jobs": 28_000,
    "1 claimer, 2 jobs, a give-up and a change": 9_000,
    "2 claimers, 1 job, a give-up each": 4_300,
    "2 claimers, 1 job, reports with next": 24_000,
    "1 claimer, 2 jobs, reports with next, a give-up and a change": 17_000,
}
SMALL = Config(claimers=2, jobs=1, calls=2, overlap=2, requeues=1)
THREE_LEASES = replace(SMALL, requeues=2)  # one job handed on twice
TWO_JOBS = replace(SMALL, jobs=2)
GIVE_UP = WORLDS["1 claimer, 2 jobs, a give-up and a change"]
HANDOVER = WORLDS["2 claimers, 1 job, reports with next"]

# A weakening, the small world it is looked for in, and what the checker must then report.
FLAWED = {
    # The version alone would refuse a claim of a lease that changed since it was read, so
    # the state condition is dropped together with it.
    "the claim write without its pending and version conditions": (
        Flaws(claim_ignores_state=True, claim_ignores_version=True),
        SMALL,
        "had ended",
    ),
    "the re-point without its record condition": (
        Flaws(repoint_ignores_record=True),
        THREE_LEASES,  # two calls of one claim id re-point to two different leases
        "has carried 2 leases",
    ),
    "a re-point away from a pending lease without shunning it": (
        Flaws(repoint_from_pending=True),
        GIVE_UP,
        "has carried 2 leases",
    ),
    "the claim write without its version condition": (
        Flaws(claim_ignores_version=True),
        GIVE_UP,
        "which shunned it",  # a sibling that read it before the shun took it
    ),
    "an empty answer without re-reading the record": (
        Flaws(empty_without_recheck=True),
        replace(SMALL, index_may_miss=True),
        "answered empty none while L0.1 is held under it",
    ),
    "the sweeper's lease write without its held condition": (
        Flaws(sweep_ignores_lease_state=True),
        SMALL,
        "had ended",
    ),
    "a lost claim that looks elsewhere instead of re-reading": (
        Flaws(lost_claim_repoints=True),
        TWO_JOBS,
        "has carried 2 leases",
    ),
    "the claim's event written after the claim": (
        Flaws(claim_event_after_write=True),
        SMALL,
        "changed state 2 times but has 1 events",
    ),
    "a report's write without its held condition (the intent overwritten)": (
        Flaws(report_overwrites_intent=True),
        HANDOVER,
        "has carried 2 leases",
    ),
    "the intent's re-point without its condition": (
        Flaws(repoint_ignores_record=True),
        replace(HANDOVER, requeues=2),
        "has carried 2 leases",
    ),
    "a resend that answers empty without re-reading the intent": (
        Flaws(resend_without_reread=True),
        HANDOVER,
        "answered empty none while L0.2 is held under it",
    ),
}

_explored: dict[Config, Result] = {}


def explored(cfg: Config) -> Result:
    """`explore`, once per configuration for the whole module."""
    if cfg not in _explored:
        _explored[cfg] = explore(cfg)
    return _explored[cfg]


def _report(result: Result) -> str:
    return "\n".join([str(result.violation), *result.trace])


@pytest.mark.parametrize("world", WORLDS)
def test_every_reachable_state_keeps_the_invariants(world: str) -> None:
    result = explored(WORLDS[world])
    assert result.violation is None, _report(result)
    assert result.states >= MIN_STATES[world]
    assert result.transitions > result.states
    assert result.terminal > 0  # maximal paths were reached, and checked too


def test_the_exploration_takes_every_kind_of_step() -> None:
    """The races the conditions exist for do happen in the model: calls of one claim id
    collide on the record and on the lease, a retry reissues or finds its lease ended, a
    sweep loses to a report, and every actor crashes. A model in which they could not would
    pass without having tested anything."""
    kinds = explored(WORLDS["2 claimers, 1 job"]).kinds
    expected = {
        "call",
        "read record",
        "record put",
        "record put refused",
        "read lease",
        "claim won",
        "claim refused",
        "reissue",
        "reissue refused",
        "repoint",
        "repoint refused",
        "answer empty",
        "answer ended",
        "start",
        "complete",
        "sweep read",
        "sweep",
        "sweep refused: lease",
        "crash",
    }
    assert expected <= {kind for kind, count in kinds.items() if count}


@pytest.mark.parametrize("flaw", FLAWED)
def test_each_weakened_condition_is_found_with_a_trace(flaw: str) -> None:
    flaws, world, report = FLAWED[flaw]
    assert explored(world).violation is None  # the world is fine with the protocol itself
    result = explored(replace(world, flaws=flaws))
    assert result.violation is not None
    assert report in result.violation
    assert result.trace
    assert result.trace[0].startswith("w1/c1 starts claim call 1")


def test_a_trace_is_the_shortest_path_to_the_violation() -> None:
    flaws, world, _ = FLAWED["the claim's event written after the claim"]
    assert explored(replace(world, flaws=flaws)).trace == [
        "w1/c1 starts claim call 1, reads its claim record: none",
        "w1/c1 puts its claim record -> L0.1",
        "w1/c1 reads L0.1 pending under nobody: claim it",
        "w1/c1 claims L0.1 won (its event not written yet)",
    ]


def test_the_sweepers_job_condition_never_decides_a_sweep() -> None:
    """Without the job condition the state space is just as big, and with it no sweep is
    ever refused by that condition alone.

    The sweeper's lease write already requires the lease to be held at the fence read, and a
    held lease is always its job's current lease at the job's fence (the first invariant), so
    whenever the lease condition holds the job condition holds too. The job condition guards
    a hand-on whose lease write is not so conditioned; this model has none, so it cannot show
    that condition at work, and this test says so rather than pretend otherwise."""
    for world in WORLDS.values():
        assert explored(world).kinds["sweep"] > 0
        assert explored(world).kinds["sweep refused: job"] == 0
    for world in (THREE_LEASES, replace(WORLDS["2 claimers, 2 jobs"], overlap=1)):
        weakened = explored(replace(world, flaws=Flaws(sweep_ignores_job_fence=True)))
        assert weakened.violation is None
        assert (weakened.states, weakened.transitions) == (
            explored(world).states,
            explored(world).transitions,
        )


def test_an_index_that_finds_nothing_is_met_by_the_re_read_before_empty() -> None:
    """When the queue index finds no candidate (a fresh read, once its one pending lease has
    just been claimed; or a lagging one), a concurrent call of the same claim id may have put
    the record and claimed in between. Without its re-read of the record (4.), the call would
    answer empty while its sibling holds a lease under the same claim id; with it, every
    empty answer agrees with the record at the moment it is given."""
    flawed = explored(replace(SMALL, index_may_miss=True, flaws=Flaws(empty_without_recheck=True)))
    assert flawed.trace == [
        "w1/c1 starts claim call 1, reads its claim record: none",
        "w1/c1 starts claim call 2, reads its claim record: none",
        "w1/c1 puts its claim record -> L0.1",
        "w1/c1 reads L0.1 pending under nobody: claim it",
        "w1/c1 claims L0.1 won: answers it",
        "w1/c1 finds no candidate: answers empty",
    ]
    for world in (SMALL, THREE_LEASES):
        result = explored(replace(world, index_may_miss=True))
        assert result.violation is None, _report(result)
        assert result.kinds["answer empty"] > 0


def test_the_give_up_worlds_shun_and_lose_writes_on_pending_leases() -> None:
    """Where calls may give up a pending lease and an operator may change one, calls do shun
    leases (and lose such writes to siblings), claims lose their writes on leases that stay
    pending, and the re-read before empty follows a moved record: the paths the shun exists
    for are walked, and no claim ever takes a lease it shunned (an invariant)."""
    kinds = explored(GIVE_UP).kinds
    for kind in ("shun", "shun refused", "operator change", "claim refused"):
        assert kinds[kind] > 0, kind
    assert explored(WORLDS["2 claimers, 1 job, a give-up each"]).kinds["shun"] > 0
    assert explored(WORLDS["2 claimers, 1 job"]).kinds["no candidate"] > 0


def test_the_report_worlds_race_copies_of_one_report_and_its_resends() -> None:
    """With reports carrying `next`, copies of one report race for its write (and lose it
    to each other), the claim's intent is kept by that write (or none is, and a record of its
    own is put), resends follow it to their lease or answer nothing new, and every actor
    crashes between its writes, the report's end among them."""
    kinds = explored(HANDOVER).kinds
    for kind in (
        "report",
        "report refused",
        "resend answered",
        "record put",
        "reissue",
        "repoint",
        "claim won",
        "crash",
    ):
        assert kinds[kind] > 0, kind
    assert explored(WORLDS["1 claimer, 2 jobs, reports with next, a give-up and a change"]).kinds[
        "shun"
    ]


def _ignores_the_shun(own: bool, held: bool, pending: bool, shunned: bool) -> At:
    return REAL_JUDGE(own, held, pending, shunned=False)


def _passes_its_own_lease_by(own: bool, held: bool, pending: bool, shunned: bool) -> At:
    at = REAL_JUDGE(own, held, pending, shunned)
    return At.NAMES if at is At.OWN else at


REAL_JUDGE = claim_intent.judge
# The service's rule broken, the world it is looked for in, and what the checker must report:
# the model runs the service's `judge`, so breaking it breaks the protocol here too.
BROKEN_JUDGES = {
    "a pending lease taken whoever shunned it": (_ignores_the_shun, GIVE_UP, "which shunned it"),
    "a retry that looks past its own held lease": (
        _passes_its_own_lease_by,
        SMALL,
        "answered empty none while L0.1 is held under it",
    ),
}


@pytest.mark.parametrize("broken", BROKEN_JUDGES)
def test_the_model_runs_the_services_own_judge(
    broken: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge, world, report = BROKEN_JUDGES[broken]
    assert explored(world).violation is None
    monkeypatch.setattr(claim_intent, "judge", judge)
    result = explore(world)  # not `explored`: that one remembers the service's own verdict
    assert result.violation is not None
    assert report in result.violation, _report(result)


def _table() -> list[tuple[str, Config]]:
    """What docs/protocol-model.md quotes: every world, every weakening, the index findings."""
    rows = list(WORLDS.items())
    rows += [(flaw, replace(world, flaws=flaws)) for flaw, (flaws, world, _) in FLAWED.items()]
    job_fence = Flaws(sweep_ignores_job_fence=True)
    rows.append(("the sweep without its job condition", replace(THREE_LEASES, flaws=job_fence)))
    rows.append(("an index that may find nothing", replace(SMALL, index_may_miss=True)))
    return rows


# Bigger worlds than the suite can afford, for a run by hand (`... --larger`): minutes, not
# seconds, for the last one.
LARGER = {
    "2 claimers, 1 job, 3 calls": replace(WORLDS["2 claimers, 1 job"], calls=3),
    "2 claimers, 1 job, 3 calls in flight, 2 requeues": replace(
        WORLDS["2 claimers, 1 job"], overlap=3, requeues=2
    ),
    "2 claimers, 2 jobs, 3 calls": replace(WORLDS["2 claimers, 2 jobs"], calls=3),
    "3 claimers, 1 job, 2 calls in flight": replace(WORLDS["3 claimers, 1 job"], overlap=2),
    "3 claimers, 2 jobs, 2 calls in flight": replace(
        WORLDS["3 claimers, 2 jobs"], overlap=2, start=True
    ),
}


if __name__ == "__main__":
    import sys

    table = list(LARGER.items()) if "--larger" in sys.argv else _table()
    for name, cfg in table:
        r = explore(cfg)
        found = "no violation" if r.violation is None else f"{len(r.trace)} steps: {r.violation}"
        print(f"{name:56} | {r.states:>9,} | {r.transitions:>10,} | {r.seconds:6.2f} s | {found}")
