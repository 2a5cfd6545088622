"""HTTP API entry (API Gateway HTTP API, payload 2.0): check who may call the route, then let
the resolver run it. The routes live in api/endpoints/, one module per resource."""

from __future__ import annotations

from tenure.api.endpoints import (
    artifacts,
    blocks,
    board,
    graph,
    mcp,
    operator_leases,
    operator_workers,
    pool_figures,
    pools,
    rules,
    scheduler,
    setup,
    tasks,
    worker_routes,
)
from tenure.api.surface import app, contract, handle, logger, metrics

# The route modules register themselves on import; named here so the registration is explicit,
# by who calls them (api/routes.py says exactly who may call each route).
ENDPOINTS = (
    # A worker (its worker token) and a running job (its lease token): claim, heartbeats,
    # start, reports, payload; a job's logs and attachments are in artifacts.
    worker_routes,
    artifacts,
    # Operators (their tokens, by role): the instance, spaces, pools, tasks, their leases.
    setup,
    tasks,
    operator_leases,
    operator_workers,
    rules,
    pools,
    graph,
    scheduler,
    blocks,
    pool_figures,
    # Any token, each tool judging its caller (MCP); the board's page and its data.
    mcp,
    board,
)
__all__ = ["app", "contract", "handle", "logger", "metrics"]
