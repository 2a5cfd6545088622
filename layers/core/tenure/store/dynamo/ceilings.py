"""Where each ceiling's counter lives, and the write that moves it."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import (
    DELEGATED_CEILING,
    INSTANCE_CEILING,
    KEY_CEILING,
    OWN_LIMIT_CEILINGS,
    RATE_CEILING,
    TREE_CEILING,
    Ceiling,
    split_ceiling,
)
from tenure.store import codec, conditions, expressions, keys


def ceiling_key(scope: str, name: str) -> dict[str, str]:
    if scope == INSTANCE_CEILING:
        return keys.INSTANCE_KEY
    if scope == KEY_CEILING:
        return keys.key_counter_key(*split_ceiling(name))
    if scope == RATE_CEILING:
        pool, minute = split_ceiling(name)
        return keys.rate_counter_key(pool, int(minute))
    if scope in (DELEGATED_CEILING, TREE_CEILING):
        return keys.delegation_counter_key(scope, name)
    return keys.pool_key(name) if scope == "pool" else keys.space_key(name)


def ceiling_op(table_name: str, ceiling: Ceiling) -> dict[str, Any]:
    """The counter's ADD, under its limit when it takes a lease (a transaction item)."""
    update: dict[str, Any] = {
        "TableName": table_name,
        "Key": codec.dump(ceiling_key(ceiling.scope, ceiling.name)),
        "UpdateExpression": expressions.ADD_ACTIVE,
        "ExpressionAttributeValues": codec.values(delta=ceiling.delta),
    }
    own_limit = ceiling.scope in OWN_LIMIT_CEILINGS
    if ceiling.delta > 0 and ceiling.limit is not None:
        update["ConditionExpression"] = (
            conditions.BELOW_LIMIT if own_limit else conditions.BELOW_CEILING
        )
        if own_limit:
            update["ExpressionAttributeValues"] = codec.values(
                delta=ceiling.delta, limit=ceiling.limit
            )
    if ceiling.scope == RATE_CEILING:
        _, minute = split_ceiling(ceiling.name)
        keep = (int(minute) + 1) * 60 + keys.RATE_COUNTER_KEEP_SECONDS
        update["UpdateExpression"] += expressions.KEEP_RATE_COUNTER
        update["ExpressionAttributeValues"] = {
            **update["ExpressionAttributeValues"],
            **codec.values(keep=keep),
        }
    return {"Update": update}
