"""The HTTP API Lambda authorizer: turns a bearer token into a principal (simple responses)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerEventV2,
    APIGatewayAuthorizerResponseV2,
)

from tenure.api.bearer import bearer
from tenure.api.tokens import principal_of
from tenure.domain.errors import Unauthenticated, Unavailable

logger = Logger(service="tenure-authorizer")


def verdict(event: APIGatewayAuthorizerEventV2) -> APIGatewayAuthorizerResponseV2:
    """Always lets the request through to the API function, which refuses a missing principal.

    API Gateway answers a refused authorization with its own body; passing the verdict on
    instead lets every refusal carry Tenure's error envelope
    (`{"error": {"code", "message"}}`).
    """
    headers = event.headers if "headers" in event else None
    try:
        principal = principal_of(bearer(headers))
    except Unauthenticated as refused:
        return APIGatewayAuthorizerResponseV2(
            authorize=True, context={"principal": "", "reason": refused.message}
        )
    except Unavailable as busy:
        # The token could not be read (the table throttled past the bounded retries). Not an
        # error here: API Gateway would answer it 500 with its own body. The API function
        # reads the token again itself, so this verdict, cached per token like any other,
        # costs one read per request while it lasts, never a refusal of a valid token.
        return APIGatewayAuthorizerResponseV2(
            authorize=True,
            context={"principal": "", "reason": busy.message, "unavailable": "true"},
        )
    data = dataclasses.asdict(principal)
    logger.debug("authorized", extra={"kind": principal.kind, "token_id": principal.token_id})
    return APIGatewayAuthorizerResponseV2(authorize=True, context={"principal": json.dumps(data)})


def authorize(event: dict[str, Any]) -> dict[str, Any]:
    """The simple response to a raw payload 2.0 event (the local stack calls this)."""
    return dict(verdict(APIGatewayAuthorizerEventV2(event)).asdict())
