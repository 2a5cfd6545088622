"""HTTP routes (API Gateway HTTP API, payload 2.0): parse, call the service, render."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Annotated, Any, get_type_hints

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from tenure import wiring
from tenure.api import models as m
from tenure.api import views as v
from tenure.api.errors import describe_validation, envelope, error_event, error_response
from tenure.api.routes import BASE, REPORTS, ROUTES, match
from tenure.core import authz
from tenure.core import errors as e
from tenure.core.model import Pool, Principal
from tenure.core.service import LeaseService
from tenure.core.states import LeaseState, OnExpiry, PoolKind, TaskStatus

logger = Logger(service="tenure-api")
app = APIGatewayHttpResolver(enable_validation=True)


def _svc() -> LeaseService:
    return wiring.service()


def _actor() -> Principal:
    """The caller as the authorizer described it (see functions/authorizer)."""
    return _principal(app.current_event.request_context.authorizer.get_lambda)


def _principal(ctx: dict[str, Any]) -> Principal:
    raw = ctx.get("principal")
    if not raw:
        raise e.Unauthenticated(str(ctx.get("reason") or "a bearer token is required"))
    data = json.loads(raw)
    for key in ("spaces", "pools"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    return Principal(**data)


def authorize(actor: Principal, audience: str, params: dict[str, str]) -> None:
    """Refuse a caller the route's audience (api/routes.py) does not admit: kind and role
    only, so it runs before the request is validated; scopes need the row (the service)."""
    allowed = audience.split("|")
    if actor.kind == "lease" and "lease" in allowed:
        if "lease_id" in params:
            authz.require_lease(actor, params["lease_id"])
        return  # otherwise it acts in its own lease's space, which the service checks
    if allowed[0].startswith("operator:"):
        authz.require_role(actor, allowed[0].removeprefix("operator:"))
    elif allowed[0] == "worker":
        authz.require_worker(actor, None)
    elif allowed[0] == "lease":
        authz.require_lease(actor, params.get("lease_id", ""))


# ------------------------------------------------------------------------ the document

BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
_MEANING = {
    400: "invalid_request: the body is not JSON, or not a JSON object",
    401: "unauthenticated: no bearer token, or an unknown one",
    403: "lease_token_mismatch or forbidden: the token may not use this route (or this id)",
    404: "lease_not_found, task_not_found or not_found: an unknown id",
    409: "stale_lease, invalid_transition or already_exists",
    422: "missing_scope or validation_failed: the message names the field",
    501: "unsupported_runtime",
    503: "unavailable: the table throttled past the bounded retries; see Retry-After",
}
# Every authenticated route can answer these, whatever it does (422: an unknown query parameter).
_ALWAYS = (400, 401, 403, 422, 503)
# The query parameters each authenticated route declares; any other is refused like an unknown
# body field, so a misspelt `limt=5` is not silently ignored.
QUERY: dict[tuple[str, str], frozenset[str]] = {}


def _answers(ok: int, model: type[BaseModel] | None, *codes: int) -> dict[int, OpenAPIResponse]:
    """The statuses one operation answers: its success, then each error in the envelope."""
    answers: dict[int, OpenAPIResponse] = {
        ok: {"description": "success", "content": {"application/json": {"model": model}}}
        if model
        else {"description": "success"}
    }
    for code in sorted(set(codes)):
        answers[code] = {
            "description": _MEANING[code],
            "content": {"application/json": {"model": m.ErrorEnvelope}},
        }
    if 503 in answers:
        answers[503]["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
        }
    return answers


def _op(
    method: str, rule: str, ok: int, model: type[BaseModel] | None, *codes: int, extra: int = 0
) -> Any:
    """Register a route of the table in api/routes.py with the statuses it answers."""
    audience = ROUTES[(method, rule)]
    public = audience == "public"
    answers = _answers(ok, model, *codes, *(() if public else _ALWAYS))
    if extra:
        answers[extra] = {
            "description": "nothing to claim once wait_seconds have passed",
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
            QUERY[(method, rule)] = _query_names(func)
        return register(func)

    return decorate


def _query_names(func: Callable[..., Any]) -> frozenset[str]:
    hints = get_type_hints(func, include_extras=True)
    return frozenset(
        name
        for name, hint in hints.items()
        if any(isinstance(meta, Query) for meta in getattr(hint, "__metadata__", ()))
    )


def _json(body: Any, status: int = 200) -> Response[Any]:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
    )


# ------------------------------------------------------------------------------ errors


@app.exception_handler(e.TenureError)
def _domain_error(err: e.TenureError) -> Response[Any]:
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


# ----------------------------------------------------------------------------- public


@_op("GET", f"{BASE}/health", 200, m.Health)
def health() -> Response[Any]:
    return _json({"status": "ok"})


@_op("GET", f"{BASE}/openapi.json", 200, m.OpenAPIDocument)
def openapi() -> Response[Any]:
    return _json(contract())


def contract() -> dict[str, Any]:
    """The OpenAPI document, from the same models the routes validate with."""
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
    return doc


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = [x for x in schema.get("anyOf", []) if x != {"type": "null"}]
    if len(options) != 1:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**options[0], **rest}


# ------------------------------------------------------------------------- set-up


@_op("POST", f"{BASE}/spaces", 201, m.SpaceOut, 409, 422)
def create_space(body: Annotated[m.SpaceCreate, Body()]) -> Response[Any]:
    space = _svc().create_space(_actor(), body.key, body.name, body.max_active)
    return _json(v.space_view(space), 201)


@_op("POST", f"{BASE}/workflows", 201, m.WorkflowOut, 404, 409, 422)
def create_workflow(body: Annotated[m.WorkflowCreate, Body()]) -> Response[Any]:
    wf = _svc().create_workflow(_actor(), body.space, body.slug, body.name, body.description)
    return _json(v.workflow_view(wf), 201)


@_op("POST", f"{BASE}/pools", 201, m.PoolOut, 404, 409, 422)
def create_pool(body: Annotated[m.PoolCreate, Body()]) -> Response[Any]:
    pool = Pool(
        name=body.name,
        space=body.space,
        kind=PoolKind(body.kind),
        max_active=body.max_active,
        renew_seconds=body.renew_seconds,
        grace_seconds=body.grace_seconds,
        toleration_seconds=body.toleration_seconds,
        on_expiry=OnExpiry(body.on_expiry),
        keeps_logs=body.keeps_logs,
        created_at=0,
    )
    return _json(v.pool_view(_svc().create_pool(_actor(), pool)), 201)


@_op("POST", f"{BASE}/tokens", 201, m.TokenOut, 404, 409, 422)
def create_token(body: Annotated[m.TokenCreate, Body()]) -> Response[Any]:
    role = body.role or ("read" if body.kind == "operator" else None)
    spaces = tuple(body.spaces) if body.spaces is not None else None
    pools = tuple(body.pools) if body.pools is not None else None
    token, raw = _svc().create_token(_actor(), body.name, body.kind, role, spaces, pools)
    return _json({**v.token_view(token), "token": raw}, 201)


# -------------------------------------------------------------------------- tasks


@_op("POST", f"{BASE}/tasks", 201, m.TaskAnswer, 404, 409, 422)
def create_task(body: Annotated[m.TaskCreate, Body()]) -> Response[Any]:
    task, lease = _svc().create_task(
        _actor(),
        body.space,
        body.title,
        body.workflow,
        body.body,
        body.properties,
        body.pool,
        body.max_attempts,
    )
    status = TaskStatus.QUEUED if lease else TaskStatus.OPEN
    return _json(
        {
            "task": v.task_view(task, status),
            "lease": v.lease_view(lease) if lease else None,
        },
        201,
    )


@_op("POST", f"{BASE}/tasks/<task_id>/enqueue", 201, m.LeaseAnswer, 404, 409, 422)
def enqueue(task_id: str, body: Annotated[m.Enqueue, Body()]) -> Response[Any]:
    lease = _svc().enqueue(_actor(), task_id, body.pool)
    return _json({"lease": v.lease_view(lease)}, 201)


@_op("GET", f"{BASE}/tasks/<task_id>", 200, m.TaskAnswer, 404)
def get_task(task_id: str) -> Response[Any]:
    seen = _svc().get_task(_actor(), task_id)
    return _json(
        {
            "task": v.task_view(seen.task, seen.status),
            "lease": v.lease_view(seen.lease) if seen.lease else None,
        }
    )


@_op("GET", f"{BASE}/tasks/<task_id>/activity", 200, m.Activity, 404)
def task_activity(task_id: str) -> Response[Any]:
    events = _svc().activity(_actor(), task_id)
    return _json({"events": [v.event_view(ev) for ev in events]})


# ----------------------------------------------------------------- operator leases


@_op("GET", f"{BASE}/leases", 200, m.LeasePage, 404, 422)
def list_leases(
    # Required, yet checked by the route too: `space=` (empty) is missing_scope as well.
    space: Annotated[str, Query()],
    state: Annotated[LeaseState | None, Query()] = None,
    pool: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> Response[Any]:
    actor = _actor()
    if not space:
        raise e.MissingScope("space is required: list the leases of one space")
    page = _svc().list_leases(actor, space, limit, cursor, state, pool)
    return _json(
        {"leases": [v.lease_view(x) for x in page.leases], "next_cursor": page.next_cursor}
    )


@_op("GET", f"{BASE}/leases/<lease_id>", 200, m.LeaseOut, 404)
def get_lease(lease_id: str) -> Response[Any]:
    svc = _svc()
    lease = svc.get_lease(_actor(), lease_id)
    return _json(v.lease_view(lease, svc.queued_condition_of(lease)))


@_op("POST", f"{BASE}/leases/<lease_id>/cancel", 200, m.LeaseAnswer, 404)
def cancel_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().cancel(_actor(), lease_id))})


@_op("POST", f"{BASE}/leases/<lease_id>/kill", 200, m.LeaseAnswer, 404, 409)
def kill_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().kill(_actor(), lease_id))})


@_op("POST", f"{BASE}/leases/<lease_id>/pause", 200, m.LeaseAnswer, 404, 409)
def pause_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().pause(_actor(), lease_id))})


@_op("POST", f"{BASE}/leases/<lease_id>/resume", 200, m.LeaseAnswer, 404, 409)
def resume_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().resume(_actor(), lease_id))})


# -------------------------------------------------------------------------- workers


@_op("POST", f"{BASE}/pools/<pool>/claim", 200, m.Claimed, 404, 422, extra=204)
def claim(pool: str, body: Annotated[m.Claim, Body()]) -> Response[Any]:
    # claim_id and host are passed only when sent, so a claim without them runs on a
    # service that does not know them yet.
    extra = body.model_dump(include={"claim_id", "host"}, exclude_none=True)
    won = _svc().claim(
        _actor(),
        pool,
        body.worker_id,
        body.worker_version,
        body.wait_seconds,
        body.lease_seconds,
        **extra,
    )
    if won is None:
        return Response(status_code=204, content_type=None, body=None)
    logger.info("lease claimed", extra={"lease_id": won.lease.id, "pool": pool})
    return _json(
        {
            "lease": v.lease_view(won.lease),
            "token": won.token,
            "fence": won.lease.fence,
            "claim_token_hash": won.lease.token_hash,
            "renew_seconds": won.pool.renew_seconds,
        }
    )


@_op("POST", f"{BASE}/leases/<lease_id>/start", 200, m.LeaseAnswer, 404, 409)
def start(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().start(_actor(), lease_id))})


@_op("POST", f"{BASE}/leases/<lease_id>/heartbeat", 200, m.Beat, 404, 409, 422)
def heartbeat(lease_id: str, body: Annotated[m.Heartbeat | None, Body()] = None) -> Response[Any]:
    beat = _svc().heartbeat(_actor(), lease_id, body.lease_seconds if body else None)
    return _json(_beat_view(beat.lease, beat.revoke))


@_op("POST", f"{BASE}/workers/<worker_id>/heartbeat", 200, m.WorkerBeat, 422)
def worker_heartbeat(worker_id: str, body: Annotated[m.WorkerHeartbeat, Body()]) -> Response[Any]:
    answers = _svc().worker_heartbeat(
        _actor(), worker_id, [(item.id, item.fence) for item in body.leases]
    )
    rows = []
    for lease_id, fence, answer in answers:
        if isinstance(answer, e.TenureError):
            rows.append(
                {
                    "id": lease_id,
                    "fence": fence,
                    "error": {"code": answer.code, "message": answer.message},
                }
            )
        else:
            rows.append({"id": lease_id, "fence": fence, **_beat_view(answer.lease, answer.revoke)})
    return _json({"leases": rows})


@_op("GET", f"{BASE}/workers", 200, m.Workers, 404, 422)
def list_workers(pool: Annotated[str, Query(max_length=64)]) -> Response[Any]:
    actor = _actor()
    if not pool:
        raise e.ValidationFailed("pool: required (the workers of one pool are listed)")
    views = _svc().list_workers(actor, pool)
    return _json({"workers": [v.worker_view(x.worker, x.reachable, x.leases) for x in views]})


def _beat_view(lease: Any, revoke: Any) -> dict[str, Any]:
    return {
        "state": lease.state.value,
        "deadline": v.iso(lease.deadline),
        "revoke": revoke.value if revoke else None,
    }


@_op("POST", f"{BASE}/leases/<lease_id>/complete", 200, m.LeaseAnswer, 404, 409, 422)
def complete(lease_id: str, body: Annotated[m.Complete | None, Body()] = None) -> Response[Any]:
    raw = body.model_dump(exclude_unset=True) if body else {}
    lease = _svc().complete(_actor(), lease_id, raw)
    return _json({"lease": v.lease_view(lease)})


@_op("POST", f"{BASE}/leases/<lease_id>/fail", 200, m.LeaseAnswer, 404, 409, 422)
def fail(lease_id: str, body: Annotated[m.Fail, Body()]) -> Response[Any]:
    lease = _svc().fail(_actor(), lease_id, body.model_dump(exclude_unset=True))
    return _json({"lease": v.lease_view(lease)})


@_op("POST", f"{BASE}/leases/<lease_id>/release", 200, m.LeaseAnswer, 404, 409, 422)
def release(lease_id: str, body: Annotated[m.Release | None, Body()] = None) -> Response[Any]:
    raw = body.model_dump(exclude_unset=True) if body else {}
    return _json({"lease": v.lease_view(_svc().release(_actor(), lease_id, raw))})


@_op("GET", f"{BASE}/leases/<lease_id>/payload", 200, m.Payload, 404, 409)
def payload(lease_id: str) -> Response[Any]:
    bundle = _svc().payload(_actor(), lease_id)
    return _json({**bundle, "lease": v.lease_view(bundle["lease"])})


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve one API Gateway event. Every body is read as JSON, whatever its content type
    says (`curl -d` sends form encoding), so a non-JSON body meets `invalid_request`."""
    headers = event.setdefault("headers", {}) or {}
    event["headers"] = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    event["headers"]["content-type"] = "application/json"
    http = event.get("requestContext", {}).get("http", {})
    route = match(str(http.get("method")), str(event.get("rawPath")))
    if route is None or route.audience != "public":
        ctx = (event["requestContext"].get("authorizer") or {}).get("lambda") or {}
        try:
            # Who may call the route is decided before its body or query is looked at, so
            # a caller that may not use it learns nothing about its schema (DESIGN §5).
            actor = _principal(ctx)
            if route is not None:
                authorize(actor, route.audience, route.params)
        except e.TenureError as refusal:
            return error_event(refusal)
    if route is not None and (route.method, route.rule) in REPORTS and not event.get("body"):
        event["body"], event["isBase64Encoded"] = "{}", False
    refused = _not_an_object(event)
    if refused is not None:
        return refused
    if route is not None and (route.method, route.rule) in QUERY:
        unknown = set(event.get("queryStringParameters") or {}) - QUERY[route.method, route.rule]
        if unknown:
            named = "; ".join(f"{name}: is not a known query parameter" for name in sorted(unknown))
            return error_event(e.ValidationFailed(named))
    return app.resolve(event, context)


def _not_an_object(event: dict[str, Any]) -> dict[str, Any] | None:
    """400 for a body that is not one JSON object. Checked here because the resolver reads a
    JSON array of objects as its first element, which would act on half a request."""
    raw = event.get("body")
    if not raw:
        return None
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(raw).decode()
        except (ValueError, UnicodeDecodeError):
            return _invalid_request("the body is not valid JSON")
    try:
        parsed = json.loads(raw)
    except ValueError:
        return _invalid_request("the body is not valid JSON")
    if not isinstance(parsed, dict):
        return _invalid_request("the body must be a JSON object")
    return None


def _invalid_request(message: str) -> dict[str, Any]:
    return error_event(e.InvalidRequest(message))
