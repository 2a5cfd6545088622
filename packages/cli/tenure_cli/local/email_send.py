"""`tenure email send FILE.eml`: what SES receiving does, against the local stack.

It stores the raw file in the inbound bucket under `inbound/<messageId>` and publishes SES's
`Received` notification (S3 action) to the inbound topic, so the inbound queue gets the SNS
envelope exactly as it would on AWS and the local SQS poller carries it to the handler. Like
SES's, the notification lists the headers only up to a size (`headersTruncated`) and cuts what
`commonHeaders` quotes, so a mail SES would deliver fits what SNS carries; a notification that
does not fit stores nothing, and a publish that fails takes its object away again.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import json
import secrets
from datetime import UTC, datetime
from email.message import Message
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

import boto3

from tenure_cli.stack_record import record_path, running_stack

INBOUND_PREFIX = "inbound/"
# SNS carries a message of 256 KB at most.
MAX_MESSAGE_BYTES = 256 * 1024
# SES lists a mail's headers in its notification only up to a size, and says
# `headersTruncated` when it cut them; this is that size here.
MAX_HEADERS_BYTES = 10 * 1024
# Each text of `commonHeaders`, and how many addresses a list of them keeps: a Subject or a
# To of any length must not make the notification too long to publish.
MAX_COMMON_CHARS = 1000
MAX_COMMON_ADDRESSES = 50
# SES receives a message for 50 recipients at most: those the headers name beyond are not.
MAX_RECIPIENTS = 50


def ses_message_id() -> str:
    # SES message ids are lowercase letters and digits; 40 of them here.
    return secrets.token_hex(20)


def notification(
    raw: bytes, message_id: str, bucket: str, topic_arn: str, recipients: list[str] | None
) -> dict[str, Any]:
    """SES's Received notification for `raw`, stored at inbound/<message_id>."""
    # The headers alone, as SES's notification carries them: parts nested deeper than Python
    # can recurse must reach the inbound function, which reads such a mail for its headers.
    message = BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
    addresses = [
        addr.lower()
        for _, addr in email.utils.getaddresses(
            [str(v) for name in ("to", "cc") for v in message.get_all(name, [])]
        )
        if addr
    ]
    destination = recipients or addresses[:MAX_RECIPIENTS]
    if not destination:
        raise ValueError("the mail names no recipient; pass --to ADDRESS")
    source = email.utils.parseaddr(str(message.get("from", ""))[:MAX_COMMON_CHARS])[1]
    source = source or "unknown@localhost"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + "000Z"
    headers, truncated = _listed(message)
    common: dict[str, Any] = {
        "returnPath": source,
        "from": _texts(message, "from"),
        "to": _texts(message, "to"),
        "messageId": str(message.get("message-id", ""))[:MAX_COMMON_CHARS],
        "subject": str(message.get("subject", ""))[:MAX_COMMON_CHARS],
    }
    if message.get("date"):
        common["date"] = str(message["date"])[:MAX_COMMON_CHARS]
    verdict = {"status": "PASS"}
    return {
        "notificationType": "Received",
        "mail": {
            "timestamp": now,
            "source": source,
            "messageId": message_id,
            "destination": destination,
            "headersTruncated": truncated,
            "headers": headers,
            "commonHeaders": common,
        },
        "receipt": {
            "timestamp": now,
            "processingTimeMillis": 1,
            "recipients": destination,
            "spamVerdict": verdict,
            "virusVerdict": verdict,
            "spfVerdict": verdict,
            "dkimVerdict": verdict,
            "dmarcVerdict": verdict,
            "action": {
                "type": "S3",
                "topicArn": topic_arn,
                "bucketName": bucket,
                "objectKeyPrefix": INBOUND_PREFIX,
                "objectKey": f"{INBOUND_PREFIX}{message_id}",
            },
        },
    }


def _listed(message: Message) -> tuple[list[dict[str, str]], bool]:
    """The headers in order while they fit MAX_HEADERS_BYTES, and whether any was left out."""
    listed: list[dict[str, str]] = []
    size = 0
    for name, value in message.items():
        size += len(json.dumps({"name": name, "value": str(value)}).encode())
        if size > MAX_HEADERS_BYTES:
            return listed, True
        listed.append({"name": name, "value": str(value)})
    return listed, False


def _texts(message: Message, name: str) -> list[str]:
    return [str(v)[:MAX_COMMON_CHARS] for v in message.get_all(name, [])[:MAX_COMMON_ADDRESSES]]


def send(data_dir: Path, eml: Path, to: list[str] | None) -> dict[str, Any]:
    """Deliver `eml` as SES would, to the stack running from `data_dir`; returns what was
    stored and published."""
    stack = running_stack(data_dir)
    if not stack:
        raise FileNotFoundError(f"{record_path(data_dir)} is missing: is `tenure local` running?")
    aws = stack.get("aws")
    # A null endpoint is the SDK's own (AWS itself, or a test's in-process stand-in).
    endpoint = aws.get("endpoint", "") if isinstance(aws, dict) else ""
    if endpoint is not None:
        endpoint = _named(stack, data_dir, "aws", "endpoint")
    region, bucket, topic = (
        _named(stack, data_dir, *path)
        for path in (
            ("aws", "region"),
            ("aws", "resources", "inbound_bucket"),
            ("aws", "resources", "inbound_topic_arn"),
        )
    )
    raw = eml.read_bytes()
    message_id = ses_message_id()
    note = notification(raw, message_id, bucket, topic, to)
    published = json.dumps(note)
    if len(published.encode()) > MAX_MESSAGE_BYTES:  # checked before anything is stored
        raise ValueError(f"the notification is past what SNS carries ({MAX_MESSAGE_BYTES} bytes)")
    # The stack's engines answer its own key alone (a record without one: the SDK's own).
    key = aws.get("access_key_id") if isinstance(aws, dict) else None
    secret = aws.get("secret_access_key") if isinstance(aws, dict) else None
    session = boto3.session.Session(
        aws_access_key_id=key if secret else None,
        aws_secret_access_key=secret if key else None,
        region_name=region,
    )
    s3 = session.client("s3", endpoint_url=endpoint)
    key = note["receipt"]["action"]["objectKey"]
    s3.put_object(Bucket=bucket, Key=key, Body=raw)
    sns = session.client("sns", endpoint_url=endpoint)
    try:
        sns.publish(
            TopicArn=topic, Subject="Amazon SES Email Receipt Notification", Message=published
        )
    except Exception:
        # No notification will ever name the object: it goes, and the failure is raised.
        s3.delete_object(Bucket=bucket, Key=key)
        raise
    return {
        "message_id": message_id,
        "object": f"s3://{bucket}/{note['receipt']['action']['objectKey']}",
        "recipients": note["receipt"]["recipients"],
    }


def _named(stack: dict[str, Any], data_dir: Path, *path: str) -> str:
    """The text the record holds at `path`, or ValueError naming what is missing: a record
    written by hand, or by a stack that served no inbound mail."""
    found: Any = stack
    for key in path:
        found = found.get(key) if isinstance(found, dict) else None
    if not isinstance(found, str) or not found:
        raise ValueError(
            f"{record_path(data_dir)} names no inbound mail: {'.'.join(path)} is missing"
        )
    return found
