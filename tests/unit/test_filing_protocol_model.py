"""An explicit-state model of filing without a transaction and the claims that meet its lease.

Filing writes a task's first lease (marked task-pending) and then the task, each only if new;
it may die between the two. A claim reads the lease, and when it is marked reads the task
before its write: with the task there it claims (conditional on the lease's version, clearing
the mark); without it, once the lease is old, it voids the task's id (a put that lands only
while no task holds it) and then ends the lease (conditional on its version). Time is
abstract: the lease may turn old at any moment after it is written, even while its filing is
still running (a stalled process). Every read and every write is a step of its own, and the
search walks every interleaving of one filing and two claimers of two calls each.

Promises checked in every reachable state: a claimed lease's task is there; the lease is
ended at most once; a filing that answered success has its lease not ended by a claim. The
`FLAWS` switch single conditions off; the tests show the checker finds each one.

The code it models: app/tasks/filing.py (`_lease_then_task`), app/leases/claims/attempt.py
(`Attempt.take`) and app/leases/orphans.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from tests.unit.state_search import Result, search

PENDING, CLAIMED, CANCELLED = "pending", "claimed", "cancelled"
FLAWS = ("claim_without_reading_the_task", "end_without_voiding", "end_unconditionally")
CALLS = 2  # claim calls per claimer


@dataclass(frozen=True)
class Lease:
    state: str
    marked: bool
    version: int


@dataclass(frozen=True)
class Claimer:
    pc: str = "idle"  # idle, read, task_read, voided, done
    seen: Lease | None = None
    task_there: bool = False
    calls: int = 0


@dataclass(frozen=True)
class World:
    lease: Lease | None = None
    task: str | None = None  # None, "task", "void"
    filer: str = "start"  # start, between, filed, refused, dead
    old: bool = False
    claimers: tuple[Claimer, ...] = (Claimer(), Claimer())
    ends: int = 0


def _set(world: World, i: int, claimer: Claimer) -> World:
    claimers = list(world.claimers)
    claimers[i] = claimer
    return replace(world, claimers=tuple(claimers))


def steps(world: World, flaw: str | None) -> Iterator[tuple[str, World]]:
    if world.filer == "start":
        yield "file: put the lease", replace(world, lease=Lease(PENDING, True, 1), filer="between")
    if world.filer == "between":
        if world.task is None:
            yield "file: put the task", replace(world, task="task", filer="filed")
        else:
            yield "file: the task's put loses", replace(world, filer="refused")
        yield "file: dies", replace(world, filer="dead")
    if world.lease is not None and not world.old:
        yield "time passes", replace(world, old=True)
    for i, c in enumerate(world.claimers):
        yield from _claim_steps(world, i, c, flaw)


def _claim_steps(world: World, i: int, c: Claimer, flaw: str | None) -> Iterator[tuple[str, World]]:
    name = f"claimer {i}"
    lease = world.lease
    if c.pc == "idle" and c.calls < CALLS:
        if lease is None or lease.state != PENDING:
            return
        yield f"{name}: reads the lease", _set(world, i, replace(c, pc="read", seen=lease))
    elif c.pc == "read":
        assert c.seen is not None
        if c.seen.marked and flaw != "claim_without_reading_the_task":
            there = world.task == "task"
            yield (
                f"{name}: reads the task",
                _set(world, i, replace(c, pc="task_read", task_there=there)),
            )
        else:
            yield from _claim_write(world, i, c, name)
    elif c.pc == "task_read":
        if c.task_there:
            yield from _claim_write(world, i, c, name)
        elif not world.old:
            yield f"{name}: too young, passes", _set(world, i, _done(c))
        elif flaw == "end_without_voiding":
            yield from _end_write(world, i, replace(c, pc="voided"), name, flaw)
        elif world.task in (None, "void"):
            voided = replace(world, task="void")
            yield f"{name}: voids the task id", _set(voided, i, replace(c, pc="voided"))
        else:
            yield f"{name}: the void loses (the task came)", _set(world, i, _done(c))
    elif c.pc == "voided":
        yield from _end_write(world, i, c, name, flaw)


def _done(c: Claimer) -> Claimer:
    return Claimer(calls=c.calls + 1)


def _claim_write(world: World, i: int, c: Claimer, name: str) -> Iterator[tuple[str, World]]:
    assert c.seen is not None
    lease = world.lease
    if lease is not None and lease.version == c.seen.version and lease.state == PENDING:
        claimed = replace(world, lease=Lease(CLAIMED, False, lease.version + 1))
        yield f"{name}: claims", _set(claimed, i, _done(c))
    else:
        yield f"{name}: the claim loses", _set(world, i, _done(c))


def _end_write(
    world: World, i: int, c: Claimer, name: str, flaw: str | None
) -> Iterator[tuple[str, World]]:
    assert c.seen is not None
    lease = world.lease
    assert lease is not None
    unconditional = flaw == "end_unconditionally"
    if unconditional or (lease.version == c.seen.version and lease.state == PENDING):
        ended = replace(
            world,
            lease=Lease(CANCELLED, lease.marked, lease.version + 1),
            ends=world.ends + 1,
        )
        yield f"{name}: ends the lease", _set(ended, i, _done(c))
    else:
        yield f"{name}: the end loses", _set(world, i, _done(c))


def broken(world: World) -> str | None:
    lease = world.lease
    if lease is not None and lease.state == CLAIMED and world.task != "task":
        return "a claimed lease without its task"
    if world.ends > 1:
        return "the lease ended twice"
    if world.filer == "filed" and lease is not None and lease.state == CANCELLED:
        return "a filing that answered success lost its lease to a claim"
    return None


def explore(flaw: str | None = None) -> Result:
    return search(World(), lambda world: steps(world, flaw), broken)


def test_every_interleaving_keeps_the_promises() -> None:
    result = explore()
    assert result.violation is None, result.trace
    assert result.states > 500  # the search did walk the space


def test_the_search_reaches_every_kind_of_step() -> None:
    # A model that never reaches the orphan's end or the late task's loss proves nothing of
    # them.
    assert explore().seen_steps >= {
        "put the lease",
        "put the task",
        "the task's put loses",
        "dies",
        "reads the task",
        "too young, passes",
        "voids the task id",
        "the void loses (the task came)",
        "ends the lease",
        "the end loses",
        "claims",
        "the claim loses",
    }


@pytest.mark.parametrize("flaw", FLAWS)
def test_each_weakened_condition_is_found_with_a_trace(flaw: str) -> None:
    result = explore(flaw)
    assert result.violation is not None, flaw
    assert result.trace  # the steps that lead there
