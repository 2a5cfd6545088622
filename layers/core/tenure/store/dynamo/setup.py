"""Making the table: its definition and its TTL (what a local stack and the tests do; a
deployment's template makes it)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from tenure.store import keys


def create_table(client: Any, table: str) -> None:
    """Create `table` unless it exists, wait for it, and turn its TTL on."""
    try:
        client.create_table(**keys.table_definition(table))
    except ClientError as err:
        if err.response["Error"]["Code"] != "ResourceInUseException":
            raise
    client.get_waiter("table_exists").wait(TableName=table)
    enable_ttl(client, table)


def enable_ttl(client: Any, table: str) -> None:
    """Turn on TTL (CreateTable cannot); the template's TimeToLiveSpecification says the
    same. Reads never rely on it: TTL deletes lazily, they filter on expires_at."""
    ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        return
    client.update_time_to_live(TableName=table, TimeToLiveSpecification=keys.TTL_SPECIFICATION)
