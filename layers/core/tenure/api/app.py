"""HTTP routes (API Gateway HTTP API, payload 2.0): parse, call the service, render."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure import wiring
from tenure.api import models as m
from tenure.api import views as v
from tenure.api.errors import describe_validation, envelope, error_response
from tenure.api.routes import BASE, PUBLIC_ROUTES
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
    ctx = app.current_event.request_context.authorizer.get_lambda
    raw = ctx.get("principal")
    if not raw:
        raise e.Unauthenticated(str(ctx.get("reason") or "a bearer token is required"))
    data = json.loads(raw)
    for key in ("spaces", "pools"):
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    return Principal(**data)


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


@app.get(f"{BASE}/health")
def health() -> Response[Any]:
    return _json({"status": "ok"})


@app.get(f"{BASE}/openapi.json")
def openapi() -> Response[Any]:
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=app.get_openapi_json_schema(title="Tenure", version="1"),
    )


# ------------------------------------------------------------------------- set-up


@app.post(f"{BASE}/spaces")
def create_space(body: Annotated[m.SpaceCreate, Body()]) -> Response[Any]:
    space = _svc().create_space(_actor(), body.key, body.name, body.max_active)
    return _json(v.space_view(space), 201)


@app.post(f"{BASE}/workflows")
def create_workflow(body: Annotated[m.WorkflowCreate, Body()]) -> Response[Any]:
    wf = _svc().create_workflow(_actor(), body.space, body.slug, body.name, body.description)
    return _json(v.workflow_view(wf), 201)


@app.post(f"{BASE}/pools")
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


@app.post(f"{BASE}/tokens")
def create_token(body: Annotated[m.TokenCreate, Body()]) -> Response[Any]:
    role = body.role or ("read" if body.kind == "operator" else None)
    spaces = tuple(body.spaces) if body.spaces is not None else None
    pools = tuple(body.pools) if body.pools is not None else None
    token, raw = _svc().create_token(_actor(), body.name, body.kind, role, spaces, pools)
    return _json({**v.token_view(token), "token": raw}, 201)


# -------------------------------------------------------------------------- tasks


@app.post(f"{BASE}/tasks")
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
        m.instant_ms(body.not_before) if body.not_before else None,
    )
    status = TaskStatus.QUEUED if lease else TaskStatus.OPEN
    return _json(
        {
            "task": v.task_view(task, status),
            "lease": v.lease_view(lease) if lease else None,
        },
        201,
    )


@app.post(f"{BASE}/tasks/<task_id>/enqueue")
def enqueue(task_id: str, body: Annotated[m.Enqueue, Body()]) -> Response[Any]:
    not_before = m.instant_ms(body.not_before) if body.not_before else None
    lease = _svc().enqueue(_actor(), task_id, body.pool, not_before)
    return _json({"lease": v.lease_view(lease)}, 201)


@app.get(f"{BASE}/tasks/<task_id>")
def get_task(task_id: str) -> Response[Any]:
    seen = _svc().get_task(_actor(), task_id)
    return _json(
        {
            "task": v.task_view(seen.task, seen.status),
            "lease": v.lease_view(seen.lease) if seen.lease else None,
        }
    )


@app.get(f"{BASE}/tasks/<task_id>/activity")
def task_activity(task_id: str) -> Response[Any]:
    events = _svc().activity(_actor(), task_id)
    return _json({"events": [v.event_view(ev) for ev in events]})


# ----------------------------------------------------------------- operator leases


@app.get(f"{BASE}/leases")
def list_leases(
    space: Annotated[str | None, Query()] = None,
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


@app.get(f"{BASE}/leases/<lease_id>")
def get_lease(lease_id: str) -> Response[Any]:
    svc = _svc()
    lease = svc.get_lease(_actor(), lease_id)
    return _json(v.lease_view(lease, svc.queued_condition_of(lease)))


@app.post(f"{BASE}/leases/<lease_id>/cancel")
def cancel_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().cancel(_actor(), lease_id))})


@app.post(f"{BASE}/leases/<lease_id>/kill")
def kill_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().kill(_actor(), lease_id))})


@app.post(f"{BASE}/leases/<lease_id>/pause")
def pause_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().pause(_actor(), lease_id))})


@app.post(f"{BASE}/leases/<lease_id>/resume")
def resume_lease(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().resume(_actor(), lease_id))})


# -------------------------------------------------------------------------- workers


@app.post(f"{BASE}/pools/<pool>/claim")
def claim(pool: str, body: Annotated[m.Claim, Body()]) -> Response[Any]:
    won = _svc().claim(
        _actor(), pool, body.worker_id, body.worker_version, body.wait_seconds, body.lease_seconds
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


@app.post(f"{BASE}/leases/<lease_id>/start")
def start(lease_id: str) -> Response[Any]:
    return _json({"lease": v.lease_view(_svc().start(_actor(), lease_id))})


@app.post(f"{BASE}/leases/<lease_id>/heartbeat")
def heartbeat(lease_id: str, body: Annotated[m.Heartbeat | None, Body()] = None) -> Response[Any]:
    beat = _svc().heartbeat(_actor(), lease_id, body.lease_seconds if body else None)
    return _json(_beat_view(beat.lease, beat.revoke))


@app.post(f"{BASE}/workers/<worker_id>/heartbeat")
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


@app.get(f"{BASE}/workers")
def list_workers(pool: Annotated[str | None, Query(max_length=64)] = None) -> Response[Any]:
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


@app.post(f"{BASE}/leases/<lease_id>/complete")
def complete(lease_id: str, body: Annotated[m.Complete, Body()]) -> Response[Any]:
    lease = _svc().complete(_actor(), lease_id, body.model_dump(exclude_unset=True))
    return _json({"lease": v.lease_view(lease)})


@app.post(f"{BASE}/leases/<lease_id>/fail")
def fail(lease_id: str, body: Annotated[m.Fail, Body()]) -> Response[Any]:
    lease = _svc().fail(_actor(), lease_id, body.model_dump(exclude_unset=True))
    return _json({"lease": v.lease_view(lease)})


@app.post(f"{BASE}/leases/<lease_id>/release")
def release(lease_id: str, body: Annotated[m.Release | None, Body()] = None) -> Response[Any]:
    raw = body.model_dump(exclude_unset=True) if body else {}
    return _json({"lease": v.lease_view(_svc().release(_actor(), lease_id, raw))})


@app.get(f"{BASE}/leases/<lease_id>/payload")
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
    if (http.get("method"), event.get("rawPath")) not in PUBLIC_ROUTES:
        ctx = (event["requestContext"].get("authorizer") or {}).get("lambda") or {}
        if not ctx.get("principal"):
            # Refuse a caller without a token before looking at its body (no schema leaks).
            reason = str(ctx.get("reason") or "a bearer token is required")
            return _unauthenticated(reason, event)
    refused = _not_an_object(event)
    if refused is not None:
        return refused
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
    return _envelope_dict(400, "invalid_request", message)


def _unauthenticated(reason: str, event: dict[str, Any]) -> dict[str, Any]:
    return _envelope_dict(401, "unauthenticated", reason)


def _envelope_dict(status: int, code: str, message: str) -> dict[str, Any]:
    """An error answered before the resolver runs, in the same envelope."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": {"code": code, "message": message}}),
        "isBase64Encoded": False,
    }


from tenure.api.rules_routes import router as _rules_router  # noqa: E402

app.include_router(_rules_router)  # /rules and /events (DESIGN §10)
