"""Stands in for Lambda's SQS event source locally: the inbound queue → the inbound handler.

Like the event source mapping with ReportBatchItemFailures, it receives up to 10 messages,
hands them to the handler as one SQS event, and deletes only the records the handler did not
report as failures; a failed record becomes visible again after the queue's visibility
timeout, and moto moves it to the DLQ after the queue's maxReceiveCount.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

BATCH_SIZE = 10


class InboundPoller:
    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        handle: Callable[[dict[str, Any], Any], dict[str, Any]],
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.handle = handle

    def poll_once(self, wait_seconds: int = 1) -> int:
        """One receive and one handler call; how many messages it handed over."""
        out = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=BATCH_SIZE,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = out.get("Messages", [])
        if not messages:
            return 0
        answer = self.handle({"Records": [self._record(m) for m in messages]}, None)
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        done = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages)
            if m["MessageId"] not in failed
        ]
        if done:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=done)
        return len(messages)

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        """A received message in the shape Lambda's SQS event gives it."""
        body = str(message.get("Body", ""))
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": body,
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
        }
