"""The scope check: a token limited to spaces or pools, or a lease token, is
refused a resource outside its scope before anything about the request is validated, as a
role below the route's is. Which scopes a request names is the table in api/routes.py; the
service still checks each one again when it acts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tenure.api.routes import Match, scopes_of
from tenure.domain import authz
from tenure.domain.errors import LeaseTokenMismatch
from tenure.domain.model import Principal


class Reader(Protocol):
    """What the check reads (the service: Scopes, app/scopes.py)."""

    def space_of(self, kind: str, ident: str) -> str | None: ...

    def lease_reaches_task(self, lease_id: str, task_id: str) -> bool | None: ...


def check(
    actor: Principal,
    route: Match,
    query: Mapping[str, str],
    body: Callable[[], Any],
    reader: Callable[[], Reader],
) -> None:
    """Refuse `actor` a scope the request names and its token does not cover. `body` is the
    body parsed leniently (a field is read only from a JSON object); `reader` is called only
    when something must be read: never for an unscoped token, whose request names nothing it
    could be refused. A name nothing has is let through: its route answers as it always has."""
    scoped = scopes_of(route.method, route.rule)
    if actor.kind == "operator" and actor.spaces is not None:
        for scope in scoped:
            if scope.where == "all":
                authz.require_operator(actor, "read")  # refuses a token limited to spaces
                continue
            name = _named(scope.where, scope.name, route, query, body)
            space = reader().space_of(scope.kind, name) if name else None
            if space is not None:
                authz.require_operator(actor, "read", space)  # its role was checked already
    elif actor.kind == "worker" and actor.pools is not None:
        for scope in scoped:
            name = _named(scope.where, scope.name, route, query, body)
            if scope.kind == "pool" and name:
                authz.require_worker(actor, name)  # a worker's scope is its pools' names
    elif actor.kind == "lease":
        # Its own lease is the route table's check (<lease_id>); a task is one its lease runs
        # or filed (the blocks routes).
        for scope in scoped:
            name = _named(scope.where, scope.name, route, query, body)
            if scope.kind != "task" or not name:
                continue
            if reader().lease_reaches_task(actor.lease_id or "", name) is False:
                raise LeaseTokenMismatch(f"this lease token is not for a lease on {name}")


def _named(
    where: str, name: str, route: Match, query: Mapping[str, str], body: Callable[[], Any]
) -> str | None:
    if where == "path":
        return route.params.get(name)
    if where == "query":
        return query.get(name)
    if where == "body":
        parsed = body()
        value = parsed.get(name) if isinstance(parsed, dict) else None
        return value if isinstance(value, str) else None
    return None
