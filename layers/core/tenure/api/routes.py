"""Route facts shared by the API, the local front door and the template's checks: every route
and who may call it, decided before anything about the request is validated."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Protocol

from tenure.domain import authz
from tenure.domain.errors import LeaseTokenMismatch
from tenure.domain.model import Principal
from tenure.records import record

BASE = "/api/v1"

# Audiences: "public" (no token), "operator:<role>" (that role or above), "worker" (a worker
# token), "lease" (the lease token of the `<lease_id>` in the path), and alternatives joined
# by "|" ("operator:member|lease": a member, or a worker delegating from its lease;
# "agent_force": worker and lease tokens while the instance allows agents to force).
# Rules use the resolver's `<param>` syntax, so the app registers exactly these strings.
ROUTES: dict[tuple[str, str], str] = {
    ("GET", f"{BASE}/health"): "public",
    ("GET", f"{BASE}/openapi.json"): "public",
    # The operator board: its page at the root, beside BASE, and who the caller is.
    ("GET", "/board"): "public",
    ("GET", f"{BASE}/whoami"): "operator:read",
    ("POST", f"{BASE}/spaces"): "operator:admin",
    ("GET", f"{BASE}/spaces"): "operator:read",
    ("POST", f"{BASE}/workflows"): "operator:admin",
    ("POST", f"{BASE}/pools"): "operator:admin",
    ("POST", f"{BASE}/tokens"): "operator:admin",
    ("GET", f"{BASE}/tokens"): "operator:admin",
    ("DELETE", f"{BASE}/tokens/<token_id>"): "operator:admin",
    ("POST", f"{BASE}/tasks"): "operator:member|lease",
    ("POST", f"{BASE}/tasks/<task_id>/enqueue"): "operator:member",
    ("GET", f"{BASE}/tasks"): "operator:read",
    ("GET", f"{BASE}/tasks/<task_id>"): "operator:read",
    ("GET", f"{BASE}/tasks/<task_id>/activity"): "operator:read",
    ("GET", f"{BASE}/leases"): "operator:read",
    ("GET", f"{BASE}/leases/<lease_id>"): "operator:read",
    ("POST", f"{BASE}/leases/<lease_id>/cancel"): "operator:member",
    ("POST", f"{BASE}/leases/<lease_id>/kill"): "operator:member",
    ("POST", f"{BASE}/leases/<lease_id>/pause"): "operator:member",
    ("POST", f"{BASE}/leases/<lease_id>/resume"): "operator:member",
    ("GET", f"{BASE}/workers"): "operator:read",
    ("POST", f"{BASE}/pools/<pool>/claim"): "worker",
    ("POST", f"{BASE}/workers/<worker_id>/heartbeat"): "worker",
    ("POST", f"{BASE}/leases/<lease_id>/start"): "lease",
    ("POST", f"{BASE}/leases/<lease_id>/heartbeat"): "lease",
    # A final report may also come with the worker token that claimed the lease, when it
    # claims the next one (`next`): app/leases/handover.py.
    ("POST", f"{BASE}/leases/<lease_id>/complete"): "lease|worker",
    ("POST", f"{BASE}/leases/<lease_id>/fail"): "lease|worker",
    ("POST", f"{BASE}/leases/<lease_id>/release"): "lease",
    ("GET", f"{BASE}/leases/<lease_id>/payload"): "lease",
    # Rules, events and the subjects they mint leases for (endpoints/rules.py).
    ("POST", f"{BASE}/rules"): "operator:admin",
    ("GET", f"{BASE}/rules"): "operator:read",
    ("GET", f"{BASE}/rules/<rule_id>"): "operator:read",
    ("PATCH", f"{BASE}/rules/<rule_id>"): "operator:admin",
    ("DELETE", f"{BASE}/rules/<rule_id>"): "operator:admin",
    ("POST", f"{BASE}/rules/<rule_id>/fire"): "operator:member",
    # A body with `name` (an event blocks wait for) also takes a lease token of that space.
    ("POST", f"{BASE}/events"): "operator:member|lease",
    ("GET", f"{BASE}/workflows/<slug>/activity"): "operator:read",
    ("GET", f"{BASE}/spaces/<key>/activity"): "operator:read",
    # Inbound addresses: given and taken by an admin of every space (NAMED_SCOPES).
    ("POST", f"{BASE}/spaces/<key>/addresses"): "operator:admin",
    ("GET", f"{BASE}/spaces/<key>/addresses"): "operator:read",
    ("DELETE", f"{BASE}/spaces/<key>/addresses/<address>"): "operator:admin",
    # Runtime coordinates (operators only); logs and attachments, read by whoever
    # sees the lease (the lease itself too), written by the lease's own token.
    ("GET", f"{BASE}/leases/<lease_id>/exec_target"): "operator:read",
    ("POST", f"{BASE}/leases/<lease_id>/logs"): "lease",
    ("GET", f"{BASE}/leases/<lease_id>/logs"): "operator:read|lease",
    ("POST", f"{BASE}/leases/<lease_id>/attachments"): "lease",
    ("GET", f"{BASE}/leases/<lease_id>/attachments"): "operator:read|lease",
    ("GET", f"{BASE}/leases/<lease_id>/attachments/<attachment_id>"): "operator:read|lease",
    # Pools, spaces and the instance.
    ("GET", f"{BASE}/pools"): "operator:read",
    ("GET", f"{BASE}/pools/<pool>"): "operator:read",
    ("GET", f"{BASE}/pools/<pool>/figures"): "operator:read",
    ("PATCH", f"{BASE}/pools/<pool>"): "operator:admin",
    ("POST", f"{BASE}/pools/<pool>/pause"): "operator:admin",
    ("POST", f"{BASE}/pools/<pool>/resume"): "operator:admin",
    ("POST", f"{BASE}/spaces/<space>/archive"): "operator:admin",
    ("POST", f"{BASE}/spaces/<space>/unarchive"): "operator:admin",
    ("GET", f"{BASE}/instance"): "operator:admin",
    ("PATCH", f"{BASE}/instance"): "operator:admin",
    ("GET", f"{BASE}/instance/activity"): "operator:admin",
    # The task graph, the scheduler and operator recovery. "agent_force": a worker
    # or lease token too, but only while the instance's allow_agent_force is on.
    ("PATCH", f"{BASE}/tasks/<task_id>"): "operator:member",
    ("POST", f"{BASE}/tasks/<task_id>/pause"): "operator:member",
    ("POST", f"{BASE}/tasks/<task_id>/resume"): "operator:member",
    ("GET", f"{BASE}/scheduler"): "operator:read",
    ("POST", f"{BASE}/scheduler/pause"): "operator:admin",
    ("POST", f"{BASE}/scheduler/resume"): "operator:admin",
    ("GET", f"{BASE}/scheduler/backlog"): "operator:read",
    ("POST", f"{BASE}/scheduler/drain"): "operator:admin",
    ("POST", f"{BASE}/leases/<lease_id>/retry"): "operator:member",
    ("POST", f"{BASE}/leases/bulk/release"): "operator:member|agent_force",
    ("POST", f"{BASE}/leases/bulk/fail"): "operator:member|agent_force",
    ("GET", f"{BASE}/inspect/<some_id>"): "operator:read",
    # Typed blocks and recover: a lease token only for a lease on that task.
    ("POST", f"{BASE}/tasks/<task_id>/blocks"): "operator:member|lease",
    ("GET", f"{BASE}/tasks/<task_id>/blocks"): "operator:read|lease",
    ("POST", f"{BASE}/tasks/<task_id>/blocks/<block_id>/clear"): "operator:member|lease",
    ("POST", f"{BASE}/tasks/<task_id>/recover"): "operator:member",
    # Approval: a person's decision, never an agent's.
    ("POST", f"{BASE}/tasks/<task_id>/approve"): "operator:member",
    ("POST", f"{BASE}/tasks/<task_id>/reject"): "operator:member",
    ("POST", f"{BASE}/tasks/<task_id>/cancel"): "operator:member",
    # The MCP endpoint; the tools it offers depend on the token (api/mcp/tools.py).
    ("POST", f"{BASE}/mcp"): "operator:read|lease|worker",
}

# Where a request names the scope it touches (a token without that scope gets 403
# `forbidden`, decided, like the role, before the request is validated; check_scopes below).
# A token limited to spaces (operator) or pools (worker) is checked against each scope its
# request names; an unscoped token skips this, so the common case reads nothing more.
#
# A path parameter by its name: what it names (a lease, task or rule is read for its space;
# a pool for its space, or, for a worker token, judged by its name alone).
SCOPE_PARAMS = {
    "lease_id": "lease",
    "task_id": "task",
    "pool": "pool",
    "rule_id": "rule",
    "space": "space",
    "key": "space",
    "some_id": "task_or_lease",  # inspect: a task id or a lease id
}


@record
class Scope:
    where: str  # "path", "query", "body" (a string field of a JSON object), or "all"
    name: str  # the parameter or field ("" for "all")
    kind: str  # what it names: space, pool, lease, task, rule, task_or_lease


# The route acts across every space: a token limited to spaces may not use it.
ALL_SPACES = Scope("all", "", "space")
_QUERY_SPACE = Scope("query", "space", "space")
_BODY_SPACE = Scope("body", "space", "space")
# Scopes named outside the path, route by route (the path's come from SCOPE_PARAMS).
NAMED_SCOPES: dict[tuple[str, str], tuple[Scope, ...]] = {
    ("POST", f"{BASE}/spaces"): (ALL_SPACES,),
    ("POST", f"{BASE}/tokens"): (ALL_SPACES,),
    ("GET", f"{BASE}/instance"): (ALL_SPACES,),
    ("PATCH", f"{BASE}/instance"): (ALL_SPACES,),
    ("GET", f"{BASE}/instance/activity"): (ALL_SPACES,),
    ("GET", f"{BASE}/scheduler"): (ALL_SPACES,),  # counts over every space
    ("POST", f"{BASE}/scheduler/pause"): (ALL_SPACES,),
    ("POST", f"{BASE}/scheduler/resume"): (ALL_SPACES,),
    ("POST", f"{BASE}/scheduler/drain"): (ALL_SPACES,),
    # Which space receives an address's mail is decided across spaces.
    ("POST", f"{BASE}/spaces/<key>/addresses"): (ALL_SPACES,),
    ("DELETE", f"{BASE}/spaces/<key>/addresses/<address>"): (ALL_SPACES,),
    ("GET", f"{BASE}/leases"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/tasks"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/rules"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/pools"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/scheduler/backlog"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/workflows/<slug>/activity"): (_QUERY_SPACE,),
    ("GET", f"{BASE}/workers"): (Scope("query", "pool", "pool"),),
    ("POST", f"{BASE}/workflows"): (_BODY_SPACE,),
    ("POST", f"{BASE}/pools"): (_BODY_SPACE,),
    ("POST", f"{BASE}/tasks"): (_BODY_SPACE,),
    ("POST", f"{BASE}/rules"): (_BODY_SPACE,),
    ("POST", f"{BASE}/events"): (_BODY_SPACE,),
    # A worker naming its pool (one holding no lease); each lease it renews is judged per item.
    ("POST", f"{BASE}/workers/<worker_id>/heartbeat"): (Scope("body", "pool", "pool"),),
}
# Authenticated routes that name no one scope, and why (tests/unit/test_authz_matrix.py holds
# every other route to a scope of its own).
UNSCOPED = {
    ("GET", f"{BASE}/whoami"): "who the caller is, whatever its scope",
    ("POST", f"{BASE}/leases/bulk/release"): "each lease of the list is judged on its own row",
    ("POST", f"{BASE}/leases/bulk/fail"): "each lease of the list is judged on its own row",
    ("POST", f"{BASE}/mcp"): "each tool call is judged on what it touches",
    ("GET", f"{BASE}/tokens"): "each token is shown by its own spaces",
    ("GET", f"{BASE}/spaces"): "a token limited to spaces is shown those spaces alone",
    ("DELETE", f"{BASE}/tokens/<token_id>"): "the token is judged by its own spaces",
}


@cache
def scopes_of(method: str, rule: str) -> tuple[Scope, ...]:
    """Every scope a request to this route names: its path's resources, then the rest."""
    path = tuple(
        Scope("path", name, SCOPE_PARAMS[name])
        for name in re.findall(r"<(\w+)>", rule)
        if name in SCOPE_PARAMS
    )
    return path + NAMED_SCOPES.get((method, rule), ())


