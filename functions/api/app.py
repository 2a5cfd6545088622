"""Lambda entry point of the HTTP API: the routes live in tenure.api.app."""

from typing import Any

from aws_lambda_powertools import Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.api.app import handle, logger, metrics

# X-Ray (Tracing: Active in the template); off by itself outside Lambda and under SAM local.
# Only botocore is patched (the table calls): patching everything costs ~55 ms more at cold
# start. Responses are never put in a trace: a claim's answer carries the lease token.
tracer = Tracer(patch_modules=["botocore"])


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
