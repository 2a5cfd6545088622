"""The one update a settings change is: SET and REMOVE only the named attributes of a row
(pools, spaces, the instance)."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import Settings
from tenure.domain.errors import TenureError
from tenure.store import codec, conditions
from tenure.store.table import Table


def settings_update(settings: Settings) -> tuple[str, dict[str, str], dict[str, Any]]:
    """An UpdateExpression that SETs and REMOVEs only the named attributes (every name
    goes through a placeholder: `name` and the like are reserved words)."""
    names = {f"#a{i}": a for i, a in enumerate([*settings.set, *settings.remove])}
    placeholders = {a: p for p, a in names.items()}
    parts = []
    if settings.set:
        parts.append("SET " + ", ".join(f"{placeholders[a]} = :v_{a}" for a in settings.set))
    if settings.remove:
        parts.append("REMOVE " + ", ".join(placeholders[a] for a in settings.remove))
    values = {f"v_{a}": v for a, v in settings.set.items()}
    return " ".join(parts), names, values


def update_row(
    table: Table,
    key: dict[str, str],
    settings: Settings,
    failed: TenureError,
    condition: str = conditions.EXISTS,
    **expect: Any,
) -> dict[str, Any]:
    """Write `settings` on the row of `key` under `condition`; the row as it is after."""
    expression, names, values = settings_update(settings)
    given = codec.values(**values, **expect)
    out = table.write(
        "update",
        failed,
        TableName=table.name,
        Key=codec.dump(key),
        UpdateExpression=expression,
        ConditionExpression=condition,
        ExpressionAttributeNames=names,
        **({"ExpressionAttributeValues": given} if given else {}),
        ReturnValues="ALL_NEW",
    )
    return codec.load(dict(out["Attributes"]))
