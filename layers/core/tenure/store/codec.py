"""DynamoDB's typed values to plain Python and back, and the meter of what calls consumed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

_ser = TypeSerializer()
_de = TypeDeserializer()


@dataclass
class Meter:
    """Capacity the store consumed, as DynamoDB reported it (indexes included).

    It lives as long as a warm function does, so it keeps totals and a count per kind of
    call, never a list that grows with every call. `writes`, when a bench sets it to a list,
    also gets one line per write: which rows it touched and what the table and each index
    charged (`tenure bench lifecycle` prints them)."""

    read_units: float = 0.0
    write_units: float = 0.0
    items_read: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    writes: list[dict[str, Any]] | None = None

    def add(
        self,
        op: str,
        consumed: dict[str, Any] | list[dict[str, Any]] | None,
        rows: list[str] | None = None,
    ) -> None:
        self.calls[op] += 1
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        for entry in entries:
            self.read_units += float(entry.get("ReadCapacityUnits", 0) or 0)
            self.write_units += float(entry.get("WriteCapacityUnits", 0) or 0)
            if "ReadCapacityUnits" not in entry and "WriteCapacityUnits" not in entry:
                units = float(entry.get("CapacityUnits", 0) or 0)
                if op in ("get", "query", "batch_get", "scan"):
                    self.read_units += units
                else:
                    self.write_units += units
        if self.writes is not None and rows is not None:
            self.writes.append(_write_line(op, rows, entries))

    def snapshot(self) -> tuple[float, float, int]:
        return self.read_units, self.write_units, self.items_read


def _write_line(op: str, rows: list[str], entries: list[dict[str, Any]]) -> dict[str, Any]:
    indexes: dict[str, float] = {}
    table = 0.0
    for entry in entries:
        table += float((entry.get("Table") or {}).get("CapacityUnits", 0) or 0)
        for name, used in (entry.get("GlobalSecondaryIndexes") or {}).items():
            indexes[name] = indexes.get(name, 0.0) + float(used.get("CapacityUnits", 0) or 0)
    total = sum(float(e.get("CapacityUnits", 0) or 0) for e in entries)
    return {"op": op, "rows": rows, "write_units": total, "table": table, "indexes": indexes}


def dump(item: dict[str, Any]) -> dict[str, Any]:
    return {key: _ser.serialize(_to_dynamo(v)) for key, v in item.items() if v is not None}


def load(raw: dict[str, Any]) -> dict[str, Any]:
    return {key: _from_dynamo(_de.deserialize(v)) for key, v in raw.items()}


def load_image(raw: dict[str, Any]) -> dict[str, Any]:
    """A stream record's image (DynamoDB JSON) as plain values."""
    return load({key: _typed(v) for key, v in raw.items()})


def _typed(value: dict[str, Any]) -> dict[str, Any]:
    # The streams API hands an empty map back as a bare {} (its type tag dropped).
    if not value:
        return {"M": {}}
    if "M" in value:
        return {"M": {key: _typed(v) for key, v in value["M"].items()}}
    if "L" in value:
        return {"L": [_typed(v) for v in value["L"]]}
    return value


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {key: _to_dynamo(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _from_dynamo(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    if isinstance(value, set):
        return sorted(_from_dynamo(v) for v in value)
    return value


def values(**kw: Any) -> dict[str, Any]:
    return {f":{name}": _ser.serialize(_to_dynamo(v)) for name, v in kw.items()}
