"""A stream record of the table, decoded: the one place the stream's images meet the key
formats (the reactor's trigger calls it; it knows no key)."""

from __future__ import annotations

from typing import Any

from tenure.store import items, keys
from tenure.store.codec import load_image


def decode_record(record: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """The (entity, old, new) a stream record changed — lease, task or graph row — decoded
    once for both the timeline event and the reactions; None for any other row or a delete."""
    change = record.get("dynamodb", {})
    if "NewImage" not in change:
        return None  # a delete: nothing on the timeline, nothing to react to
    new = load_image(change["NewImage"])
    old = load_image(change["OldImage"]) if "OldImage" in change else None
    if new.get(keys.SK) == keys.GRAPH_SK:
        task_id = keys.task_id_of(new)
        before = items.graph_from(task_id, old) if old else None
        return "graph", before, items.graph_from(task_id, new)
    entity = new.get("entity")
    if entity == "lease":
        return "lease", items.lease_from(old) if old else None, items.lease_from(new)
    if entity == "task":
        return "task", items.task_from(old) if old else None, items.task_from(new)
    return None
