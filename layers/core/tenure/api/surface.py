"""The HTTP surface every route module shares: the resolver, who the caller is, how a
route registers with the statuses it answers, and how leases render."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseHeader,
)
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel

from tenure import wiring
from tenure.api import models, views
from tenure.api.bearer import bearer
from tenure.api.errors import describe_validation, envelope, error_response
from tenure.api.routes import REPORTS, ROUTES
from tenure.api.tokens import EXPIRED, expired
from tenure.app.conditions import QUEUED_STATES
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain import authz, errors
from tenure.domain.model import Lease, Principal

if TYPE_CHECKING:
    from tenure.app.tenure import Tenure

logger = Logger(service="tenure-api")
# Flushed by the Lambda entry (functions/api/app.py); locally they flush when the buffer fills.
metrics = Metrics(namespace="Tenure", service="api")
app = APIGatewayHttpResolver(enable_validation=True)
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


def svc() -> Tenure:
    """The whole service: the operators' routes, on the HTTP API function."""
    return wiring.service()


def whole_core() -> WorkerTenure:
    """The worker's use cases within the whole service (the HTTP API function's)."""
    return wiring.service().core


# The keys of the request's routing context under which the dispatch hands on the caller, and
# the worker's use cases of the function serving it (the whole service's on the HTTP API, the
# worker function's own on its function URL).
CALLER = "caller"
CORE = "core"


def core() -> WorkerTenure:
    """The worker's use cases the dispatch ran this request with; outside a request it ran
    (a test calling a route's function), the whole service's."""
    found = app.context.get(CORE)
    return found if isinstance(found, WorkerTenure) else whole_core()


def actor() -> Principal:
    """The caller, as the dispatch read it once from the authorizer's answer (api/dispatch.py)
    and handed on in the resolver's context for this request; none there is refused."""
    caller = app.context.get(CALLER)
    if not isinstance(caller, Principal):
        raise errors.Unauthenticated("a bearer token is required")
    return caller


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


def actor_read_again() -> Principal:
    """The caller, on its token row read again now (one key read), not on the verdict API
    Gateway kept (up to 60 s): for a route that mints a credential outliving the caller's
    own token (POST /tokens), so that a token revoked within that window mints nothing."""
    actor()  # refused first as on any route
    return svc().tokens.authenticate(bearer(app.current_event.headers), note_use=False)


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
        service().force.require_agent_force(actor)  # the instance's allow_agent_force
        return
    if allowed[0].startswith("operator:"):
        authz.require_role(actor, allowed[0].removeprefix("operator:"))
    elif allowed[0] == "worker":
        authz.require_worker(actor, None)
    elif allowed[0] == "lease":
        authz.require_lease(actor, params.get("lease_id", ""))


# ------------------------------------------------------------------------ the document

BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
WWW_AUTHENTICATE: OpenAPIResponseHeader = {
    "description": 'the challenge: Bearer realm="tenure", with error="invalid_token" when '
    "a bearer token was sent and refused",
    "schema": {"type": "string"},
}
_MEANING = {
    400: "invalid_request: the body is not JSON, or not a JSON object",
    401: "unauthenticated: no bearer token, or an unknown one",
    403: "lease_token_mismatch or forbidden: the token may not use this route (or this id)",
    404: "lease_not_found, task_not_found or not_found: an unknown id",
    409: "stale_lease, invalid_transition or already_exists",
    422: "missing_scope or validation_failed: the message names the field "
    "(a completion: unverified_created_tasks, naming the ids)",
    413: "payload_too_large: a body over API Gateway's 10 MB, or an event over Lambda's 6 MB "
    "(the local stack's answer; deployed, AWS gives it with a body of its own)",
    500: "internal_error: the service failed; the request may be retried",
    501: "unsupported_runtime",
    503: "unavailable: the table throttled past the bounded retries, or the local stack holds "
    "as many connections as it serves; see Retry-After",
}
# What any operation may answer besides its own statuses, whatever its route: listed by the
# document (not each registration, which would spend a cold start on them). 413 only where
# the operation takes a body.
_ANY_ROUTE = (500, 503)
# What an `extra` status means where a route answers one besides its success.
_EXTRA = {302: "the bytes are at a presigned URL: see Location"}
# Every authenticated route can answer these, whatever it does (422: an unknown query parameter).
_ALWAYS = (400, 401, 403, 422, 503)
# Operations whose body the resolver never reads (the MCP transport reads its own), by
# (method, path as the document spells it): the model the document shows for that body.
UNREAD_BODIES: dict[tuple[str, str], type[BaseModel]] = {}
# Each authenticated route's handler, whose declared query parameters (`known_query`) are the
# only ones it takes: any other is refused like an unknown body field, so a misspelt `limt=5`
# is not silently ignored.
HANDLERS: dict[tuple[str, str], Callable[..., Any]] = {}


