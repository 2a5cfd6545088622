"""AWS list prices (us-east-1, on-demand, no free tier) in ONE table, and the arithmetic that
turns measured usage into dollars. Nothing here measures: the cost bench hands it counts.

Checked against the public pricing pages on the date below; update the date with the figures.
"""

from __future__ import annotations

from typing import Any

PRICES_CHECKED = "2026-06-20"
REGION = "us-east-1"

# USD per unit named in the key. Sources: aws.amazon.com/<service>/pricing (first tier).
PRICES: dict[str, float] = {
    "api_gateway_http_request": 1.00 / 1e6,  # HTTP API, first 300M/month (512 KB increments)
    "lambda_request": 0.20 / 1e6,
    "lambda_arm64_gb_second": 0.0000133334,  # first 7.5B GB-s/month
    "dynamodb_write_unit": 0.625 / 1e6,  # on-demand WRU (since the Nov 2024 cut)
    "dynamodb_read_unit": 0.125 / 1e6,  # on-demand RRU
    "dynamodb_wcu_hour": 0.00065,  # provisioned write capacity unit, per hour
    "dynamodb_rcu_hour": 0.00013,  # provisioned read capacity unit, per hour
    "sqs_request": 0.40 / 1e6,  # standard queue, per 64 KB chunk of a request
    "sns_publish": 0.50 / 1e6,  # SES's notification onto the inbound topic (SQS delivery free)
    "s3_put": 0.005 / 1000,  # PUT, COPY, POST, LIST (S3 Standard)
    "s3_get": 0.0004 / 1000,  # GET, SELECT and the rest
    "logs_ingested_gb": 0.50,  # CloudWatch Logs standard ingestion (Lambda's first tier too)
    "eventbridge_scheduler_invocation": 1.00 / 1e6,
    "eventbridge_custom_event": 1.00 / 1e6,  # PutEvents, per 64 KB event
    "xray_trace_recorded": 5.00 / 1e6,
    "stepfunctions_standard_transition": 0.025 / 1000,
    "ses_email_received": 0.10 / 1000,  # SES receiving, per mail (+ per 256 KB chunk, not here)
}

# CloudWatch Logs counts 26 bytes per log event on top of its message.
LOG_EVENT_OVERHEAD_BYTES = 26
# X-Ray's default sampling rule: the first request each second, then 5 % of the rest.
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_FIXED_RATE = 0.05
SECONDS_PER_MONTH = 30 * 24 * 3600
# BillingMode PROVISIONED: the template's auto scaling target, and its default minimum units
# on the table and each of its five indexes (ReadCapacityMin, WriteCapacityMin).
PROVISIONED_UTILISATION = 0.70
PROVISIONED_MIN_UNITS = 5
PROVISIONED_TABLES_AND_INDEXES = 6
# A Standard workflow of one activity Task state then a Succeed state: entering each is one
# transition. Activity calls (GetActivityTask, SendTaskHeartbeat, SendTaskSuccess) and
# StartExecution are not billed apart from the transitions.
SFN_TRANSITIONS_PER_EXECUTION = 2


def lambda_duration_usd(billed_ms: float, memory_mb: int) -> float:
    return billed_ms / 1000 * memory_mb / 1024 * PRICES["lambda_arm64_gb_second"]


def per_million(usd_per_lease: float) -> float:
    return round(usd_per_lease * 1e6, 4)


def tenure_breakdown(lease: dict[str, Any], tracing: bool = False) -> dict[str, float]:
    """USD per million leases, per line, from one lease's measured usage (`lease` holds the
    per-lease counts the cost bench measured: see `report` in bench/cost_report.py). X-Ray is
    priced only for a stack deployed with the template's Tracing=Active (off by default)."""
    p = PRICES
    lines = {
        "api_gateway": lease["http_requests"] * p["api_gateway_http_request"],
        "lambda_requests": lease["lambda_invocations"] * p["lambda_request"],
        "lambda_duration": lease["lambda_duration_usd"],
        "dynamodb_writes": lease["dynamodb_write_units"] * p["dynamodb_write_unit"],
        "dynamodb_reads": lease["dynamodb_read_units"] * p["dynamodb_read_unit"],
        "sqs": lease["sqs_requests"] * p["sqs_request"],
        "sns": lease["sns_publishes"] * p["sns_publish"],
        "s3": lease["s3_puts"] * p["s3_put"] + lease["s3_gets"] * p["s3_get"],
        "cloudwatch_logs": lease["log_bytes"] / 1e9 * p["logs_ingested_gb"],
        "eventbridge": lease["eventbridge_events"] * p["eventbridge_custom_event"]
        + lease["scheduler_invocations"] * p["eventbridge_scheduler_invocation"],
        "xray_sampled": lease["lambda_invocations"] * XRAY_FIXED_RATE * p["xray_trace_recorded"]
        if tracing
        else 0.0,
    }
    return {name: per_million(usd) for name, usd in lines.items()}


