"""Lambda entry point of the HTTP API authorizer (payload 2.0, simple responses)."""

from typing import Any

from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerEventV2,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from tenure.api.authorizer import verdict
from tenure.tracing import traced


@traced
@event_source(data_class=APIGatewayAuthorizerEventV2)
def handler(event: APIGatewayAuthorizerEventV2, context: LambdaContext) -> dict[str, Any]:
    return dict(verdict(event).asdict())
