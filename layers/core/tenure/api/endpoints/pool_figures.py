"""A pool's figures for the operator: `GET /pools/{pool}/figures` (read role, the pool's own
space). Read only and bounded (app/figures.py says how); the board's pools view calls it."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler import Response
from typing_extensions import TypedDict

from tenure.api import views
from tenure.api.models import answer
from tenure.api.routes import BASE
from tenure.api.surface import actor, json_answer, op, svc
from tenure.app.figures import PoolFigures


@answer
class LastHourOut(TypedDict):
    claims: int
    completed: int
    failed: int
    capped: bool


@answer
class HoldOut(TypedDict):
    until: str


@answer
class FiguresOut(TypedDict):
    pool: str
    space: str
    queued: int
    queued_capped: bool
    held: int
    held_capped: bool
    oldest_queued_age_seconds: float | None
    last_hour: LastHourOut
    mass_expiry_hold: HoldOut | None


@answer
class FiguresAnswer(TypedDict):
    figures: FiguresOut


@op("GET", f"{BASE}/pools/<pool>/figures", 200, FiguresAnswer, 404)
def get_pool_figures(pool: str) -> Response[Any]:
    return json_answer(
        FiguresAnswer(figures=figures_view(svc().figures.pool_figures(actor(), pool)))
    )


def figures_view(f: PoolFigures) -> FiguresOut:
    hour = f.last_hour
    return {
        "pool": f.pool,
        "space": f.space,
        "queued": f.queued,
        "queued_capped": f.queued_capped,
        "held": f.held,
        "held_capped": f.held_capped,
        "oldest_queued_age_seconds": (
            f.oldest_queued_age_ms / 1000 if f.oldest_queued_age_ms is not None else None
        ),
        "last_hour": LastHourOut(
            claims=hour.claims, completed=hour.completed, failed=hour.failed, capped=hour.capped
        ),
        "mass_expiry_hold": HoldOut(until=cast(str, views.iso(f.hold_until)))
        if f.hold_until is not None
        else None,
    }
