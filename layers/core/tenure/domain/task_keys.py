"""A task's key (`OPS-12`) and the id derived from it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# A task's key: its space's key, a dash, its number in the space (`OPS-12`).
# (Twelve digits at most: the number fits the ten hex digits of the id derived from it.)
TASK_KEY = re.compile(r"([A-Z][A-Z0-9_]{0,31})-([1-9][0-9]{0,11})")
# The longest id looked up (a longer one is no task's, and is not read).
MAX_REF = 128
# What a task id looks like (core ids: "task_" then hex), for the advisory scan of a
# completion's `result`, and how much of a result's text that scan reads.
TASK_ID_SHAPE = re.compile(r"\btask_[0-9a-f]{6,40}\b")
MAX_SCANNED_CHARS = 100_000
# An id derived from a task's key: the task's own, or its first lease's (`lease_` before the
# same suffix, domain/timeline.py first_lease_id); the group is its space's digest. An id
# drawn at random never has this form: it begins with the time in hex, which has no leading
# zero.
DERIVED_ID = re.compile(r"(?:task|lease)_0([0-9a-f]{16})[0-9a-f]{10}")


def task_id_of_key(key: str) -> str:
    """The id of the task filed under `key`: a function of the key alone, so that wherever a
    task id is taken its key finds the task with one read by id, and filing writes nothing
    more for it. A key is handed out once (its space's counter only counts up, each instance
    hands out only the numbers it reserved from it, and a space is never removed), so no two
    tasks get the same id. Tasks filed by a release that drew ids at random keep theirs and
    are found through a key row (`tenure admin migrate`).

    Hex and as long as an id drawn at random (so a row costs what it did): a zero, 64 bits
    of the space key's digest, then the number. A space's tasks sort by their numbers, and a
    task's first lease (whose id carries the task's) before any lease drawn at random in the
    same millisecond (those begin with the time in hex, which has no leading zero): ties of
    one millisecond in the queue and on a timeline are broken by these ids, in the order one
    instance filed them (numbers are reserved in blocks per instance, so two instances'
    tasks of one millisecond are ordered by their numbers, not by when they were filed).
    Two spaces would share ids only if their digests met in 64 bits."""
    space, _, number = key.rpartition("-")
    return f"task_0{space_digest(space)}{int(number):010x}"


def space_digest(space: str) -> str:
    """The part of a derived id that names its space: 64 bits of the space key's digest."""
    return hashlib.sha256(f"tenure-task-space:{space}".encode()).hexdigest()[:16]


def derived_outside(ident: str, spaces: Iterable[str]) -> bool:
    """Whether `ident` is an id derived from a key of none of `spaces`, told from the id
    alone. Anyone can derive the id of another space's task from its key, so a caller kept
    out of that space must hear the same whether or not the task exists: judged from the
    form, a refusal needs no read and so cannot depend on one. An id of the random form is
    unguessable and says nothing here (False): its row decides."""
    found = DERIVED_ID.fullmatch(ident)
    return found is not None and found.group(1) not in {space_digest(s) for s in spaces}


def is_task_key(ref: str) -> bool:
    return TASK_KEY.fullmatch(ref) is not None
