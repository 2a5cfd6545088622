"""Task numbers handed out from blocks a warm instance reserves on its space's row.

Every filing needs a number unique in its space (a task's key and id derive from it). Moving
the space row's counter by one for every task costs a write a task; moving it by a block and
handing the block out from memory costs one write a block. The price is in the promise: a
number is unique in its space and increases within one instance, but two instances interleave
their blocks (numbers are not in filing order across instances), and a block left unfinished
(a cold start, a crash, a space forgotten to keep memory bounded) is simply a gap."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

# Numbers reserved by one write of the space row. A write costs the same whatever the block's
# size, so a larger block only widens the gaps a cold instance leaves; 16 takes the counter's
# write off all but one filing in sixteen, and leaves at most 15 numbers unused per instance
# and space, far below the twelve digits a number may have.
TASK_NUMBER_BLOCK = 16
# Spaces whose unfinished block an instance keeps. The least recently filed-in space beyond
# these forgets its block (its unused numbers become a gap), so memory stays bounded whatever
# the number of spaces.
SPACES_HELD = 1024


class TaskNumberBlocks:
    """One instance's blocks of task numbers, a block per space. `reserve(space, count)` moves
    the space's counter up by `count` in one conditional write and answers the counter's new
    value: the block is the `count` numbers ending there, which no other caller of the counter
    can get. Safe across threads of one instance (a lock guards the blocks; a reservation is
    made under it, so two threads never reserve for one space at once)."""

    def __init__(
        self,
        reserve: Callable[[str, int], int],
        block: int = TASK_NUMBER_BLOCK,
        spaces_held: int = SPACES_HELD,
    ) -> None:
        if block < 1 or spaces_held < 1:
            raise ValueError("a block and the spaces held must be at least 1")
        self.reserve = reserve
        self.block = block
        self.spaces_held = spaces_held
        self._lock = threading.Lock()
        # space -> (next number to hand out, last number of the block), least recent first.
        self._blocks: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def next(self, space: str) -> int:
        with self._lock:
            held = self._blocks.pop(space, None)
            if held is None or held[0] > held[1]:
                last = self.reserve(space, self.block)
                held = (last - self.block + 1, last)
            number, last = held
            self._blocks[space] = (number + 1, last)
            while len(self._blocks) > self.spaces_held:
                self._blocks.popitem(last=False)
            return number
