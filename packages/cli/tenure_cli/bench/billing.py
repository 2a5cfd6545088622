"""DynamoDB's write billing, as AWS applies it, for writes the bench observed.

DynamoDB Local reports consumed capacity, but not as AWS bills it: inside a transaction it
sums the item sizes instead of doubling them and it doubles index writes. So the cost bench
prices each write from the items themselves — their size before and after, which index
entries were added, moved or removed, and whether the write was transactional — by these
rules:

* an item write costs ceil(max(size before, size after) / 1 KB) units, at least 1;
* a transaction writes each of its items twice (prepare and commit); a condition check in a
  transaction is billed like a write of the item it checks;
* an index entry costs 1 to add, 2 when its key changes (delete + put), 1 to remove, 1 when
  only a projected attribute changes, 0 when untouched — inside a transaction as outside it;
* a failed conditional write costs the size of the item it was checked against (at least 1);
  a cancelled transaction, that for every item it named, twice.

The rules for the single-item writes can be checked against DynamoDB Local, which reports
those faithfully; `Bill.reported` keeps what Local said beside the model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

KB = 1024

Item = Mapping[str, Any]  # an item in DynamoDB's typed JSON ({"S": …}, {"N": …}, …)


def value_size(value: Mapping[str, Any]) -> int:
    """The bytes one typed attribute value counts toward its item's size."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return number_size(str(raw))
    if kind == "B":
        return len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw).encode())
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(x).encode()) for x in raw)
    if kind == "NS":
        return sum(number_size(str(x)) for x in raw)
    if kind == "BS":
        return sum(len(x) for x in raw)
    if kind == "L":
        return 3 + sum(value_size(x) + 1 for x in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    raise ValueError(f"not a DynamoDB attribute value: {kind}")


def number_size(text: str) -> int:
    """About 1 byte per two significant digits, plus 1."""
    digits = Decimal(text).normalize().as_tuple().digits
    significant = len(digits) if any(digits) else 1
    return math.ceil(significant / 2) + 1


def item_size(item: Item | None) -> int:
    """An item's size: every attribute's name and value."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def units(size: int) -> int:
    return max(1, math.ceil(size / KB))


@dataclass(frozen=True)
class Index:
    """A global or local secondary index: its key attributes and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str = "KEYS_ONLY"  # KEYS_ONLY | INCLUDE | ALL
    included: tuple[str, ...] = ()

    def entry(self, item: Item | None, table_keys: Iterable[str]) -> dict[str, Any] | None:
        """The item's entry in this index, or None when the item has none (sparse)."""
        if not item or any(k not in item for k in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = {*self.keys, *table_keys, *self.included}
        return {k: v for k, v in item.items() if k in names}


@dataclass
class Bill:
    """What one observed write call costs, by the rules above."""

    table: float = 0.0
    indexes: dict[str, float] = field(default_factory=dict)
    reported: float | None = None  # what DynamoDB (Local) said the call consumed

    @property
    def total(self) -> float:
        return self.table + sum(self.indexes.values())

    def add(self, other: Bill) -> None:
        self.table += other.table
        for name, n in other.indexes.items():
            self.indexes[name] = self.indexes.get(name, 0.0) + n


def index_units(
    index: Index, before: Item | None, after: Item | None, table_keys: Iterable[str]
) -> float:
    keys = tuple(table_keys)
    old, new = index.entry(before, keys), index.entry(after, keys)
    if old is None and new is None:
        return 0.0
    if old is None:
        return float(units(item_size(new)))
    if new is None:
        return float(units(item_size(old)))
    if any(old.get(k) != new.get(k) for k in index.keys):
        return float(units(item_size(old)) + units(item_size(new)))
    return float(units(item_size(new))) if old != new else 0.0


def item_write(
    before: Item | None,
    after: Item | None,
    indexes: Iterable[Index],
    table_keys: Iterable[str],
    transactional: bool = False,
) -> Bill:
    """A write that landed: the item (twice in a transaction) and its index entries."""
    keys = tuple(table_keys)
    size = max(item_size(before), item_size(after))
    bill = Bill(table=float(units(size) * (2 if transactional else 1)))
    for index in indexes:
        n = index_units(index, before, after, keys)
        if n:
            bill.indexes[index.name] = n
    return bill


def failed_write(checked: Item | None, transactional: bool = False) -> Bill:
    """A write whose condition failed: the item it was checked against, nothing indexed."""
    return Bill(table=float(units(item_size(checked)) * (2 if transactional else 1)))
