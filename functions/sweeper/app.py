"""Lambda entry point of the sweeper (EventBridge Scheduler, rate(1 minute))."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.tracing import traced
from tenure.triggers.sweep import handle


@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
