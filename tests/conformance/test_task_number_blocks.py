"""Task numbers are reserved on the space row in blocks, one block per warm instance. These
prove on DynamoDB Local that two instances (two stores, two composed services on one table)
filing at once in one space never hand out the same key, that each instance's keys increase,
and that the space row is written once a block rather than once a task.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

from tenure import wiring
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.store.keys import space_key
from tenure.store.task_numbers import TASK_NUMBER_BLOCK

from tests.conformance.contract import SPACE, make_world
from tests.conformance.test_races import run_threads
from tests.conftest import ADMIN, Rig

INSTANCES = 2
THREADS_PER_INSTANCE = 3
TASKS_PER_THREAD = 20


def test_two_instances_filing_at_once_never_share_a_key(rig: Rig) -> None:
    make_world(rig.svc)
    endpoint = rig.store.client.meta.endpoint_url
    stores = [wiring.build_store(endpoint, rig.store.table) for _ in range(INSTANCES)]
    services = [compose(Rows.of(s, s), wiring.SystemClock(), wiring.RandomIds()) for s in stores]

    def file(i: int) -> list[int]:
        svc = services[i % INSTANCES]
        numbers = []
        for n in range(TASKS_PER_THREAD):
            task, _ = svc.filing.create_task(ADMIN, SPACE, f"t{i}-{n}", None, None, {}, None, None)
            space, _, number = task.key.rpartition("-")
            assert space == SPACE
            numbers.append(int(number))
        return numbers

    answers = run_threads(INSTANCES * THREADS_PER_INSTANCE, file)
    total = INSTANCES * THREADS_PER_INSTANCE * TASKS_PER_THREAD
    every = [n for numbers in answers for n in numbers]
    assert len(set(every)) == total, sorted(every)
    for numbers in answers:  # one thread's filings, in the order it made them
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    # The space row moved once a block: its counter is a whole number of blocks, and no more
    # blocks than each instance needed (its share rounded up to a block, plus the block the
    # world's own filings may have left with the first service).
    seq = int(rig.store.rows.get(space_key(SPACE), consistent=True)["task_seq"])
    assert seq % TASK_NUMBER_BLOCK == 0
    share = THREADS_PER_INSTANCE * TASKS_PER_THREAD
    blocks_each = -(-share // TASK_NUMBER_BLOCK)
    assert seq <= (INSTANCES * blocks_each + 1) * TASK_NUMBER_BLOCK
    assert max(every) <= seq
    # A key handed out by either instance finds its task through the id derived from it.
    for number in every[::7]:
        key = f"{SPACE}-{number}"
        task = rig.store.get_task(services[1].task_keys.task_id(ADMIN, key))
        assert task is not None and task.key == key
