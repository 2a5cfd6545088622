"""Lambda entry point of the HTTP API authorizer (payload 2.0, simple responses)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.api.authorizer import authorize


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return authorize(event)
