"""The instance's settings this service reads, through one function that reads the row on
every call (no cached copy, so a change holds for the very next request)."""

from __future__ import annotations

from dataclasses import dataclass

from tenure.app.rows import PoolRows
from tenure.domain.model import DEFAULT_RETRY_CHAIN_CAP


@dataclass(frozen=True)
class InstanceSettings:
    retry_chain_cap: int = DEFAULT_RETRY_CHAIN_CAP
    allow_agent_force: bool = False


def instance_settings(store: PoolRows) -> InstanceSettings:
    """The settings row when one exists, else the defaults. (`GET/PATCH /instance` own the
    row; this is the only place the task graph and force operations read it.)"""
    instance = store.get_instance()
    return InstanceSettings(
        retry_chain_cap=instance.retry_chain_cap,
        allow_agent_force=instance.allow_agent_force,
    )
