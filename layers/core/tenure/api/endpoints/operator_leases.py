"""Operators' lease routes: list, read, cancel, kill, pause, resume. (What a worker and a
lease's own token call on /leases/{id}/... is in worker_routes.py.)"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from tenure.api import models
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, lease_out, leases_out, op, svc
from tenure.domain import errors
from tenure.domain.states import LeaseState, SubjectKind


@op("GET", f"{BASE}/leases", 200, models.LeasePage, 404, 422)
def list_leases(
    # Required, yet checked by the route too: `space=` (empty) is missing_scope as well.
    space: Annotated[str, Query()],
    state: Annotated[LeaseState | None, Query()] = None,
    pool: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    subject_kind: Annotated[
        list[SubjectKind] | None,
        Query(
            max_length=len(SubjectKind),
            description="keeps the leases of these subject kinds: one to three, separated by "
            "commas or the parameter repeated (`subject_kind=workflow,space`)",
        ),
    ] = None,
) -> Response[Any]:
    caller = actor()
    if not space:
        raise errors.MissingScope("space is required: list the leases of one space")
    subjects = frozenset(subject_kind) if subject_kind is not None else None
    page = svc().operator.list_leases(caller, space, limit, cursor, state, pool, subjects)
    return json_answer(
        models.LeasePage(leases=leases_out(page.leases), next_cursor=page.next_cursor)
    )


@op("GET", f"{BASE}/leases/<lease_id>", 200, models.LeaseOut, 404)
def get_lease(lease_id: str) -> Response[Any]:
    return json_answer(lease_out(svc().operator.get_lease(actor(), lease_id)))


@op("POST", f"{BASE}/leases/<lease_id>/cancel", 200, models.LeaseAnswer, 404)
def cancel_lease(lease_id: str) -> Response[Any]:
    return json_answer(
        models.LeaseAnswer(lease=lease_out(svc().operator.cancel(actor(), lease_id)))
    )


@op("POST", f"{BASE}/leases/<lease_id>/kill", 200, models.LeaseAnswer, 404, 409)
def kill_lease(lease_id: str) -> Response[Any]:
    return json_answer(models.LeaseAnswer(lease=lease_out(svc().operator.kill(actor(), lease_id))))


@op("POST", f"{BASE}/leases/<lease_id>/pause", 200, models.LeaseAnswer, 404, 409)
def pause_lease(lease_id: str) -> Response[Any]:
    return json_answer(models.LeaseAnswer(lease=lease_out(svc().operator.pause(actor(), lease_id))))


@op("POST", f"{BASE}/leases/<lease_id>/resume", 200, models.LeaseAnswer, 404, 409)
def resume_lease(lease_id: str) -> Response[Any]:
    return json_answer(
        models.LeaseAnswer(lease=lease_out(svc().operator.resume(actor(), lease_id)))
    )
