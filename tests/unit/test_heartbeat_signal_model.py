"""An explicit-state model checker for the worker heartbeat's signal: every interleaving of one
worker's heartbeats with an operator's moves, the sweeper's expiry, time and the replicas.

A worker heartbeat that echoes its last answer's signal answers a lease from it, unread, when
the worker's signal epoch has not moved since and the lease's deadline is not due. That is
right only through an order of reads and a rule on writes: every write a heartbeat must report
raises the holder's epoch in the same transaction (domain/transitions.py must_signal decides which,
and is called here on the rows each modelled write makes), the epoch is read before any lease,
and only a consistent read (or the heartbeat's own write) may be sealed into the next signal.
This file walks every ordering of a small world and checks, in every state, that:

* a lease answered from the signal is answered as the table held it when the heartbeat read the
  epoch (its deadline never later than the row's), unless that read came from a replica behind
  the table (DynamoDB's replicas catch up within about a second: the answer then lags that
  much, as the cheap lease read does today);
* no heartbeat ever renews a lease the sweeper expired (the renewal is a conditional write).

The world: one lease held by the worker, at most `moves` operator moves (pause, resume, cancel,
kill), an expiry once its deadline has passed, the job's own heartbeat asking once for a
shorter lease (`shorten`: its deadline comes earlier), abstract time in ticks, and eventually
consistent reads that may return the replica's copy (of the epoch row or the lease row) until
a catch-up step copies the table into it. The heartbeat is a sequence of steps: read the epoch,
then either answer from the signal or read the lease (consistently), write the deadline when
due, answer and seal. `Flaws` switches single parts of that off; the tests at the bottom show
that the checker finds each one.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

import pytest
from tenure.domain.model import Lease as LeaseRow
from tenure.domain.states import LeaseState, Revoke
from tenure.domain.transitions import must_signal

from tests.unit.support import make_lease

RUNNING, PAUSED, CANCELLING, LOST = "running", "paused", "cancelling", "lost"
STATES = {
    RUNNING: LeaseState.RUNNING,
    PAUSED: LeaseState.PAUSED,
    CANCELLING: LeaseState.CANCELLING,
    LOST: LeaseState.LOST,
}
TOLERATION = 2  # ticks: a deadline is due to be written within one, expired once passed
MOVES = {  # the operator's moves: (from state, from revoke) -> (to state, to revoke)
    "pause": ((RUNNING, None), (PAUSED, "pause")),
    "resume": ((PAUSED, "pause"), (RUNNING, None)),
    "cancel": ((RUNNING, None), (CANCELLING, "cancel")),
    "kill": ((CANCELLING, "cancel"), (CANCELLING, "kill")),
}


@dataclass(frozen=True)
class Flaws:
    no_bump: bool = False  # an operator's move raises no epoch
    lease_read_first: bool = False  # the heartbeat reads the lease before the epoch
    seal_cheap_read: bool = False  # a lease read from a replica is sealed into the signal
    blind_renewal: bool = False  # the deadline write is not conditional on the row read


class Lease(NamedTuple):
    state: str
    revoke: str | None
    version: int
    deadline: int  # the tick it expires at
    seconds: int = TOLERATION  # its lease_seconds, in ticks


class Sealed(NamedTuple):
    """What the worker holds from its last answer: the epoch and the lease's facts."""

    epoch: int
    state: str
    revoke: str | None
    deadline: int
    seconds: int


class State(NamedTuple):
    now: int
    lease: Lease
    epoch: int
    lease_copy: Lease  # what an eventually consistent read of the lease may return
    epoch_copy: int
    moves: int  # operator moves made
    beats: int  # heartbeats begun
    pc: str  # the heartbeat's next step: idle, lease (read it), answer
    read_epoch: int
    fresh: bool  # whether that epoch read saw the table (not a replica behind it)
    truth: tuple[str, str | None, int]  # the lease (and its deadline) at the epoch read
    read: Lease | None  # the lease as the heartbeat read it (None: not read)
    consistent: bool  # whether that lease read was consistent
    vouched: bool  # whether the signal vouches for the lease at the epoch read
    signal: Sealed | None
    renewed_lost: bool  # a renewal landed on an expired lease


@dataclass(frozen=True)
class Config:
    flaws: Flaws = Flaws()
    moves: int = 2
    beats: int = 4
    ticks: int = 4
    shorten: bool = False  # whether the job's own heartbeat may ask for a shorter lease


def _row(lease: Lease) -> LeaseRow:
    return make_lease(
        "L1",
        state=STATES[lease.state],
        revoke=Revoke(lease.revoke) if lease.revoke else None,
        worker_id="w1",
        claimed_by="tok-worker",
        version=lease.version,
        lease_seconds=lease.seconds,
        deadline=lease.deadline,
    )


