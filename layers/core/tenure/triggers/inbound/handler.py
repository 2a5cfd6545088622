"""The inbound function's handler (SQS, partial batch failures), shared by the Lambda and the
local stack's SQS poller."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from tenure import wiring
from tenure.config import settings
from tenure.triggers.inbound.envelopes import EnvelopeError
from tenure.triggers.inbound.service import InboundEmail, UnreadableMail

logger = Logger(service="tenure-inbound")
metrics = Metrics(namespace="Tenure", service="inbound")
# A batch whose every record fails is answered with every record as a failure, like any
# other: the batch is not crashed, and each record reaches the DLQ on its own count.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
# How much of a failed record's error its log line keeps.
ERROR_CHARS = 1000


# Rules a mail matched but did not fire, by why: (the received answer's attribute, the log
# line, the metric counting them).
SKIPPED = (
    (
        "skipped_spam",
        "inbound email judged spam by SES: rules not accepting spam minted nothing",
        "InboundSpamSkips",
    ),
    (
        "rate_limited",
        "inbound email past rules' max_firings_per_hour: nothing minted for them",
        "RuleRateLimited",
    ),
    ("skipped_archived", "inbound email skipped rules of archived spaces", "InboundArchivedSkips"),
)


@lru_cache(maxsize=1)
def inbound() -> InboundEmail:
    cfg = settings()
    if not cfg.attachments_bucket:
        raise RuntimeError("TENURE_ATTACHMENTS_BUCKET is not set")
    s3 = boto3.client("s3", region_name=cfg.region)
    return InboundEmail(wiring.service(), s3, cfg.attachments_bucket, cfg.inbound_bucket)


def record_handler(record: SQSRecord) -> str:
    """One record: minted (or already minted), acknowledged, or raised as a batch failure."""
    where = {"sqs_message_id": record.message_id}
    try:
        received = inbound().receive(record.body)
    except EnvelopeError as err:
        if err.acknowledge:
            logger.info("not an inbound email; acknowledged", extra={**where, "reason": err.reason})
            metrics.add_metric(name="InboundIgnored", unit=MetricUnit.Count, value=1)
            return "ignored"
        logger.error("inbound record refused", extra={**where, "reason": err.reason})
        metrics.add_metric(name="InboundRefused", unit=MetricUnit.Count, value=1)
        raise
    except UnreadableMail as err:
        logger.error("inbound email unreadable", extra={**where, "reason": err.reason})
        metrics.add_metric(name="InboundUnreadable", unit=MetricUnit.Count, value=1)
        raise
    except Exception as err:  # the table, the buckets, a defect: the queue tries again
        logger.exception(
            "inbound record failed: the queue delivers it again",
            extra={**where, "error": f"{type(err).__name__}: {err}"[:ERROR_CHARS]},
        )
        metrics.add_metric(name="InboundFailed", unit=MetricUnit.Count, value=1)
        raise
    extra = {**where, "ses_message_id": received.message_id, "warnings": list(received.warnings)}
    if received.refused:
        # Acknowledged, not retried: the verdict will not change. The object stays put.
        logger.warning("inbound email refused: SES found a virus; acknowledged", extra=extra)
        metrics.add_metric(name="InboundVirusRefused", unit=MetricUnit.Count, value=1)
        return "refused"
    if received.attachments_withheld:
        # Minted all the same: the text is work; the files wait in the inbound bucket.
        logger.warning(
            "inbound email minted without its attachments: SES did not scan it clean",
            extra={**extra, "reason": received.attachments_withheld},
        )
        metrics.add_metric(name="InboundAttachmentsWithheld", unit=MetricUnit.Count, value=1)
    for attribute, message, metric in SKIPPED:
        rule_ids = getattr(received, attribute)
        if rule_ids:
            logger.info(message, extra={**extra, "rule_ids": list(rule_ids)})
            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=len(rule_ids))
    if not received.matched:
        logger.info("inbound email matched no rule; acknowledged", extra=extra)
        metrics.add_metric(name="InboundUnmatched", unit=MetricUnit.Count, value=1)
        return "unmatched"
    logger.info(
        "inbound email minted leases",
        extra={**extra, "lease_ids": [lease.id for lease in received.leases]},
    )
    metrics.add_metric(name="InboundLeases", unit=MetricUnit.Count, value=len(received.leases))
    return "minted"


@metrics.log_metrics
def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    )