# Its body is JSON-RPC (an array, another content type…): the MCP transport judges it.
MCP_PATH = f"{BASE}/mcp"

# Served without the authorizer (infra/template.yaml declares the same two routes).
PUBLIC_ROUTES = {key for key, who in ROUTES.items() if who == "public"}

# The routes a worker host calls, also served by the worker function on its own function URL
# (tenure.api.worker): claim, start, both heartbeats, the reports, the payload, and its own
# logs and attachments. Every one answers a worker or a lease token, never an operator alone.
WORKER_ROUTES = frozenset(
    {
        ("POST", f"{BASE}/pools/<pool>/claim"),
        ("POST", f"{BASE}/workers/<worker_id>/heartbeat"),
        ("GET", f"{BASE}/leases/<lease_id>/payload"),
        ("POST", f"{BASE}/leases/<lease_id>/logs"),
        ("POST", f"{BASE}/leases/<lease_id>/attachments"),
    }
    | {
        ("POST", f"{BASE}/leases/<lease_id>/{kind}")
        for kind in ("start", "heartbeat", "complete", "fail", "release")
    }
)

# The final reports that may claim the next lease (`next`), the only ones a worker token sends.
CLAIMING_REPORTS = {("POST", f"{BASE}/leases/<lease_id>/{kind}") for kind in ("complete", "fail")}