def _write(cfg: Config, s: State, new: Lease) -> State:
    """A write of the lease, with the epoch raised in its transaction when the service's rule
    says so (the rule is called on the rows this write makes)."""
    bump = must_signal(_row(s.lease), _row(new)) is not None and not cfg.flaws.no_bump
    return s._replace(lease=new, epoch=s.epoch + (1 if bump else 0))


def _world_steps(cfg: Config, s: State) -> Iterator[tuple[str, State]]:
    lease = s.lease
    if s.now < cfg.ticks:
        yield "tick", s._replace(now=s.now + 1)
    if (s.lease_copy, s.epoch_copy) != (lease, s.epoch):
        yield "replicas catch up", s._replace(lease_copy=lease, epoch_copy=s.epoch)
    if lease.state == LOST:
        return
    if s.moves < cfg.moves:
        for name, (before, after) in MOVES.items():
            if (lease.state, lease.revoke) == before:
                new = lease._replace(state=after[0], revoke=after[1], version=lease.version + 1)
                yield f"operator {name}", _write(cfg, s._replace(moves=s.moves + 1), new)
    if lease.deadline <= s.now:
        lost = lease._replace(state=LOST, revoke=None, version=lease.version + 1)
        yield "sweeper expires", _write(cfg, s, lost)
    if cfg.shorten and lease.seconds == TOLERATION:  # the job asks for a shorter lease
        short = lease._replace(seconds=1, deadline=s.now + 2, version=lease.version + 1)
        yield "job shortens its lease", _write(cfg, s, short)


def _read_lease(cfg: Config, s: State) -> Iterator[tuple[str, State]]:
    yield "read lease (consistent)", s._replace(read=s.lease, consistent=True)
    if cfg.flaws.seal_cheap_read and s.lease_copy != s.lease:
        yield "read lease (replica)", s._replace(read=s.lease_copy, consistent=False)


def _beat_steps(cfg: Config, s: State) -> Iterator[tuple[str, State]]:
    if s.pc == "idle":
        if s.beats >= cfg.beats:
            return
        begun = s._replace(beats=s.beats + 1, read=None, vouched=False)
        if cfg.flaws.lease_read_first:
            for name, read in _read_lease(cfg, begun):
                yield f"beat: {name} first", read._replace(pc="epoch")
            return
        yield from _read_epoch(begun)
    elif s.pc == "epoch":
        yield from _read_epoch(s)
    elif s.pc == "lease":
        for name, read in _read_lease(cfg, s):
            yield f"beat: {name}", read._replace(pc="answer")
    else:
        yield "beat: answer", _answer(cfg, s)


def _read_epoch(s: State) -> Iterator[tuple[str, State]]:
    truth = (s.lease.state, s.lease.revoke, s.lease.deadline)
    seen = s._replace(read_epoch=s.epoch, fresh=True, truth=truth)
    yield "beat: read epoch", _after_epoch(seen)
    if s.epoch_copy != s.epoch:
        behind = s._replace(read_epoch=s.epoch_copy, fresh=False, truth=truth)
        yield "beat: read epoch (replica)", _after_epoch(behind)


def _after_epoch(s: State) -> State:
    """With the epoch read: answer from the signal when it vouches, else read the lease (a
    flawed heartbeat that read it already answers from that read)."""
    vouched = s.signal is not None and s.signal.epoch == s.read_epoch
    return s._replace(pc="answer" if vouched or s.read is not None else "lease", vouched=vouched)


def _due(deadline: int, seconds: int, now: int) -> bool:
    return deadline < now + seconds  # the same rule as domain/signals.py Known.due


def _answer(cfg: Config, s: State) -> State:
    done = s._replace(pc="idle")
    if s.vouched:  # the signal vouches at this epoch
        assert s.signal is not None
        if not _due(s.signal.deadline, s.signal.seconds, s.now):
            return done  # answered from it: `violation` checks the answer
        return done._replace(pc="lease", read=None, vouched=False)
    read = s.read
    assert read is not None
    if read.state == LOST:
        return done._replace(signal=None)  # stale_lease: nothing to seal
    lease = s.lease
    if _due(read.deadline, read.seconds, s.now):
        renewed = read._replace(version=read.version + 1, deadline=s.now + read.seconds + 1)
        if lease.version != read.version and not cfg.flaws.blind_renewal:
            return done._replace(signal=None)  # the condition lost: judged again next beat
        done = done._replace(renewed_lost=s.renewed_lost or lease.state == LOST)
        done = _write(cfg, done, renewed._replace(state=lease.state, revoke=lease.revoke))
        if lease.state == LOST:
            return done._replace(signal=None)
        read = done.lease
    if not s.consistent and not cfg.flaws.seal_cheap_read:
        return done._replace(signal=None)
    sealed = Sealed(s.read_epoch, read.state, read.revoke, read.deadline, read.seconds)
    return done._replace(signal=sealed)


