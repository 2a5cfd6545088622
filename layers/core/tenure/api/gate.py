"""What every authenticated request passes before its route runs, on either endpoint (the HTTP
API function's resolver, surface.handle, and the worker function's own dispatch,
api/worker_dispatch.py): who the caller is and whether the route admits it, with what scope,
decided before its body or query is looked at, then whether the body is one JSON object and
names only fields and query parameters the route knows; and the logger and metrics every
route writes to. Nothing here needs Powertools' HTTP resolver."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from tenure import wiring
from tenure.api.bearer import bearer
from tenure.api.errors import error_event
from tenure.api.routes import (
    CLAIMING_REPORTS,
    SCOPE_PARAMS,
    Match,
    check_scopes,
    lease_use,
)
from tenure.api.tokens import EXPIRED, expired
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain import authz, errors
from tenure.domain.errors import InvalidRequest, ValidationFailed
from tenure.domain.model import Principal
from tenure.domain.task_keys import is_task_key
from tenure.records import record

logger = Logger(service="tenure-api")
# Flushed by the Lambda entry (functions/api/app.py); locally they flush when the buffer fills.
metrics = Metrics(namespace="Tenure", service="api")
# The service's counters, as metric names (claims, lost races, stale reports, 204s).
METRICS = {
    "claims": "Claims",
    "empty_claims": "EmptyClaims",
    "claims_not_waited": "ClaimsNotWaited",
    "lost_claim_races": "LostClaimRaces",
    "claim_retries": "ClaimRetries",
    "stale_reports": "StaleReports",
    "lost_writes": "LostWrites",
    "archived_rule_skips": "ArchivedRuleSkips",
    "log_tokens_redacted": "LogTokensRedacted",
}


def whole_core() -> WorkerTenure:
    """The worker's use cases within the whole service (the HTTP API function's)."""
    return wiring.service().core


def principal(
    ctx: dict[str, Any], headers: Mapping[str, str] | None, service: Callable[[], WorkerTenure]
) -> Principal:
    """The caller the authorizer named; where it could not read the token (the table was
    throttling), the bearer of `headers` read again here: 503 `unavailable` if it still
    cannot be. API Gateway keeps the authorizer's answer up to 60 s: a token that has expired
    since is refused here, on the expires_at its principal carries, with no read. The worker
    function checks the bearer in process (api/worker.py) and hands the principal itself."""
    raw = ctx.get("principal")
    if not raw and ctx.get("unavailable"):
        return service().tokens.authenticate(bearer(headers))
    if not raw:
        raise errors.Unauthenticated(str(ctx.get("reason") or "a bearer token is required"))
    actor = raw if isinstance(raw, Principal) else _principal_of(raw)
    if actor.expires_at is not None and expired(actor, service().clock.now_ms()):
        raise errors.Unauthenticated(EXPIRED)
    return actor


def _principal_of(raw: str) -> Principal:
    """The principal the authorizer wrote into its answer's context, as JSON."""
    data = json.loads(raw)
    for key in ("spaces", "pools"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    return Principal(**data)


def authorize(
    actor: Principal, audience: str, params: dict[str, str], service: Callable[[], WorkerTenure]
) -> None:
    """Refuse a caller the route's audience (api/routes.py) does not admit: kind and role
    only, so it runs before the request is validated; scopes need the row (the service)."""
    allowed = audience.split("|")
    if actor.kind == "lease" and "lease" in allowed:
        if "lease_id" in params:
            authz.require_lease(actor, params["lease_id"])
        return  # otherwise it acts in its own lease's space, which the service checks
    if actor.kind == "worker" and "worker" in allowed:
        authz.require_worker(actor, None)
        return
    if actor.kind in ("worker", "lease") and "agent_force" in allowed:
        # The force routes are the HTTP API's alone: the worker function never loads them.
        from tenure.app.leases.force import require_agent_force

        require_agent_force(actor, service().rows.pools)  # the instance's allow_agent_force
        return
    if allowed[0].startswith("operator:"):
        authz.require_role(actor, allowed[0].removeprefix("operator:"))
    elif allowed[0] == "worker":
        authz.require_worker(actor, None)
    elif allowed[0] == "lease":
        authz.require_lease(actor, params.get("lease_id", ""))


def record_metrics(before: Mapping[str, int], now: Mapping[str, int]) -> None:
    """Add what the service counted during one request (`before` it, `now` after) as
    metrics."""
    for key, name in METRICS.items():
        grew = now.get(key, 0) - before.get(key, 0)
        if grew > 0:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=grew)


@record
class BodyShape:
    takes: bool  # the handler reads a body; if not, `{}` is the only object it accepts
    empty_is_object: bool  # an absent or empty body is read as `{}`


# What a route makes of its body, and the query parameters it declares (None: not a route of
# the endpoint's own), by (method, rule).
Shapes = Callable[[str, str], BodyShape | None]
Queries = Callable[[str, str], frozenset[str] | None]