# A worker's reports: an absent or empty body is the empty object, as the API
# documents for complete.
REPORTS = {
    ("POST", f"{BASE}/leases/<lease_id>/{kind}")
    for kind in ("heartbeat", "complete", "fail", "release")
}


# What a lease token's use of a route is once its lease has ended (domain/authz.py): its
# reports answer as ever; these ship its last logs and attachments and read its own work for
# a while; any other route it may use (filing tasks, blocks, force) only while it is active.
# The MCP endpoint judges each tool (api/mcp/tools.py).
LEASE_REPORTS = REPORTS | {("POST", f"{BASE}/leases/<lease_id>/start")}
LEASE_SHIPS = {
    ("POST", f"{BASE}/leases/<lease_id>/logs"),
    ("POST", f"{BASE}/leases/<lease_id>/attachments"),
    ("GET", f"{BASE}/leases/<lease_id>/payload"),
    ("GET", f"{BASE}/leases/<lease_id>/logs"),
    ("GET", f"{BASE}/leases/<lease_id>/attachments"),
    ("GET", f"{BASE}/leases/<lease_id>/attachments/<attachment_id>"),
}


def lease_use(method: str, rule: str) -> str:
    if (method, rule) in LEASE_REPORTS or rule == MCP_PATH:
        return "report"  # the MCP endpoint: judged per tool
    return "ship" if (method, rule) in LEASE_SHIPS else "act"


