"""Lambda entry point of the HTTP API: the routes live in tenure.api.app."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.api.app import handle, logger, metrics
from tenure.tracing import traced


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
