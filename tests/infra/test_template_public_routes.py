"""The template serves every public route of api/routes.py (the board at `/board` among them)
without the authorizer, on the API function, and nothing else without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from samtranslator.yaml_helper import yaml_parse
from tenure.api.routes import PUBLIC_ROUTES

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "template.yaml"


def _events() -> dict[str, dict[str, Any]]:
    resources = dict(yaml_parse(TEMPLATE.read_text()))["Resources"]
    return {
        name: event["Properties"]
        for resource in resources.values()
        if resource["Type"] == "AWS::Serverless::Function"
        for name, event in (resource["Properties"].get("Events") or {}).items()
        if event["Type"] == "HttpApi"
    }


def test_every_public_route_and_only_those_skip_the_authorizer() -> None:
    open_routes = {
        (props["Method"], props["Path"])
        for props in _events().values()
        if (props.get("Auth") or {}).get("Authorizer") == "NONE"
    }
    assert open_routes == PUBLIC_ROUTES
    assert ("GET", "/board") in open_routes