def admit(
    event: dict[str, Any],
    path: str,
    route: Match,
    actor: Principal,
    body: Body,
    core: Callable[[], WorkerTenure],
) -> Match:
    """Refuse (raise) a caller the route does not admit, for what its request names; the
    route, its task keys read as the tasks' ids."""
    if actor.kind == "lease" and actor.lease_ended_at is not None:
        # The principal says its lease had ended when its token was read (a cached
        # principal may not know yet: the use cases check the row as they read it).
        authz.require_lease_power(
            actor.lease_ended_at,
            core().clock.now_ms(),
            lease_use(route.method, route.rule),
        )
    authorize(actor, route.audience, route.params, core)
    route = _task_ids(event, path, route, actor, core)
    if (route.method, route.rule) in CLAIMING_REPORTS:
        authz.require_claiming_report(actor, body.lenient())
        authz.refuse_lease_heartbeat(actor, body.lenient())
    query = event.get("queryStringParameters") or {}
    check_scopes(actor, route, query, body.lenient, lambda: core().scopes)
    return route


def shaped(
    event: dict[str, Any], route: Match | None, body: Body, shapes: Shapes, queries: Queries
) -> dict[str, Any] | None:
    """The refusal of a body that is not one JSON object, or that names a field or a query
    parameter the route does not know; None when it may go on (read as JSON, whatever its
    content type says: `curl -d` sends form encoding)."""
    headers = event.setdefault("headers", {}) or {}
    event["headers"] = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    event["headers"]["content-type"] = "application/json"
    refused = body.refusal()
    if refused is not None:
        return refused
    shape = None if route is None else shapes(route.method, route.rule)
    if shape is not None and not event.get("body") and shape.empty_is_object:
        body.empty_as_object()
    if shape is not None and not shape.takes and isinstance(body.lenient(), dict):
        # A route that reads no body: `{}` is fine, a field in it is one it does not know.
        fields = sorted(body.lenient())
        if fields:
            named = "; ".join(f"{name}: is not a known field" for name in fields)
            return error_event(ValidationFailed(named))
    known = None if route is None else queries(route.method, route.rule)
    if known is not None:
        unknown = set(event.get("queryStringParameters") or {}) - known
        if unknown:
            named = "; ".join(f"{name}: is not a known query parameter" for name in sorted(unknown))
            return error_event(ValidationFailed(named))
    return None


# Path parameters that name a task (inspect's, a task or a lease).
TASK_PARAMS = frozenset(n for n, kind in SCOPE_PARAMS.items() if kind in ("task", "task_or_lease"))


def _task_ids(
    event: dict[str, Any],
    path: str,
    route: Match,
    actor: Principal,
    core: Callable[[], WorkerTenure],
) -> Match:
    """A task key where a route takes a task id is read as that task's id, once, here: the
    scope check and the route then see the id, and answer exactly as they do for it. A key
    the caller could not see answers 404 `task_not_found` (app/tasks/keys.py)."""
    named = {n: v for n, v in route.params.items() if n in TASK_PARAMS and is_task_key(v)}
    if not named:
        return route
    keys = core().task_keys
    params = {**route.params, **{n: keys.task_id(actor, v) for n, v in named.items()}}
    rebuilt = re.sub(r"<(\w+)>", lambda found: params[found.group(1)], route.rule)
    raw = str(event.get("rawPath") or "")
    event["rawPath"] = raw[: len(raw) - len(path)] + rebuilt  # a named stage's prefix kept
    return dataclasses.replace(route, params=params)


class Body:
    """The request's body, parsed once: as any JSON value for the scope check, which reads a
    field only from an object, and judged for the 400 `invalid_request`."""

    def __init__(self, event: dict[str, Any]) -> None:
        self._event = event
        self._read: tuple[Any, str | None] | None = None

    def _parse(self) -> tuple[Any, str | None]:
        if self._read is None:
            self._read = _parse(self._event)
        return self._read

    def lenient(self) -> Any:
        """The parsed body, or None where there is none or it is not JSON."""
        return self._parse()[0]

    def empty_as_object(self) -> None:
        """An absent or empty body read as `{}`, by the route and by whoever reads it here."""
        self._event["body"], self._event["isBase64Encoded"] = "{}", False
        self._read = ({}, None)

    def refusal(self) -> dict[str, Any] | None:
        """400 for a body that is not one JSON object. Checked here because the resolver
        reads a JSON array of objects as its first element, which would act on half a
        request."""
        parsed, problem = self._parse()
        if problem is None and parsed is not None and not isinstance(parsed, dict):
            problem = "the body must be a JSON object"
        return None if problem is None else error_event(InvalidRequest(problem))


def _parse(event: dict[str, Any]) -> tuple[Any, str | None]:
    """(the JSON value, None), (None, None) for no body, or (None, why it cannot be read)."""
    raw = event.get("body")
    if not raw:
        return None, None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw).decode()
        except (ValueError, UnicodeDecodeError):
            return None, "the body is not valid JSON"
    try:
        return json.loads(raw), None
    except json.JSONDecodeError as err:  # where it broke, so a hand-written body can be fixed
        where = f"line {err.lineno}, column {err.colno}"
        return None, f"the body is not valid JSON: {err.msg} at {where}"
    except ValueError:
        return None, "the body is not valid JSON"
    except RecursionError:  # the parser recurses per level: 10,000 `[` crashed the function
        return None, "the body nests too deeply to be read"
