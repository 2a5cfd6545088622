"""Breadth-first search of an explicit-state protocol model: every state reachable from a
start by the model's steps, each judged by the model's promises; the first state that breaks
one comes back with the shortest trace of steps to it. Shared by the filing and mint models."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

S = TypeVar("S", bound=Hashable)


@dataclass
class Result:
    states: int
    violation: str | None
    trace: list[str]
    seen_steps: set[str]  # every kind of step taken (a step's name after its actor's)


def search(
    start: S,
    steps: Callable[[S], Iterable[tuple[str, S]]],
    broken: Callable[[S], str | None],
) -> Result:
    parent: dict[S, tuple[S, str] | None] = {start: None}
    queue = deque([start])
    kinds: set[str] = set()
    while queue:
        state = queue.popleft()
        wrong = broken(state)
        if wrong is not None:
            trace: list[str] = []
            at = parent[state]
            while at is not None:
                before, step = at
                trace.append(step)
                at = parent[before]
            return Result(len(parent), wrong, trace[::-1], kinds)
        for step, nxt in steps(state):
            kinds.add(step.split(": ", 1)[-1])
            if nxt not in parent:
                parent[nxt] = (state, step)
                queue.append(nxt)
    return Result(len(parent), None, [], kinds)
