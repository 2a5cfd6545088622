"""Lambda entry point of the scheduler function (the target of every rule's schedule)."""

from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.scheduler import handle

tracer = Tracer(patch_modules=["botocore"])  # as in the API function


@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
