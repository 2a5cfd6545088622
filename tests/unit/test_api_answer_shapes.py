"""Each answer is declared once: a closed TypedDict (api/models/, or beside its route) that the
renderer returns as a plain dict and the OpenAPI document makes its schema from. No answer is a
pydantic model, so none is validated or built as one on its way out."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from tenure.api import models as m
from tenure.api import views as v
from tenure.api.app import app
from typing_extensions import is_typeddict

from tests.unit.support import Rig, shaped

# Open on purpose: each carries keys of its own beyond those it names (the work bundle's
# subject fields, an event block's event and key, this document's own sections, the caller).
OPEN = {"Payload", "BlockOut", "OpenAPIDocument", "Whoami"}
# MCP answers in JSON-RPC, whose messages the SDK's transport shapes (api/mcp/wire.py).
MCP = "^/api/v1/mcp$"


def _answer_shapes() -> dict[str, Any]:
    shapes: dict[str, Any] = {}
    for route in [*app._static_routes, *app._dynamic_routes]:
        for status, answer in (route.responses or {}).items():
            for media in (answer.get("content") or {}).values():
                shape = media.get("model") if isinstance(media, dict) else None
                if shape is not None and status < 300 and route.rule.pattern != MCP:
                    shapes[f"{route.method} {route.rule.pattern} {status}"] = shape
    return shapes


SHAPES = _answer_shapes()


def test_the_routes_name_their_answers() -> None:
    assert len(SHAPES) > 60


@pytest.mark.parametrize("where", sorted(SHAPES))
def test_every_answer_is_a_typeddict_never_a_model(where: str) -> None:
    shape = SHAPES[where]
    assert is_typeddict(shape), where
    assert not (isinstance(shape, type) and issubclass(shape, BaseModel)), where


@pytest.mark.parametrize("shape", sorted({s for s in SHAPES.values()}, key=lambda s: s.__name__))
def test_every_answer_is_closed_but_the_open_few(shape: Any) -> None:
    extra = getattr(shape, "__pydantic_config__", {}).get("extra")
    assert extra == ("allow" if shape.__name__ in OPEN else "forbid") or (
        shape.__name__ in OPEN and extra is None
    ), shape.__name__


def test_an_answer_with_a_key_its_shape_does_not_name_is_refused(rig: Rig) -> None:
    view = v.lease_view(rig.lease(rig.claimed().lease.id))
    shaped(m.LeaseOut, view)
    with pytest.raises(ValidationError, match="surprise"):
        shaped(m.LeaseOut, {**view, "surprise": 1})
    missing = {k: x for k, x in view.items() if k != "fence"}
    with pytest.raises(ValidationError, match="fence"):
        shaped(m.LeaseOut, missing)


def test_a_renderer_answers_a_plain_dict(rig: Rig) -> None:
    view = v.lease_view(rig.lease(rig.claimed().lease.id))
    assert type(view) is dict and type(view["timing"]) is dict
