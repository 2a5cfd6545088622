"""The cost bench prices DynamoDB writes by AWS's rules, not by what DynamoDB Local reports."""

from __future__ import annotations

from tenure_cli.bench.billing import (
    Index,
    failed_write,
    item_size,
    item_write,
    number_size,
)

KEYS = ("PK", "SK")
QUEUE = Index("queue", ("queue_pk", "queue_sk"))
DUE = Index("due", ("due_pk", "due_at"))


def _lease(**extra: dict[str, str]) -> dict[str, dict[str, str]]:
    return {"PK": {"S": "LEASE#l1"}, "SK": {"S": "LEASE"}, "state": {"S": "pending"}, **extra}


def test_an_item_counts_its_attribute_names_and_values() -> None:
    assert item_size({"PK": {"S": "abc"}}) == 2 + 3
    assert item_size({"n": {"N": "12345"}}) == 1 + number_size("12345") == 1 + 4
    assert item_size({"ok": {"BOOL": True}}) == 3
    assert item_size({"m": {"M": {"a": {"S": "xy"}}}}) == 1 + 3 + (1 + 2 + 1)
    assert item_size({"l": {"L": [{"S": "x"}, {"S": "y"}]}}) == 1 + 3 + 2 * (1 + 1)


def test_a_small_put_with_no_index_entry_costs_one_unit() -> None:
    bill = item_write(None, _lease(), (QUEUE, DUE), KEYS)
    assert (bill.table, bill.indexes) == (1.0, {})


def test_a_transaction_writes_each_item_twice_but_not_its_index_entries() -> None:
    queued = _lease(queue_pk={"S": "POOL#a"}, queue_sk={"S": "0001"})
    bill = item_write(None, queued, (QUEUE, DUE), KEYS, transactional=True)
    assert bill.table == 2.0
    assert bill.indexes == {"queue": 1.0}


def test_index_entries_cost_one_to_add_two_to_move_one_to_remove_and_nothing_untouched() -> None:
    queued = _lease(queue_pk={"S": "POOL#a"}, queue_sk={"S": "0001"})
    claimed = _lease(state={"S": "dispatched"}, due_pk={"S": "POOL#a"}, due_at={"N": "100"})
    moved = _lease(state={"S": "running"}, due_pk={"S": "POOL#a"}, due_at={"N": "200"})
    renewed = _lease(
        state={"S": "running"}, due_pk={"S": "POOL#a"}, due_at={"N": "200"}, hb={"N": "9"}
    )
    claim = item_write(queued, claimed, (QUEUE, DUE), KEYS)
    assert claim.indexes == {"queue": 1.0, "due": 1.0}  # removed from one, added to the other
    assert item_write(claimed, moved, (QUEUE, DUE), KEYS).indexes == {"due": 2.0}
    # KEYS_ONLY: an attribute outside the keys changes nothing in the index.
    assert item_write(moved, renewed, (QUEUE, DUE), KEYS).indexes == {}


def test_an_item_past_one_kilobyte_costs_by_the_larger_of_before_and_after() -> None:
    big = _lease(body={"S": "x" * 1500})
    assert item_write(big, _lease(), (), KEYS).table == 2.0
    assert item_write(_lease(), big, (), KEYS, transactional=True).table == 4.0


def test_a_failed_condition_costs_the_item_it_was_checked_against() -> None:
    assert failed_write(None).table == 1.0
    assert failed_write(_lease(body={"S": "x" * 2100})).table == 3.0
    assert failed_write(_lease(), transactional=True).table == 2.0
