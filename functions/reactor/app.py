"""Lambda entry point of the reactor (the table's DynamoDB stream, partial batch failures)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.tracing import traced
from tenure.triggers.stream import lambda_handler


@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return lambda_handler(event, context)
