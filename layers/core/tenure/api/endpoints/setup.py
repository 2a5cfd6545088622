"""Public routes and setting up work: health, the OpenAPI document, spaces, workflows,
pools, tokens."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from tenure.api import models, views
from tenure.api.routes import BASE
from tenure.api.surface import actor, actor_read_again, contract_json, json_answer, op, svc
from tenure.app.schema_versions import BEHIND_NOTICE
from tenure.domain.model import Pool
from tenure.domain.states import OnExpiry, PoolKind

# Set on GET /tokens and GET /spaces when the table's data is older than this release (the
# list may miss tokens or spaces made before it had list rows).
SCHEMA_HEADER = "Tenure-Schema"


@op("GET", f"{BASE}/health", 200, models.Health)
def health() -> Response[Any]:
    return json_answer(models.Health(status="ok"))


@op("GET", f"{BASE}/openapi.json", 200, models.OpenAPIDocument)
def openapi() -> Response[Any]:
    return Response(
        status_code=200, content_type=content_types.APPLICATION_JSON, body=contract_json()
    )


@op("POST", f"{BASE}/spaces", 201, models.SpaceOut, 409, 422)
def create_space(body: Annotated[models.SpaceCreate, Body()]) -> Response[Any]:
    space = svc().spaces.create_space(actor(), body.key, body.name, body.max_active)
    return json_answer(views.space_view(space), 201)


@op(
    "GET",
    f"{BASE}/spaces",
    200,
    models.SpaceList,
    ok_headers={
        SCHEMA_HEADER: {
            "description": "present only while the table's data is older than this release: "
            "run `tenure admin migrate` to list every space",
            "schema": {"type": "string"},
        }
    },
)
def list_spaces(
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response[Any]:
    page = svc().spaces.list_spaces(actor(), limit, cursor)
    spaces = [views.space_view(s) for s in page.spaces]
    answer = json_answer(models.SpaceList(spaces=spaces, next_cursor=page.next_cursor))
    if page.schema_behind:
        answer.headers[SCHEMA_HEADER] = BEHIND_NOTICE
    return answer


@op("POST", f"{BASE}/workflows", 201, models.WorkflowOut, 404, 409, 422)
def create_workflow(body: Annotated[models.WorkflowCreate, Body()]) -> Response[Any]:
    wf = svc().spaces.create_workflow(actor(), body.space, body.slug, body.name, body.description)
    return json_answer(views.workflow_view(wf), 201)


@op("POST", f"{BASE}/pools", 201, models.PoolOut, 404, 409, 422)
def create_pool(body: Annotated[models.PoolCreate, Body()]) -> Response[Any]:
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
        retention_seconds=body.retention_seconds,
        attachment_quota_bytes=body.attachment_quota_bytes,
        created_at=0,
        display_name=body.display_name,
        agent=body.agent.model_dump(exclude_none=True) if body.agent else None,
        classifier=body.classifier.model_dump(exclude_none=True) if body.classifier else None,
        min_queued_age_seconds=body.min_queued_age_seconds,
        starvation_escalation_seconds=body.starvation_escalation_seconds,
        rates=body.rates,
        accepts_delegation_from=tuple(body.accepts_delegation_from),
        max_delegated_per_lease=body.max_delegated_per_lease,
        max_delegated_per_tree=body.max_delegated_per_tree,
        retry=body.retry.model_dump() if "retry" in body.model_fields_set else None,
        max_active_per_key=body.max_active_per_key,
        max_claims_per_minute=body.max_claims_per_minute,
        max_run_seconds=body.max_run_seconds,
    )
    return json_answer(views.pool_view(svc().pools.create_pool(actor(), pool)), 201)


@op("POST", f"{BASE}/tokens", 201, models.TokenOut, 404, 409, 422)
def create_token(body: Annotated[models.TokenCreate, Body()]) -> Response[Any]:
    role = body.role or ("read" if body.kind == "operator" else None)
    spaces = tuple(body.spaces) if body.spaces is not None else None
    pools = tuple(body.pools) if body.pools is not None else None
    # Read again, not the verdict the authorizer kept: the new token outlives the caller's.
    token, raw = svc().tokens.create_token(
        actor_read_again(), body.name, body.kind, role, spaces, pools, body.expires_in_seconds
    )
    return json_answer(views.token_view(token, raw), 201)


@op(
    "GET",
    f"{BASE}/tokens",
    200,
    models.TokenList,
    ok_headers={
        SCHEMA_HEADER: {
            "description": "present only while the table's data is older than this release: "
            "run `tenure admin migrate` to list every token",
            "schema": {"type": "string"},
        }
    },
)
def list_tokens(
    kind: Annotated[Literal["operator", "worker"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response[Any]:
    page = svc().tokens.list_tokens(actor(), kind, limit, cursor)
    tokens = [views.token_info_view(t) for t in page.tokens]
    answer = json_answer(models.TokenList(tokens=tokens, next_cursor=page.next_cursor))
    if page.schema_behind:
        answer.headers[SCHEMA_HEADER] = BEHIND_NOTICE
    return answer


@op("DELETE", f"{BASE}/tokens/<token_id>", 204, None, 404)
def revoke_token(token_id: str) -> Response[Any]:
    svc().tokens.revoke_token(actor(), token_id)
    return Response(status_code=204, content_type=None, body=None)


@op("GET", f"{BASE}/instance/activity", 200, models.Activity)
def instance_activity(limit: Annotated[int, Query(ge=1, le=500)] = 100) -> Response[Any]:
    events = svc().instance.instance_activity(actor(), limit)
    return json_answer(
        models.Activity(events=[views.event_view(ev) for ev in events], next_cursor=None)
    )
