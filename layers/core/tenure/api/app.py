"""HTTP API entry (API Gateway HTTP API, payload 2.0): check who may call the route, then let
the resolver run it. The routes live in api/endpoints/, one module per resource."""

from __future__ import annotations

from tenure.api.dispatch import handle
from tenure.api.endpoints import (
    artifacts,
    blocks,
    board,
    graph,
    leases,
    mcp,
    pool_figures,
    pools,
    rules,
    scheduler,
    setup,
    tasks,
    workers,
)
from tenure.api.surface import app, contract, logger, metrics

# The route modules register themselves on import; named here so the registration is explicit.
ENDPOINTS = (
    setup,
    tasks,
    leases,
    workers,
    rules,
    artifacts,
    pools,
    graph,
    scheduler,
    mcp,
    board,
    blocks,
    pool_figures,
)
__all__ = ["app", "contract", "handle", "logger", "metrics"]
