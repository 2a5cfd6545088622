"""The instance's settings this service reads (DESIGN §12), through one function."""

from __future__ import annotations

from dataclasses import dataclass

from tenure.core.base import ServiceBase

DEFAULT_RETRY_CHAIN_CAP = 5


@dataclass(frozen=True)
class InstanceSettings:
    retry_chain_cap: int = DEFAULT_RETRY_CHAIN_CAP
    allow_agent_force: bool = False


class InstanceOps(ServiceBase):
    def _instance_settings(self) -> InstanceSettings:
        """The settings row when one exists, else the defaults. (`GET/PATCH /instance` own the
        row; this is the only place the task graph and force operations read it.)"""
        row = self.store.get_instance_row() or {}
        cap = row.get("retry_chain_cap")
        return InstanceSettings(
            retry_chain_cap=DEFAULT_RETRY_CHAIN_CAP if cap is None else int(cap),
            allow_agent_force=bool(row.get("allow_agent_force", False)),
        )
