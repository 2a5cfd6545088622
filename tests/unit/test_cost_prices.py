"""The cost bench's arithmetic (bench/prices.py), on hand-made usage."""

from __future__ import annotations

import pytest
from tenure_cli.bench import prices

NOTHING = {
    "http_requests": 0.0,
    "lambda_invocations": 0.0,
    "lambda_duration_usd": 0.0,
    "dynamodb_write_units": 0.0,
    "dynamodb_read_units": 0.0,
    "sqs_requests": 0.0,
    "sns_publishes": 0.0,
    "s3_puts": 0.0,
    "s3_gets": 0.0,
    "log_bytes": 0.0,
    "eventbridge_events": 0.0,
    "scheduler_invocations": 0.0,
}


def test_each_line_is_its_count_times_its_list_price_per_million_leases() -> None:
    lines = prices.tenure_breakdown(
        {**NOTHING, "http_requests": 6, "dynamodb_write_units": 12, "dynamodb_read_units": 8}
    )
    assert lines["api_gateway"] == pytest.approx(6.00)
    assert lines["dynamodb_writes"] == pytest.approx(7.50)
    assert lines["dynamodb_reads"] == pytest.approx(1.00)
    assert lines["sqs"] == 0 and lines["xray_sampled"] == 0


def test_x_ray_is_priced_only_for_a_stack_deployed_with_tracing_on() -> None:
    used = {**NOTHING, "lambda_invocations": 20}
    assert prices.tenure_breakdown(used)["xray_sampled"] == 0
    # 5 % of 20 invocations traced at $5 per million traces: $5 per million leases.
    assert prices.tenure_breakdown(used, tracing=True)["xray_sampled"] == pytest.approx(5.0)
    sweep = {"duration_usd": 0.0, "read_units": 0.0, "write_units": 0.0, "log_bytes": 0.0}
    assert prices.fixed_monthly(sweep)["xray_reservoir"] == 0
    assert prices.fixed_monthly(sweep, tracing=True)["xray_reservoir"] == pytest.approx(12.96)


def test_lambda_duration_is_billed_per_gb_second_at_the_arm64_price() -> None:
    # 1,000 ms at 1,024 MB is one GB-second.
    assert prices.lambda_duration_usd(1000, 1024) == prices.PRICES["lambda_arm64_gb_second"]
    assert prices.lambda_duration_usd(10, 512) == pytest.approx(0.005 * 0.0000133334)


def test_the_alternatives_price_the_same_counts() -> None:
    # Send, receive, delete and three renewals: six SQS requests, $2.40 per million leases.
    assert prices.sqs_alone(3, 0)["sqs"] == pytest.approx(2.40)
    assert prices.step_functions_activities(0)["state_transitions"] == pytest.approx(50.0)


def test_provisioned_capacity_prices_each_unit_at_the_hourly_rate_over_70_percent() -> None:
    used = {**NOTHING, "dynamodb_write_units": 12, "dynamodb_read_units": 8}
    lines = prices.provisioned_breakdown(used)
    # A WCU-hour carries 3,600 writes; at 70 % each write pays for 1/0.7 of one.
    assert lines["dynamodb_writes"] == pytest.approx(12e6 * 0.00065 / 3600 / 0.7, abs=1e-4)
    assert lines["dynamodb_reads"] == pytest.approx(8e6 * 0.00013 / 3600 / 0.7, abs=1e-4)
    on_demand = prices.tenure_breakdown(used)
    assert lines["dynamodb_writes"] < on_demand["dynamodb_writes"]
    # Five read and five write units on the table and each of its five indexes, all month.
    assert prices.provisioned_minimum_monthly() == pytest.approx(30 * 720 * 0.00078, abs=0.01)


def test_a_function_url_writes_no_access_log_so_the_default_price_books_none() -> None:
    from collections import Counter
    from types import SimpleNamespace

    from tenure_cli.bench import cost_report
    from tenure_cli.bench.rig import Invocations

    filing, claim = "POST /api/v1/tasks", "POST /api/v1/pools/<pool>/claim"
    api = Invocations(billed_ms=[10, 10, 10], log_bytes=300, log_events=3)
    rig = SimpleNamespace(
        routes=Counter({filing: 1, claim: 2}),
        access_log_bytes=Counter({filing: 150, claim: 300}),
        calls={"api": api},
        memory={"api": 512},
    )
    fns = cost_report._functions(rig, 1.0)  # type: ignore[arg-type]
    overhead = prices.LOG_EVENT_OVERHEAD_BYTES
    # On the HTTP API every request writes an access log line, each an event of its own.
    assert fns.log_bytes == 300 + 3 * overhead + 450 + 3 * overhead
    # On the worker function's URL the claims write only the function's own lines.
    assert fns.url_log_bytes == 300 + 3 * overhead + 150 + overhead


def test_the_bench_books_the_access_log_line_the_template_writes() -> None:
    import json

    from tenure_cli.bench.rig import access_log_format, access_log_line

    form = access_log_format()
    event = {"routeKey": "ANY /api/v1/{proxy+}", "headers": {"user-agent": "tenure-cli/1.0"}}
    line = access_log_line(form, event, 201, 14)
    written = json.loads(line)
    # Every field the deployed format names, none of them left unfilled.
    assert written.keys() == json.loads(form).keys()
    assert "$context" not in line
    assert written["status"] == "201" and written["latency"] == "14"
    assert written["userAgent"] == "tenure-cli/1.0"
    assert written["integrationError"] == "-"
    # The worker SDK's transport names no User-Agent: urllib sends its own.
    bare = json.loads(access_log_line(form, {"routeKey": "x", "headers": {}}, 200, 1))
    assert bare["userAgent"].startswith("Python-urllib/")