def _answers(ok: int, model: Any, *codes: int, raw: bool = False) -> dict[int, OpenAPIResponse]:
    """The statuses one operation answers: its success, then each error in the envelope. A
    success with no model has no body (a 204), or is stored bytes of any type (`raw`). Its
    content is always spelt out: left out, the resolver declares a JSON body of any shape."""
    media: dict[str, Any] = (
        {"application/json": {"model": model}} if model else {"*/*": {}} if raw else {}
    )
    answers: dict[int, OpenAPIResponse] = {ok: {"description": "success", "content": media}}
    for code in sorted(set(codes)):
        answers[code] = _refusal(code, {"model": models.ErrorEnvelope})
    return answers


def _refusal(code: int, media: Any) -> OpenAPIResponse:
    """A status in the error envelope, `media` naming its schema (a model, or a reference)."""
    content = {"application/json": media}
    answer: OpenAPIResponse = {"description": _MEANING[code], "content": content}
    if code == 503:
        answer["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
        }
    if code == 401:
        answer["headers"] = {"WWW-Authenticate": WWW_AUTHENTICATE}
    return answer


def op(
    method: str,
    rule: str,
    ok: int,
    model: Any,
    *codes: int,
    extra: int = 0,
    raw: bool = False,
    ok_headers: dict[str, Any] | None = None,
    also: dict[int, Any] | None = None,
) -> Any:
    """Register a route of the table in api/routes.py with the statuses it answers (and the
    headers its success may carry, `ok_headers`: name → OpenAPI header object; `also`, another
    success a body of another shape answers: status → its model). A `raw`
    route answers stored bytes as they are: Powertools' response validation would otherwise
    run them through its JSON encoder, which reads bytes as UTF-8 (a binary attachment was a
    500), so its handler's return type is hidden from the resolver."""
    audience = ROUTES[(method, rule)]
    public = audience == "public"
    answers = _answers(ok, model, *codes, *(() if public else _ALWAYS), raw=raw)
    if ok_headers:
        answers[ok] = {**answers[ok], "headers": ok_headers}
    for status, shape in (also or {}).items():
        answers[status] = {
            "description": "success",
            "content": {"application/json": {"model": shape}},
        }
    if extra:
        answers[extra] = {
            "description": _EXTRA.get(extra, "nothing to claim once wait_seconds have passed"),
            "content": {},
        }
    register = app.route(
        rule,
        method,
        responses=answers,
        description=f"Who may call it: {audience}",
        security=None if public else BEARER,
    )

    def decorate(func: Callable[..., Any]) -> Any:
        if not public:
            HANDLERS[(method, rule)] = func
        if raw:
            shown = inspect.signature(func).replace(return_annotation=inspect.Signature.empty)
            func.__signature__ = shown  # type: ignore[attr-defined]
        return register(func)

    return decorate


@cache
def known_query(method: str, rule: str) -> frozenset[str] | None:
    """The query parameters an authenticated route declares (None: not one of those routes).
    Read from its signature when the route is first called, not for all ~70 at import: the
    annotations are strings to evaluate (~13 ms of a cold start)."""
    func = HANDLERS.get((method, rule))
    if func is None:
        return None
    hints = get_type_hints(func, include_extras=True)
    return frozenset(
        name
        for name, hint in hints.items()
        if any(isinstance(meta, Query) for meta in getattr(hint, "__metadata__", ()))
    )


@dataclass(frozen=True)
class BodyShape:
    takes: bool  # the handler reads a body; if not, `{}` is the only object it accepts
    empty_is_object: bool  # an absent or empty body is read as `{}`


@cache
def _bare(hint: Any) -> Any:
    """A type without its `Annotated` layers."""
    while hasattr(hint, "__metadata__"):
        hint = hint.__origin__
    return hint


