"""Lambda entry point of the HTTP API: the routes live in tenure.api.app."""

import gc
from typing import Any

# The imports below make ~62,000 long-lived objects (modules, classes, routes): the
# collector's ~200 passes over them while they are made free almost nothing, so it waits
# until they are done; then they are frozen out of later full passes, which would otherwise
# walk all of them again while the first client and the first request are being made.
# Together ~50 ms of CPU of a cold start (`tenure bench coldstart`). The cost: the ~700
# unreachable objects the imports leave (measured with gc.collect()) are frozen with them and
# never freed: 180 kB (gc.DEBUG_SAVEALL, sys.getsizeof), once per environment.
gc.disable()
try:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from tenure.api.app import handle, logger, metrics
    from tenure.tracing import traced
finally:
    gc.enable()
gc.freeze()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@traced
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