def fixed_monthly(sweeper_pass: dict[str, float], tracing: bool = False) -> dict[str, float]:
    """What runs whether or not leases do, per month: the sweeper's schedule, invocation and
    table reads once a minute, and X-Ray's reservoir (one trace a second while traffic runs)."""
    passes = SECONDS_PER_MONTH / 60
    p = PRICES
    return {
        "sweeper": round(
            passes
            * (
                p["eventbridge_scheduler_invocation"]
                + p["lambda_request"]
                + sweeper_pass["duration_usd"]
                + sweeper_pass["read_units"] * p["dynamodb_read_unit"]
                + sweeper_pass["write_units"] * p["dynamodb_write_unit"]
                + sweeper_pass["log_bytes"] / 1e9 * p["logs_ingested_gb"]
            ),
            4,
        ),
        "xray_reservoir": round(
            XRAY_RESERVOIR_PER_SECOND * SECONDS_PER_MONTH * p["xray_trace_recorded"], 4
        )
        if tracing
        else 0.0,
    }


def provisioned_breakdown(lease: dict[str, Any]) -> dict[str, float]:
    """The table's reads and writes per million leases with BillingMode PROVISIONED, under a
    steady load: a unit consumed each second needs 1/utilisation units provisioned, billed by
    the hour (one WCU-hour carries 3,600 write units; an RCU the same read units as on-demand
    read request units: one strongly consistent 4 KB read, or two eventually consistent)."""
    p = PRICES
    per_write = p["dynamodb_wcu_hour"] / 3600 / PROVISIONED_UTILISATION
    per_read = p["dynamodb_rcu_hour"] / 3600 / PROVISIONED_UTILISATION
    return {
        "dynamodb_writes": per_million(lease["dynamodb_write_units"] * per_write),
        "dynamodb_reads": per_million(lease["dynamodb_read_units"] * per_read),
    }


def provisioned_minimum_monthly() -> float:
    """What the minimum units cost a month when nothing runs (table and every index)."""
    units = PROVISIONED_MIN_UNITS * PROVISIONED_TABLES_AND_INDEXES
    hours = SECONDS_PER_MONTH / 3600
    return round(units * hours * (PRICES["dynamodb_wcu_hour"] + PRICES["dynamodb_rcu_hour"]), 2)


def sqs_alone(beats_per_lease: float, emails_per_lease: float) -> dict[str, float]:
    """The same workload on a bare SQS queue (no fencing, no audit): SendMessage, one
    ReceiveMessage per lease (a worker takes one at a time, as it claims), one
    ChangeMessageVisibilityBatch per worker renewal (as many as the workers' heartbeats), and
    DeleteMessage; the email share still costs SES's S3 PUT."""
    p = PRICES
    requests = 1 + 1 + beats_per_lease + 1
    return {
        "sqs": per_million(requests * p["sqs_request"]),
        "email_raw_to_s3": per_million(emails_per_lease * p["s3_put"]),
    }


def step_functions_activities(emails_per_lease: float) -> dict[str, float]:
    """The same workload on Step Functions activities: one Standard execution per lease."""
    p = PRICES
    return {
        "state_transitions": per_million(
            SFN_TRANSITIONS_PER_EXECUTION * p["stepfunctions_standard_transition"]
        ),
        "email_raw_to_s3": per_million(emails_per_lease * p["s3_put"]),
    }


def table() -> dict[str, Any]:
    """The price table as the JSON report carries it."""
    return {"checked": PRICES_CHECKED, "region": REGION, "usd_per_unit": dict(PRICES)}
