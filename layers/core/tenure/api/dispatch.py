"""One API Gateway (payload 2.0) event through the resolver: who may call the route and with
what scope is checked first, then the body and query, then the route runs. Shared by the HTTP
API function (tenure.api.app, every route) and the worker function (tenure.api.worker, the
worker routes on a function URL); each imports the route modules it serves, and names the
worker's use cases the request runs with (the whole service's, or the worker function's own
composition of them alone)."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from tenure.api.bearer import bearer
from tenure.api.errors import error_event, method_not_allowed
from tenure.api.routes import (
    CLAIMING_REPORTS,
    MCP_PATH,
    SCOPE_PARAMS,
    Match,
    check_scopes,
    lease_use,
    match,
    request_path,
)
from tenure.api.surface import (
    CALLER,
    CORE,
    app,
    authorize,
    body_shape,
    known_query,
    principal,
    record_metrics,
    whole_core,
)
from tenure.app.catalog import one_request
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain import authz
from tenure.domain.errors import InvalidRequest, NotFound, TenureError, ValidationFailed
from tenure.domain.model import Principal
from tenure.domain.task_keys import is_task_key


def handle(
    event: dict[str, Any], context: Any, core: Callable[[], WorkerTenure] = whole_core
) -> dict[str, Any]:
    """Resolve one API Gateway event. Every body is read as JSON, whatever its content type
    says (`curl -d` sends form encoding), so a non-JSON body meets `invalid_request`. `core`
    gives the worker's use cases (built on first use: a public route builds none)."""
    http = event.get("requestContext", {}).get("http", {})
    path = request_path(event)
    route = match(str(http.get("method")), path)
    body = _Body(event)
    actor: Principal | None = None  # read once here, then handed on to the route (actor())
    if route is None or route.audience != "public":
        ctx = (event["requestContext"].get("authorizer") or {}).get("lambda") or {}
        headers = event.get("headers")
        try:
            # Who may call the route, with what scope, is decided before its body or query is
            # looked at, so a caller that may not use it learns nothing about its schema.
            actor = principal(ctx, headers, core)
            if route is None:
                if path == MCP_PATH:
                    # The streamable-HTTP transport GETs for a stream and DELETEs a session:
                    # it offers neither, and says so as the MCP client expects (405).
                    return method_not_allowed("POST")
                # Refused here, not by the resolver: nothing the table does not name runs.
                raise NotFound("no such route")
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
        except TenureError as refusal:
            # The bearer is read only here (and where the authorizer could not read it): a
            # request the authorizer named its caller for needs no header read again.
            return error_event(refusal, token_sent=bearer(headers) is not None)
    if route is not None and route.rule == MCP_PATH:
        # JSON-RPC: the MCP transport reads its own body.
        return _resolved(event, context, actor, core())
    headers = event.setdefault("headers", {}) or {}
    event["headers"] = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    event["headers"]["content-type"] = "application/json"
    refused = body.refusal()
    if refused is not None:
        return refused
    shape = None if route is None else body_shape(route.method, route.rule)
    if shape is not None and not event.get("body") and shape.empty_is_object:
        event["body"], event["isBase64Encoded"] = "{}", False
    if shape is not None and not shape.takes and isinstance(body.lenient(), dict):
        # A route that reads no body: `{}` is fine, a field in it is one it does not know.
        fields = sorted(body.lenient())
        if fields:
            named = "; ".join(f"{name}: is not a known field" for name in fields)
            return error_event(ValidationFailed(named))
    known = None if route is None else known_query(route.method, route.rule)
    if known is not None:
        unknown = set(event.get("queryStringParameters") or {}) - known
        if unknown:
            named = "; ".join(f"{name}: is not a known query parameter" for name in sorted(unknown))
            return error_event(ValidationFailed(named))
    if route is None or route.audience == "public":
        return app.resolve(event, context)  # builds no service (a cold /health stays cheap)
    return _resolved(event, context, actor, core())


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


def _resolved(
    event: dict[str, Any], context: Any, actor: Principal | None, core: WorkerTenure
) -> dict[str, Any]:
    """The route run with the caller the dispatch read and the use cases it was given (the
    resolver clears its context after each event, so neither outlives its request)."""
    app.append_context(**{CORE: core})
    if actor is not None:
        app.append_context(**{CALLER: actor})
    counters = core.counters  # the service's one counter, read before and after
    before = dict(counters)
    with one_request():  # a view of what the request did reuses the request's fresh reads
        answer = app.resolve(event, context)
    record_metrics(before, counters)
    return answer


class _Body:
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
