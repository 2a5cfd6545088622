"""An explicit-state model of a rule's mint without a transaction, its deliveries, and the
claims that take a mint no delivery finished for dead.

An occasion's deliveries mint down a chain of job ids (the first derived from the occasion,
each next one from the one before). At a link, a delivery reads the job: with none there it
writes it (only if new: the occasion's lock), then the lease marked task-pending, then the
task; with one there it reads the lease and finishes what is missing. A lease ended as a dead
mint sends it on to the next link, and so does a task write that lost with no task there (the
id was voided). Any delivery may die between any two of its steps. A claim reads a pending
marked lease, then its task: with the task it claims (conditional on the lease's version);
without it, once the lease is old, it voids the task's id (a put that lands only while no
task holds it) and then ends the lease (conditional on its version) as a dead mint's.

Time is abstract, with the one bound the service leans on: a lease turns old (an hour on)
only once every delivery that was running when it was written has stopped (a Lambda
invocation lasts at most 15 minutes); deliveries that start later may run at any time,
as a dead-letter queue redriven a day later does.

Promises checked in every reachable state: a claimed lease's task is there; a lease ends at
most once; a delivery never answers a lease that ends as a dead mint; at most one lease of
the occasion is alive (neither ended as a dead mint nor with its task's id voided); once
every delivery has stopped and one of them answered, a live lease has its task or is
claimed. The `FLAWS` switch single conditions off; the tests show the checker finds each
one. One claimer is enough here: claims racing each other are the filing model's and the
claim races' (tests/unit/test_filing_protocol_model.py).

The code it models: app/rules/firings.py (`_current`, `_minted`, `_mint`),
app/rules/job_first.py, app/leases/claims/attempt.py (`Attempt.take`) and
app/leases/orphans.py.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from tests.unit.state_search import Result, search

PENDING, CLAIMED, CANCELLED = "pending", "claimed", "cancelled"
FLAWS = (
    "answer_a_dead_mint",  # a delivery answers a lease ended as a dead mint (the old way)
    "ignore_the_void",  # a task write that lost is taken for the task being there
    "no_shared_successor",  # each delivery picks a link of its own past a dead mint
    "claim_without_reading_the_task",
)
LINKS = 3  # job ids in the occasion's chain the model has room for
DELIVERIES = 3  # the first delivery and two later ones
CLAIM_CALLS = 3


@dataclass(frozen=True)
class Lease:
    state: str
    marked: bool
    version: int
    dead: bool = False  # ended as a dead mint (`orphan` on its ending)


@dataclass(frozen=True)
class Delivery:
    pc: str = "idle"  # idle, job, lock, lease, finish, task, void_check, answered, stopped
    link: int = 0
    seen: Lease | None = None


@dataclass(frozen=True)
class Claimer:
    pc: str = "idle"  # idle, read, task_read, voided
    link: int = 0
    seen: Lease | None = None
    task_there: bool = False
    calls: int = 0


@dataclass(frozen=True)
class World:
    jobs: tuple[bool, ...] = (False,) * LINKS
    leases: tuple[Lease | None, ...] = (None,) * LINKS
    tasks: tuple[str | None, ...] = (None,) * LINKS  # None, "task", "void"
    old: tuple[bool, ...] = (False,) * LINKS
    # Per link: the deliveries running when its lease was written (it turns old only after).
    witnesses: tuple[frozenset[int], ...] = (frozenset(),) * LINKS
    deliveries: tuple[Delivery, ...] = (Delivery(),) * DELIVERIES
    answered: tuple[int | None, ...] = (None,) * DELIVERIES
    claimer: Claimer = Claimer()
    ends: tuple[int, ...] = (0,) * LINKS


def _at(values: tuple, i: int, value: object) -> tuple:
    out = list(values)
    out[i] = value
    return tuple(out)


def _running(world: World) -> frozenset[int]:
    return frozenset(
        i for i, d in enumerate(world.deliveries) if d.pc not in ("idle", "answered", "stopped")
    )


def _move(world: World, i: int, delivery: Delivery) -> World:
    return replace(world, deliveries=_at(world.deliveries, i, delivery))


def steps(world: World, flaw: str | None) -> Iterator[tuple[str, World]]:
    for i, d in enumerate(world.deliveries):
        yield from _delivery_steps(world, i, d, flaw)
    for k in range(LINKS):
        lease = world.leases[k]
        if lease is not None and not world.old[k] and not (world.witnesses[k] & _running(world)):
            yield "an hour passes", replace(world, old=_at(world.old, k, True))
    yield from _claim_steps(world, world.claimer, flaw)


def _next_link(world: World, i: int, d: Delivery, flaw: str | None) -> Delivery:
    link = d.link + (max(i, 1) if flaw == "no_shared_successor" else 1)
    if link >= LINKS:
        return replace(d, pc="stopped")  # past the chain's room: the model stops it
    return Delivery(pc="job", link=link)


def _delivery_steps(
    world: World, i: int, d: Delivery, flaw: str | None
) -> Iterator[tuple[str, World]]:
    name = f"delivery {i}"
    k = d.link
    if d.pc in ("answered", "stopped"):
        return
    if d.pc == "idle":
        if i == 0 or world.deliveries[0].pc != "idle":  # the later ones come after the first
            yield f"{name}: arrives", _move(world, i, Delivery(pc="job"))
        return
    yield f"{name}: dies", _move(world, i, replace(d, pc="stopped"))
    if d.pc == "job":
        if world.jobs[k]:
            yield (
                f"{name}: reads the job and the lease",
                _move(world, i, replace(d, pc="lease", seen=world.leases[k])),
            )
        else:
            yield f"{name}: finds no job", _move(world, i, replace(d, pc="lock"))
    elif d.pc == "lock":
        if world.jobs[k]:
            yield f"{name}: the job's put loses", _move(world, i, replace(d, pc="job"))
        else:
            locked = replace(world, jobs=_at(world.jobs, k, True))
            yield f"{name}: puts the job", _move(locked, i, replace(d, pc="finish", seen=None))
    elif d.pc == "lease":
        seen = d.seen
        if seen is not None and seen.dead and flaw != "answer_a_dead_mint":
            yield (
                f"{name}: the mint is dead, on to the next link",
                _move(world, i, _next_link(world, i, d, flaw)),
            )
        elif seen is not None and (not seen.marked or world.tasks[k] == "task" or seen.dead):
            yield f"{name}: answers the lease", _answer(world, i, d)
        else:
            yield f"{name}: finishes the mint", _move(world, i, replace(d, pc="finish"))
    elif d.pc == "finish":
        if world.leases[k] is None:
            lease = Lease(PENDING, True, 1)
            written = replace(
                world,
                leases=_at(world.leases, k, lease),
                witnesses=_at(world.witnesses, k, _running(world)),
            )
            yield f"{name}: puts the lease", _move(written, i, replace(d, pc="task", seen=lease))
        else:
            now = world.leases[k]
            yield (
                f"{name}: the lease's put loses, read again",
                _move(world, i, replace(d, pc="task", seen=now)),
            )
    elif d.pc == "task":
        assert d.seen is not None
        if not d.seen.marked:
            yield f"{name}: answers the lease", _answer(world, i, d)
        elif world.tasks[k] is None:
            written = replace(world, tasks=_at(world.tasks, k, "task"))
            yield f"{name}: puts the task", _answer(written, i, d)
        else:
            yield f"{name}: the task's put loses", _move(world, i, replace(d, pc="void_check"))
    elif d.pc == "void_check":
        if world.tasks[k] == "task" or flaw == "ignore_the_void":
            yield f"{name}: reads the task there", _answer(world, i, d)
        else:
            yield (
                f"{name}: reads no task (voided), on to the next link",
                _move(world, i, _next_link(world, i, d, flaw)),
            )


def _answer(world: World, i: int, d: Delivery) -> World:
    done = _move(world, i, replace(d, pc="answered"))
    return replace(done, answered=_at(done.answered, i, d.link))


def _set_claimer(world: World, claimer: Claimer) -> World:
    return replace(world, claimer=claimer)


def _claim_steps(world: World, c: Claimer, flaw: str | None) -> Iterator[tuple[str, World]]:
    name = "claimer"
    if c.pc == "idle":
        if c.calls >= CLAIM_CALLS:
            return
        for k in range(LINKS):
            lease = world.leases[k]
            if lease is not None and lease.state == PENDING:
                yield (
                    f"{name}: reads a lease",
                    _set_claimer(world, replace(c, pc="read", link=k, seen=lease)),
                )
    elif c.pc == "read":
        assert c.seen is not None
        if c.seen.marked and flaw != "claim_without_reading_the_task":
            there = world.tasks[c.link] == "task"
            yield (
                f"{name}: reads the task",
                _set_claimer(world, replace(c, pc="task_read", task_there=there)),
            )
        else:
            yield from _claim_write(world, c, name)
    elif c.pc == "task_read":
        if c.task_there:
            yield from _claim_write(world, c, name)
        elif not world.old[c.link]:
            yield f"{name}: too young, passes", _set_claimer(world, _done(c))
        elif world.tasks[c.link] in (None, "void"):
            voided = replace(world, tasks=_at(world.tasks, c.link, "void"))
            yield f"{name}: voids the task id", _set_claimer(voided, replace(c, pc="voided"))
        else:
            yield f"{name}: the void loses (the task came)", _set_claimer(world, _done(c))
    elif c.pc == "voided":
        assert c.seen is not None
        lease = world.leases[c.link]
        assert lease is not None
        if lease.version == c.seen.version and lease.state == PENDING:
            ended = replace(
                world,
                leases=_at(world.leases, c.link, Lease(CANCELLED, True, lease.version + 1, True)),
                ends=_at(world.ends, c.link, world.ends[c.link] + 1),
            )
            yield f"{name}: ends the lease as a dead mint", _set_claimer(ended, _done(c))
        else:
            yield f"{name}: the end loses", _set_claimer(world, _done(c))


def _done(c: Claimer) -> Claimer:
    return Claimer(calls=c.calls + 1)


def _claim_write(world: World, c: Claimer, name: str) -> Iterator[tuple[str, World]]:
    assert c.seen is not None
    lease = world.leases[c.link]
    if lease is not None and lease.version == c.seen.version and lease.state == PENDING:
        claimed = replace(
            world, leases=_at(world.leases, c.link, Lease(CLAIMED, False, lease.version + 1))
        )
        yield f"{name}: claims", _set_claimer(claimed, _done(c))
    else:
        yield f"{name}: the claim loses", _set_claimer(world, _done(c))


def broken(world: World) -> str | None:
    for k, lease in enumerate(world.leases):
        if lease is not None and lease.state == CLAIMED and world.tasks[k] != "task":
            return "a claimed lease without its task"
        if world.ends[k] > 1:
            return "a lease ended twice"
    for link in world.answered:
        answered = world.leases[link] if link is not None else None
        if answered is not None and answered.dead:
            return "a delivery answered a lease that ended as a dead mint"
    # A lease whose task id is voided is dead already, its end a step away.
    alive = [
        k
        for k, lease in enumerate(world.leases)
        if lease is not None and not lease.dead and world.tasks[k] != "void"
    ]
    if len(alive) > 1:
        return "two live leases for one occasion"
    stopped = all(d.pc in ("answered", "stopped") for d in world.deliveries)
    kept = any(
        world.tasks[k] == "task" or world.leases[k].state == CLAIMED  # type: ignore[union-attr]
        for k in alive
    )
    if stopped and any(k is not None for k in world.answered) and not kept:
        return "every delivery answered, and no live lease has its task"
    return None


@functools.cache
def explore(flaw: str | None = None) -> Result:
    return search(World(), lambda world: steps(world, flaw), broken)


def test_every_interleaving_keeps_the_promises() -> None:
    result = explore()
    assert result.violation is None, (result.violation, result.trace)
    assert result.states > 10_000  # the search did walk the space


def test_the_search_reaches_every_kind_of_step() -> None:
    # A model that never reaches a dead mint's successor or the void's lost task write
    # proves nothing of them.
    assert explore().seen_steps >= {
        "arrives",
        "dies",
        "puts the job",
        "the job's put loses",
        "reads the job and the lease",
        "finishes the mint",
        "puts the lease",
        "the lease's put loses, read again",
        "puts the task",
        "the task's put loses",
        "reads the task there",
        "reads no task (voided), on to the next link",
        "the mint is dead, on to the next link",
        "answers the lease",
        "an hour passes",
        "too young, passes",
        "voids the task id",
        "ends the lease as a dead mint",
        "claims",
    }


@pytest.mark.parametrize("flaw", FLAWS)
def test_each_weakened_condition_is_found_with_a_trace(flaw: str) -> None:
    result = explore(flaw)
    assert result.violation is not None, flaw
    assert result.trace  # the steps that lead there
