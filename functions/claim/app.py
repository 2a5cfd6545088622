"""Lambda entry point of the claim function: the claim route alone (tenure.api.worker's
handle_claim), on its own function URL and behind the HTTP API's claim route, so long polls
wait on a concurrency of their own."""

import gc
from typing import Any

# As in functions/api/app.py: the collector waits until the imports are done, then what they
# made is frozen out of later full passes (a cold start's CPU, `tenure bench coldstart`).
gc.disable()
try:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from tenure.api.worker import handle_claim, logger, metrics
    from tenure.tracing import traced
finally:
    gc.enable()
gc.freeze()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle_claim(event, context)