def successors(cfg: Config, s: State) -> Iterator[tuple[str, State]]:
    yield from _world_steps(cfg, s)
    yield from _beat_steps(cfg, s)


def violation(cfg: Config, before: State, after: State) -> str | None:
    if after.renewed_lost:
        return "a heartbeat renewed a lease the sweeper had expired"
    answered = before.pc == "answer" and after.pc == "idle" and before.vouched
    if answered and before.fresh and before.signal is not None:
        state, revoke, deadline = before.truth
        said = (before.signal.state, before.signal.revoke)
        if said != (state, revoke):
            return f"answered {said} from the signal while the table held {(state, revoke)}"
        if before.signal.deadline > deadline:
            return f"answered deadline {before.signal.deadline} while the row's was {deadline}"
    return None


def initial(cfg: Config) -> State:
    lease = Lease(RUNNING, None, 1, TOLERATION + 1)
    return State(0, lease, 0, lease, 0, 0, 0, "idle", 0, True, (RUNNING, None, lease.deadline),
                 None, True, False, None, False)  # fmt: skip


@dataclass
class Result:
    states: int
    trace: list[str] | None  # the shortest path to a violation, with what it broke


def check(cfg: Config) -> Result:
    start = initial(cfg)
    seen = {start: None}
    paths: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        for name, nxt in successors(cfg, s):
            broke = violation(cfg, s, nxt)
            if broke is not None:
                trace = [name, broke]
                at: State | None = s
                while at is not None and paths[at] is not None:
                    prev, step = paths[at]  # type: ignore[misc]
                    trace.insert(0, step)
                    at = prev
                return Result(len(seen), trace)
            if nxt not in seen:
                seen[nxt] = None
                paths[nxt] = (s, name)
                queue.append(nxt)
    return Result(len(seen), None)


# ------------------------------------------------------------------------------ the checks


def test_the_protocol_keeps_its_promises_in_every_interleaving() -> None:
    result = check(Config())
    assert result.trace is None, "\n".join(result.trace)
    assert result.states > 1000  # the walk reached far: the world is not trivially small


def test_it_holds_with_more_moves_and_with_a_job_that_shortens_its_lease() -> None:
    for cfg in (Config(moves=3), Config(moves=1, shorten=True)):
        result = check(cfg)
        assert result.trace is None, "\n".join(result.trace)


def _found(flaws: Flaws) -> list[str]:
    result = check(replace(Config(), flaws=flaws))
    assert result.trace is not None, f"{flaws} went unnoticed over {result.states} states"
    return result.trace


def test_a_move_that_raises_no_epoch_is_found() -> None:
    assert "from the signal" in _found(Flaws(no_bump=True))[-1]


def test_reading_the_lease_before_the_epoch_is_found() -> None:
    assert "from the signal" in _found(Flaws(lease_read_first=True))[-1]


def test_sealing_a_replicas_copy_of_the_lease_is_found() -> None:
    assert "from the signal" in _found(Flaws(seal_cheap_read=True))[-1]


def test_a_renewal_not_conditional_on_the_row_is_found() -> None:
    assert "renewed a lease the sweeper had expired" in _found(Flaws(blind_renewal=True))[-1]


def test_the_service_rule_is_what_the_model_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `must_signal` broken to spare pauses is found through the model, unflawed."""
    real = must_signal

    def spares_pauses(seen: LeaseRow, new: LeaseRow) -> object:
        if new.state is LeaseState.PAUSED:
            return None
        return real(seen, new)

    monkeypatch.setattr(sys.modules[__name__], "must_signal", spares_pauses)
    result = check(Config())
    assert result.trace is not None and "paused" in result.trace[-1], result.trace


def test_a_rule_that_spares_a_shorter_lease_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a job's shorter lease no news to the signal, the worker would be told of a later
    deadline than the row's, and stop renewing a lease that expires sooner."""
    real = must_signal

    def spares_seconds(seen: LeaseRow, new: LeaseRow) -> object:
        return real(seen, replace(new, lease_seconds=seen.lease_seconds))

    monkeypatch.setattr(sys.modules[__name__], "must_signal", spares_seconds)
    result = check(Config(moves=0, shorten=True))
    assert result.trace is not None and "deadline" in result.trace[-1], result.trace