def body_shape(method: str, rule: str) -> BodyShape | None:
    """What an authenticated route makes of its body (None: not one of those routes), from
    its handler's signature, read on the route's first call as `known_query` is. An absent
    body is `{}` where every field of the body is optional (docs/api.md says so of complete),
    and for the four reports; where a field is required it stays a 400 `invalid_request`."""
    func = HANDLERS.get((method, rule))
    if func is None:
        return None
    for hint in get_type_hints(func, include_extras=True).values():
        if not any(isinstance(meta, Body) for meta in getattr(hint, "__metadata__", ())):
            continue
        # `Model`, `Model | None`, or a tagged union of models (each possibly annotated).
        declared = _bare(hint.__origin__)
        shapes = [
            x
            for x in map(_bare, get_args(declared) or (declared,))
            if isinstance(x, type) and issubclass(x, BaseModel)
        ]
        optional = all(not f.is_required() for x in shapes for f in x.model_fields.values())
        return BodyShape(takes=True, empty_is_object=optional or (method, rule) in REPORTS)
    return BodyShape(takes=False, empty_is_object=False)


def json_answer(body: Any, status: int = 200) -> Response[Any]:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
    )


# ------------------------------------------------------------------------------ errors


@app.exception_handler(errors.TenureError)
def _domain_error(err: errors.TenureError) -> Response[Any]:
    return error_response(err)


@app.exception_handler(RequestValidationError)
def _invalid(err: RequestValidationError) -> Response[Any]:
    return error_response(describe_validation(list(err.errors())))


@app.not_found
def _no_route(_: NotFoundError) -> Response[Any]:
    return envelope(404, "not_found", "no such route")


@app.exception_handler(Exception)
def _unexpected(err: Exception) -> Response[Any]:
    logger.exception("unhandled error", extra={"path": app.current_event.path})
    return envelope(500, "internal_error", "the service failed; the request may be retried")


def contract() -> dict[str, Any]:
    """The OpenAPI document, from the same models the routes validate with."""
    # Powertools' OpenAPI models (~100 pydantic classes) are loaded for the document alone:
    # validating a request never needs them, and at import they cost ~90 ms of a cold start.
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    doc: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title="Tenure", version="1", security_schemes={"bearer": HTTPBearer()}
        )
    )
    for ops in doc["paths"].values():
        for op in ops.values():
            # The resolver adds its own 422 body to every operation; ours are listed per route.
            answer = op["responses"].get("422", {})
            if "HTTPValidationError" in json.dumps(answer):
                del op["responses"]["422"]
            # An optional query parameter or body is left out, never sent as JSON null.
            for param in op.get("parameters", []):
                param["schema"] = _not_null(param["schema"])
            for media in op.get("requestBody", {}).get("content", {}).values():
                media["schema"] = _not_null(media["schema"])
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        doc.get("components", {}).get("schemas", {}).pop(name, None)
    for (method, path), model in UNREAD_BODIES.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        doc.setdefault("components", {}).setdefault("schemas", {}).update(schema.pop("$defs", {}))
        doc["components"]["schemas"][model.__name__] = schema
        ref = {"$ref": f"#/components/schemas/{model.__name__}"}
        body = {"required": True, "content": {"application/json": {"schema": ref}}}
        doc["paths"][path][method.lower()]["requestBody"] = body
    envelope = {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}
    for ops in doc["paths"].values():
        for op in ops.values():
            for code in (*_ANY_ROUTE, *((413,) if "requestBody" in op else ())):
                op["responses"].setdefault(str(code), _refusal(code, envelope))
    return doc


@cache
def contract_json() -> str:
    """The document as served: built on the first GET of a warm instance, then kept (it is
    ~100 ms of CPU, and the routes cannot change while the process lives)."""
    return json.dumps(contract())


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = [x for x in schema.get("anyOf", []) if x != {"type": "null"}]
    if len(options) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**options[0], **rest}


def lease_out(lease: Lease) -> models.LeaseOut:
    """A lease as every route shows it, with the queued condition the service judges (and
    reclaimed once its retention has passed, when it had nothing to delete)."""
    service = core()
    # Only a queued lease has a condition to judge: an ended or held one is shown as it is.
    queued = lease.state in QUEUED_STATES
    condition = service.conditions.queued_condition_of(lease) if queued else None
    return views.lease_view(service.kernel.catalog.shown(lease), condition)


def leases_out(leases: Iterable[Lease]) -> list[models.LeaseOut]:
    """Many leases, each pool's facts read once for all of them."""
    service = core()
    leases = [service.kernel.catalog.shown(x) for x in leases]
    conditions = service.conditions.queued_conditions(leases)
    return [views.lease_view(x, conditions[x.id]) for x in leases]


def record_metrics(before: Mapping[str, int], now: Mapping[str, int]) -> None:
    """Add what the service counted during one request (`before` it, `now` after) as
    metrics."""
    for key, name in METRICS.items():
        grew = now.get(key, 0) - before.get(key, 0)
        if grew > 0:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=grew)
