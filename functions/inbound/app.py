"""Lambda entry point of the inbound function (SQS inbound queue, partial batch failures)."""

from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.inbound.handler import handle

tracer = Tracer(patch_modules=["botocore"])  # as in the API function


@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
