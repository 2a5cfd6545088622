"""The worker function's own dispatch of its routes, without Powertools' HTTP resolver (whose
import and validation machinery were most of the function's cold start above the service's
core). What the caller may do, and whether the body is one JSON object naming known fields,
is decided by the same checks as on the HTTP API (api/gate.py); the body is validated with
the route's own model, as the resolver validates it, and a refusal is turned into the same
envelope by the same function (errors.describe_validation); the route is the same function
(api/worker_logic.py) and its answer is rendered as the resolver renders it."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from pydantic import BaseModel, ValidationError

from tenure.api import gate, models
from tenure.api.bearer import bearer
from tenure.api.errors import describe_validation, error_event, headers_of, status_of
from tenure.api.gate import logger, principal, record_metrics
from tenure.api.routes import REPORTS, Match, match, request_path
from tenure.api.worker_logic import PLAIN, Answer, Request, render
from tenure.app.catalog import one_request
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain.errors import NotFound, TenureError
from tenure.domain.model import Principal


def handle(event: dict[str, Any], core: Callable[[], WorkerTenure]) -> dict[str, Any]:
    """Resolve one event for a worker route (any other is 404 `not_found`), its caller named
    by the authorizer's context on the event, as the HTTP API function reads it."""
    path = request_path(event)
    route = match(str(event.get("requestContext", {}).get("http", {}).get("method")), path)
    body = gate.Body(event)
    ctx = (event["requestContext"].get("authorizer") or {}).get("lambda") or {}
    headers = event.get("headers")
    try:
        actor = principal(ctx, headers, core)
        if route is None or (route.method, route.rule) not in PLAIN:
            raise NotFound("no such route")
        route = gate.admit(event, path, route, actor, body, core)
    except TenureError as refusal:
        return error_event(refusal, token_sent=bearer(headers) is not None)
    refused = gate.shaped(event, route, body, body_shape, known_query)
    if refused is not None:
        return refused
    return _run(event, route, actor, core(), body)


def _run(
    event: dict[str, Any], route: Match, actor: Principal, core: WorkerTenure, body: gate.Body
) -> dict[str, Any]:
    """The route's function on the validated body, its answer or its refusal rendered; what
    the service counted meanwhile added to the metrics."""
    served = PLAIN[(route.method, route.rule)]
    counters = core.counters  # the service's one counter, read before and after
    before = dict(counters)
    with one_request():  # a view of what the request did reuses the request's fresh reads
        try:
            args: dict[str, Any] = dict(route.params)
            if served.body is not None:
                args["body"] = _validated(served.body, served.optional, body.lenient())
            answer = served.func(Request(actor, core), **args)
        except TenureError as refusal:
            answer = _refusal(refusal)
        except Exception:
            logger.exception("unhandled error", extra={"path": event.get("rawPath")})
            message = "the service failed; the request may be retried"
            answer = Answer(500, {"error": {"code": "internal_error", "message": message}})
    record_metrics(before, counters)
    return render(answer)


def _refusal(err: TenureError) -> Answer:
    """A domain error as the resolver's exception handler answers it (errors.error_response)."""
    body = {"error": {"code": err.code, "message": err.message}}
    return Answer(status_of(err), body, headers_of(err))


def _validated(name: str, optional: bool, value: Any) -> BaseModel | None:
    """The body as the route's model, validated as the resolver validates a body parameter
    (the JSON value in Python mode, attributes read too); its errors located under `body`
    and described by the one function the resolver's refusals go through."""
    if value is None:
        if optional:
            return None
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise describe_validation([missing])
    try:
        shown: BaseModel = _model(name).model_validate(value, from_attributes=True)
    except ValidationError as invalid:
        problems = [{**err, "loc": ("body", *err["loc"])} for err in invalid.errors()]
        raise describe_validation(problems) from invalid
    return shown


@cache
def _model(name: str) -> type[BaseModel]:
    found: type[BaseModel] = getattr(models, name)
    return found


def body_shape(method: str, rule: str) -> gate.BodyShape | None:
    """What a worker route makes of its body, as the resolver's side reads it from the
    handler's signature (surface.body_shape): an absent body is `{}` where every field is
    optional, and for the four reports."""
    served = PLAIN.get((method, rule))
    if served is None:
        return None
    if served.body is None:
        return gate.BodyShape(takes=False, empty_is_object=False)
    fields = _model(served.body).model_fields.values()
    optional = all(not f.is_required() for f in fields)
    return gate.BodyShape(takes=True, empty_is_object=optional or (method, rule) in REPORTS)


def known_query(method: str, rule: str) -> frozenset[str] | None:
    """No worker route declares a query parameter: any one is refused as unknown."""
    return frozenset() if (method, rule) in PLAIN else None
