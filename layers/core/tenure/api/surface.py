"""The HTTP API function's surface, which every route module shares: the resolver and the
dispatch in front of it (the checks of api/gate.py, then the route), who the caller is, how a
route registers with the statuses it answers, and how leases render."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseHeader,
)
from pydantic import BaseModel

from tenure import wiring
from tenure.api import gate, models, worker_logic
from tenure.api.bearer import bearer
from tenure.api.errors import (
    describe_validation,
    envelope,
    error_event,
    error_response,
    method_not_allowed,
)
from tenure.api.gate import METRICS as METRICS
from tenure.api.gate import BodyShape as BodyShape
from tenure.api.gate import authorize as authorize
from tenure.api.gate import logger as logger
from tenure.api.gate import metrics as metrics
from tenure.api.gate import principal as principal
from tenure.api.gate import record_metrics, whole_core
from tenure.api.routes import MCP_PATH, REPORTS, ROUTES, match, request_path
from tenure.app.catalog import one_request
from tenure.app.worker_tenure import WorkerTenure
from tenure.domain import errors
from tenure.domain.errors import NotFound, TenureError
from tenure.domain.model import Lease, Principal

if TYPE_CHECKING:
    from tenure.app.tenure import Tenure

app = APIGatewayHttpResolver(enable_validation=True)


def svc() -> Tenure:
    """The whole service: the operators' routes, on the HTTP API function."""
    return wiring.service()


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
    """The caller, as the dispatch read it once from the authorizer's answer (handle, below)
    and handed on in the resolver's context for this request; none there is refused."""
    caller = app.context.get(CALLER)
    if not isinstance(caller, Principal):
        raise errors.Unauthenticated("a bearer token is required")
    return caller


def request() -> worker_logic.Request:
    """This request's caller and use cases, as the dispatch handed them to the resolver: what
    a route's one function (api/worker_logic.py) is given."""
    return worker_logic.Request(actor(), core())


def actor_read_again() -> Principal:
    """The caller, on its token row read again now (one key read), not on the verdict API
    Gateway kept (up to 60 s): for a route that mints a credential outliving the caller's
    own token (POST /tokens), so that a token revoked within that window mints nothing."""
    actor()  # refused first as on any route
    return svc().tokens.authenticate(bearer(app.current_event.headers), note_use=False)


# ------------------------------------------------------------------------ the dispatch


def handle(
    event: dict[str, Any], context: Any, core: Callable[[], WorkerTenure] = whole_core
) -> dict[str, Any]:
    """Resolve one API Gateway event. Every body is read as JSON, whatever its content type
    says (`curl -d` sends form encoding), so a non-JSON body meets `invalid_request`. `core`
    gives the worker's use cases (built on first use: a public route builds none)."""
    http = event.get("requestContext", {}).get("http", {})
    path = request_path(event)
    route = match(str(http.get("method")), path)
    body = gate.Body(event)
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
            route = gate.admit(event, path, route, actor, body, core)
        except TenureError as refusal:
            # The bearer is read only here (and where the authorizer could not read it): a
            # request the authorizer named its caller for needs no header read again.
            return error_event(refusal, token_sent=bearer(headers) is not None)
    if route is not None and route.rule == MCP_PATH:
        # JSON-RPC: the MCP transport reads its own body.
        return _resolved(event, context, actor, core())
    refused = gate.shaped(event, route, body, body_shape, known_query)
    if refused is not None:
        return refused
    if route is None or route.audience == "public":
        return app.resolve(event, context)  # builds no service (a cold /health stays cheap)
    return _resolved(event, context, actor, core())


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
    """A lease as every route shows it, on the use cases this request runs with."""
    return worker_logic.lease_out(core(), lease)


def leases_out(leases: Iterable[Lease]) -> list[models.LeaseOut]:
    """Many leases, each pool's facts read once for all of them."""
    return worker_logic.leases_out(core(), leases)


def respond(answer: worker_logic.Answer) -> Response[Any]:
    """A route's answer (api/worker_logic.py) as the resolver's response."""
    if answer.body is None:
        headers = dict(answer.headers)
        return Response(status_code=answer.status, content_type=None, body=None, headers=headers)
    return Response(
        status_code=answer.status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(answer.body),
        headers=dict(answer.headers),
    )


def served(plain: Callable[..., worker_logic.Answer], **params: Any) -> Callable[..., Any]:
    """A route's one function (api/worker_logic.py) as the resolver calls it: with the path
    parameters and the body its registration declares (`params`: name → its annotation, or
    (its annotation, its default)), given the request's caller and use cases, its answer made
    the resolver's response. It bears the function's name, which the document names the
    operation after; the worker function calls the same function without the resolver."""
    shown: list[inspect.Parameter] = []
    hints: dict[str, Any] = {}
    kind, empty = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty
    for name, declared in params.items():
        hint, default = declared if isinstance(declared, tuple) else (declared, empty)
        shown.append(inspect.Parameter(name, kind, default=default, annotation=hint))
        hints[name] = hint

    def handler(**given: Any) -> Response[Any]:
        return respond(plain(request(), **given))

    handler.__name__ = handler.__qualname__ = plain.__name__
    handler.__doc__ = plain.__doc__
    handler.__signature__ = inspect.Signature(shown, return_annotation=Response[Any])  # type: ignore[attr-defined]
    handler.__annotations__ = {**hints, "return": Response[Any]}
    return handler
