"""Lambda entry point of the inbound function (SQS inbound queue, partial batch failures)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.tracing import traced
from tenure.triggers.inbound.handler import handle


@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