@record
class Match:
    method: str
    rule: str
    audience: str
    params: dict[str, str]


@cache
def _pattern(rule: str) -> re.Pattern[str]:
    # A path parameter is one segment, as the resolver matches it.
    return re.compile("^" + re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", re.escape(rule)) + "$")


# Literal routes first, as the resolver orders them: /leases/bulk/release is not the release
# of a lease called "bulk". Each with its count of slashes: a parameter spans none, so a path
# with another count cannot match, and its pattern is compiled only when one could (a
# function compiles those of the routes it is called on: the worker function's cold start).
_ORDERED = sorted(
    ((method, rule, rule.count("/")) for method, rule in ROUTES), key=lambda r: "<" in r[1]
)


def request_path(event: dict[str, Any]) -> str:
    """The path the resolver routes on: API Gateway's raw path without a named stage's
    prefix (`/prod/api/v1/…` on stage `prod`), cut exactly as Powertools cuts it (whether
    or not the path starts with it), so both always route the same path. Matched on the raw
    path instead, a request through a named stage matched no route here, skipped the checks
    below, and still reached its route in the resolver."""
    raw = str(event.get("rawPath") or "")
    stage = str(((event.get("requestContext") or {}).get("stage")) or "$default")
    return raw[len(stage) + 1 :] if stage != "$default" else raw


def match(method: str, path: str) -> Match | None:
    """The route a request is for, or None (refused 404 `not_found` before the resolver)."""
    slashes = path.count("/")
    for route_method, rule, rule_slashes in _ORDERED:
        if route_method != method or rule_slashes != slashes:
            continue
        found = _pattern(rule).match(path)
        if found:
            return Match(method, rule, ROUTES[(method, rule)], found.groupdict())
    return None


# The scope check: a token limited to spaces or pools, or a lease token, is refused a resource
# outside its scope before anything about the request is validated, as a role below the
# route's is. The service still checks each scope again when it acts.


class Reader(Protocol):
    """What the scope check reads (the service: Scopes, app/scopes.py)."""

    def space_of(self, kind: str, ident: str) -> str | None: ...

    def lease_reaches_task(self, lease_id: str, task_id: str) -> bool | None: ...


def check_scopes(
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
            if name and scope.kind in ("task", "lease", "task_or_lease"):
                authz.require_id_in_spaces(actor, name)  # another space's, by its form
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
