"""The HTTP API Lambda authorizer: turns a bearer token into a principal (simple responses)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aws_lambda_powertools import Logger

from tenure import wiring
from tenure.core.errors import Unauthenticated

logger = Logger(service="tenure-authorizer")


def bearer(headers: dict[str, str] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            scheme, _, token = value.strip().partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
    return None


def authorize(event: dict[str, Any]) -> dict[str, Any]:
    """Always lets the request through to the API function, which refuses a missing principal.

    API Gateway answers a refused authorization with its own body; passing the verdict on
    instead lets every refusal carry Tenure's error envelope (DESIGN §5).
    """
    try:
        principal = wiring.service().authenticate(bearer(event.get("headers")))
    except Unauthenticated as refused:
        return {"isAuthorized": True, "context": {"principal": "", "reason": refused.message}}
    data = dataclasses.asdict(principal)
    logger.debug("authorized", extra={"kind": principal.kind, "token_id": principal.token_id})
    return {"isAuthorized": True, "context": {"principal": json.dumps(data)}}
