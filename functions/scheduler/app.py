"""Lambda entry point of the scheduler function (the target of every rule's schedule)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.tracing import traced
from tenure.triggers.rule_schedule import handle


@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
