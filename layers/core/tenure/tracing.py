"""X-Ray around a Lambda handler, only where the stack was deployed with tracing on.

Tracing is opt-in (the template's `Tracing` parameter sets TENURE_TRACING): Powertools' Tracer
loads the X-Ray SDK whenever it is made, which cost the API function ~240 ms of its cold start
(`tenure bench coldstart`), and sampled traces cost ~$5 per million leases plus ~$13 a month
(`tenure bench cost`). Metrics and structured logs carry the per-route figures without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

Handler = TypeVar("Handler", bound=Callable[..., Any])


def tracing_on() -> bool:
    return os.environ.get("TENURE_TRACING", "off").lower() == "on"


def traced(handler: Handler) -> Handler:
    """`handler` under X-Ray when TENURE_TRACING=on (botocore only is patched, and responses
    never go into a trace: a claim's answer carries the lease token); else `handler` itself."""
    if not tracing_on():
        return handler
    from aws_lambda_powertools import Tracer

    tracer = Tracer(patch_modules=["botocore"])
    wrapped: Handler = tracer.capture_lambda_handler(capture_response=False)(handler)
    return wrapped
