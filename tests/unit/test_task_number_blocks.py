"""One instance's task numbers come from blocks reserved on the space row: they increase,
they are never handed out twice, the row is written once a block, and memory stays bounded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from tenure.domain.errors import NotFound
from tenure.store.task_numbers import TASK_NUMBER_BLOCK, TaskNumberBlocks


class Counter:
    """The space row's counter: `ADD task_seq :count`, answering the new value."""

    def __init__(self, spaces: tuple[str, ...] = ("OPS", "DEV")) -> None:
        self.seq = dict.fromkeys(spaces, 0)
        self.writes: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def reserve(self, space: str, count: int) -> int:
        with self._lock:
            if space not in self.seq:
                raise NotFound(f"space {space!r} does not exist")
            self.writes.append((space, count))
            self.seq[space] += count
            return self.seq[space]


def test_one_instances_numbers_increase_and_cost_one_write_a_block() -> None:
    counter = Counter()
    blocks = TaskNumberBlocks(counter.reserve)
    numbers = [blocks.next("OPS") for _ in range(2 * TASK_NUMBER_BLOCK + 1)]
    assert numbers == list(range(1, 2 * TASK_NUMBER_BLOCK + 2))
    assert counter.writes == [("OPS", TASK_NUMBER_BLOCK)] * 3


def test_two_instances_interleave_blocks_without_sharing_a_number() -> None:
    counter = Counter()
    first, second = TaskNumberBlocks(counter.reserve), TaskNumberBlocks(counter.reserve)
    a = [first.next("OPS"), second.next("OPS"), first.next("OPS"), second.next("OPS")]
    # Not in filing order across instances: the second instance's block comes after the first's.
    assert a == [1, TASK_NUMBER_BLOCK + 1, 2, TASK_NUMBER_BLOCK + 2]
    # A cold instance starts a fresh block: what the others left unused is a gap.
    assert TaskNumberBlocks(counter.reserve).next("OPS") == 2 * TASK_NUMBER_BLOCK + 1


def test_spaces_count_apart() -> None:
    counter = Counter()
    blocks = TaskNumberBlocks(counter.reserve)
    assert [blocks.next("OPS"), blocks.next("DEV"), blocks.next("OPS")] == [1, 1, 2]


def test_a_missing_space_is_refused_and_holds_nothing() -> None:
    blocks = TaskNumberBlocks(Counter().reserve)
    with pytest.raises(NotFound):
        blocks.next("NOPE")
    assert "NOPE" not in blocks._blocks


def test_threads_of_one_instance_never_share_a_number() -> None:
    counter = Counter()
    blocks = TaskNumberBlocks(counter.reserve, block=4)
    with ThreadPoolExecutor(8) as pool:
        numbers = list(pool.map(lambda _: blocks.next("OPS"), range(400)))
    assert sorted(numbers) == list(range(1, 401))
    assert len(counter.writes) == 100


def test_memory_is_bounded_and_a_forgotten_block_is_a_gap() -> None:
    counter = Counter(tuple(f"S{i}" for i in range(5)))
    blocks = TaskNumberBlocks(counter.reserve, spaces_held=2)
    assert blocks.next("S0") == 1
    for i in range(1, 5):
        blocks.next(f"S{i}")
    assert len(blocks._blocks) == 2
    # S0's block was forgotten: its next number comes from a new block.
    assert blocks.next("S0") == TASK_NUMBER_BLOCK + 1


def test_a_block_and_the_spaces_held_are_at_least_one() -> None:
    with pytest.raises(ValueError):
        TaskNumberBlocks(Counter().reserve, block=0)
    with pytest.raises(ValueError):
        TaskNumberBlocks(Counter().reserve, spaces_held=0)
