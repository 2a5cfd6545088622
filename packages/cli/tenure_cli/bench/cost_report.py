"""The cost bench's report: the reference workload's usage (bench/cost.py), priced per lease
by the price table (bench/prices.py), beside the budget; and the same as a table for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenure.domain.outbound import ALL

from . import prices
from .meter import EVENT_ENTRY, Usage
from .reclaim import RECLAIM_REACTOR, Later
from .rig import Rig
from .workload import (
    BUDGET,
    EMAIL_SHARE,
    JOB_SECONDS,
    LEASES_PER_MONTH,
    LEASES_PER_WORKER,
    PER_LEASE_ACTORS,
    PER_LEASE_FUNCTIONS,
    RENEW_SECONDS,
    is_worker_route,
)


@dataclass
class Window:
    """The per-lease usage and the sweeper passes of the workload's own window."""

    used: Usage
    sweep_passes: int


def _per_lease(used: Usage, per: float) -> dict[str, float]:
    """The AWS usage of `used` that the price table bills, per lease."""
    return {
        "dynamodb_write_units": used.billed_write_units * per,  # AWS's rules (bench/billing.py)
        "dynamodb_read_units": used.read_units * per,
        "sqs_requests": used.count("sqs") * per,
        "sns_publishes": used.count("sns", {"Publish"}) * per,
        "s3_puts": used.count("s3", {"PutObject", "CopyObject", "ListObjectsV2"}) * per,
        "s3_gets": used.count("s3", {"GetObject", "HeadObject"}) * per,
        "eventbridge_events": used.count("events", {EVENT_ENTRY}) * per,
    }


@dataclass
class Functions:
    """The per-lease functions' invocations, billed duration and logs over the workload."""

    http: int  # HTTP requests
    lambdas: dict[str, Any]
    duration_usd: float
    invocations: int
    log_bytes: float  # the functions' logs and the access log, with each event's overhead
    # The same with the worker routes on the worker function's URL: a function URL writes no
    # access log, so their requests' access log lines and those lines' overhead drop out.
    url_log_bytes: float


@dataclass
class Money:
    """The workload priced: the window's and the reclaim's usage apart, then together."""

    lease: dict[str, float]  # the window's usage per lease, as the price table takes it
    reclaim: dict[str, float]  # the retention reclaim's, the same way
    reclaim_usd: float
    all_in: dict[str, float]
    breakdown_http_api: dict[str, float]
    total_http_api: float
    breakdown: dict[str, float]
    total: float
    provisioned: dict[str, float]
    total_provisioned: float


def report(
    rig: Rig,
    leases: int,
    emails: int,
    workers: int,
    ticks: int,
    sweeps: list[Usage],
    window: Window,
    refused: int,
    later: Later,
) -> dict[str, Any]:
    used = Usage()
    used.add(window.used)
    used.add(later.used)
    per = 1.0 / leases
    fns = _functions(rig, per)
    money = _money(rig, per, window, later, used, fns)
    lifecycle = round(used.billed_write_units * per, 2)  # priced by AWS's rules
    requests = round(fns.http * per, 3)
    all_in = money.all_in
    result: dict[str, Any] = {
        "bench": "cost",
        "engine": "DynamoDB Local (table, stream) + moto (S3, SQS, SNS, Logs, EventBridge)",
        "workload": _workload(leases, workers, emails, ticks),
        "requests_per_lease": requests,
        **_dynamodb(rig, per, used, window, later, money, lifecycle),
        "lambda": fns.lambdas,
        "lambda_invocations_per_lease": round(
            (fns.invocations + later.reactor_invocations) * per, 3
        ),
        "aws_requests_per_lease": {
            "sqs": round(all_in["sqs_requests"], 3),
            "sns": round(all_in["sns_publishes"], 3),
            "s3_put": round(all_in["s3_puts"], 3),
            "s3_get": round(all_in["s3_gets"], 3),
            "eventbridge_put_events": round(all_in["eventbridge_events"], 3),
            # with the worker routes on their function URL, as usd_per_million_leases
            "logs_bytes_ingested": round(fns.url_log_bytes * per + money.reclaim["log_bytes"], 1),
            "logs_bytes_ingested_http_api": round(all_in["log_bytes"], 1),
        },
        "heartbeat_refusals": refused,
        **_usd(rig, per, money, _fixed(rig, sweeps, window.sweep_passes)),
        **_alternatives(rig, per, emails),
        "prices": prices.table(),
        "budget": BUDGET,
    }
    return judged(result)


def judged(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with its verdict on the budget: which figures are over their limit, which
    were not measured (the every-event price, unless `all` was among the settings run), and
    `within_budget`, true only when every figure was measured and none is over."""
    over = [n for n, limit in BUDGET.items() if result.get(n) is not None and result[n] > limit]
    unmeasured = [n for n in BUDGET if result.get(n) is None]
    result.update(
        budget_over=over,
        budget_unmeasured=unmeasured,
        within_budget=not over and not unmeasured,
    )
    return result


def verdict(result: dict[str, Any]) -> str:
    """The budget line's last words: within, over (naming the figures), or not all measured."""
    if result["budget_over"]:
        return "OVER: " + ", ".join(result["budget_over"])
    if result["budget_unmeasured"]:
        missing = ", ".join(result["budget_unmeasured"])
        return f"within for what was measured; not measured: {missing} (run `all` too)"
    return "within"


def _functions(rig: Rig, per: float) -> Functions:
    """Each per-lease function's invocations, duration and logs, and the reactor's for the
    retention reclaim apart."""
    http = sum(rig.routes.values())
    lambdas: dict[str, Any] = {}
    duration_usd = 0.0
    invocations = 0
    log_bytes = 0.0
    log_events = 0
    for name in PER_LEASE_FUNCTIONS:
        calls = rig.calls.get(name)
        if calls is None or not calls.count:
            continue
        billed = sum(calls.billed_ms)
        usd = prices.lambda_duration_usd(billed, rig.memory[name])
        duration_usd += usd
        invocations += calls.count
        log_bytes += calls.log_bytes
        log_events += calls.log_events
        lambdas[name] = {
            "invocations_per_lease": round(calls.count * per, 3),
            "billed_ms_per_invocation": round(billed / calls.count, 1),
            "cpu_ms_per_invocation": round(calls.cpu_ms / calls.count, 1),
            "memory_mb": rig.memory[name],
            "log_bytes_per_invocation": round(calls.log_bytes / calls.count),
            "duration_usd_per_million_leases": prices.per_million(usd * per),
        }
    log_bytes += prices.LOG_EVENT_OVERHEAD_BYTES * log_events
    url_log_bytes = log_bytes
    for route, access_bytes in rig.access_log_bytes.items():
        line_bytes = access_bytes + prices.LOG_EVENT_OVERHEAD_BYTES * rig.routes[route]
        log_bytes += line_bytes
        if not is_worker_route(route):
            url_log_bytes += line_bytes
    reactor_later = rig.calls.get(RECLAIM_REACTOR)
    if reactor_later is not None and reactor_later.count:
        billed = sum(reactor_later.billed_ms)
        lambdas["reactor_retention_reclaim"] = {
            "invocations_per_lease": round(reactor_later.count * per, 3),
            "billed_ms_per_invocation": round(billed / reactor_later.count, 1),
            "cpu_ms_per_invocation": round(reactor_later.cpu_ms / reactor_later.count, 1),
            "memory_mb": rig.memory["reactor"],
            "log_bytes_per_invocation": round(reactor_later.log_bytes / reactor_later.count),
            "duration_usd_per_million_leases": prices.per_million(
                prices.lambda_duration_usd(billed, rig.memory["reactor"]) * per
            ),
        }
    return Functions(http, lambdas, duration_usd, invocations, log_bytes, url_log_bytes)


def _money(
    rig: Rig, per: float, window: Window, later: Later, used: Usage, fns: Functions
) -> Money:
    """The bench's window (the workload itself) and what its leases cost later (the retention
    reclaim), priced apart so that `breakdown` names the reclaim; then the template's default
    configuration, every route on the HTTP API, and the table provisioned."""
    http, invocations = fns.http, fns.invocations
    lease = {
        "http_requests": http * per,
        "lambda_invocations": invocations * per,
        "lambda_duration_usd": fns.duration_usd * per,
        **_per_lease(window.used, per),
        "log_bytes": fns.log_bytes * per,
        "scheduler_invocations": 0.0,  # the sweeper's schedule is fixed: see fixed_usd_per_month
    }
    reclaim = {
        "http_requests": 0.0,
        "lambda_invocations": later.reactor_invocations * per,  # the sweeper runs anyway
        "lambda_duration_usd": later.lambda_duration_usd * per,
        **_per_lease(later.used, per),
        "log_bytes": later.log_bytes * per,
        "scheduler_invocations": 0.0,
    }
    reclaim_usd = round(sum(prices.tenure_breakdown(reclaim).values()), 4)
    all_in = {k: lease[k] + reclaim[k] for k in lease}
    breakdown_http_api = prices.tenure_breakdown(lease)
    breakdown_http_api["retention_reclaim"] = reclaim_usd
    total_http_api = round(sum(breakdown_http_api.values()), 4)
    # The default configuration: the worker routes on the worker function's URL.
    worker_requests = sum(n for route, n in rig.routes.items() if is_worker_route(route))
    worker_share = worker_requests / http if http else 0.0
    authorizer_calls = rig.calls["authorizer"].count if "authorizer" in rig.calls else 0
    on_url = dict(
        lease,
        http_requests=(http - worker_requests) * per,
        lambda_invocations=(invocations - authorizer_calls * worker_share) * per,
        log_bytes=fns.url_log_bytes * per,
    )
    breakdown = prices.tenure_breakdown(on_url)
    breakdown["retention_reclaim"] = reclaim_usd
    total = round(sum(breakdown.values()), 4)
    on_demand = prices.tenure_breakdown({**on_url, **_per_lease(used, per)})
    provisioned = prices.provisioned_breakdown(all_in)
    total_provisioned = round(
        total
        - on_demand["dynamodb_writes"]
        - on_demand["dynamodb_reads"]
        + sum(provisioned.values()),
        4,
    )
    return Money(
        lease,
        reclaim,
        reclaim_usd,
        all_in,
        breakdown_http_api,
        total_http_api,
        breakdown,
        total,
        provisioned,
        total_provisioned,
    )


def _fixed(rig: Rig, sweeps: list[Usage], sweep_passes: int) -> dict[str, float]:
    """The fixed monthly costs, the sweeper's from its average pass in the workload."""
    sweep_calls = rig.calls["sweeper"]
    passes = max(1, sweep_passes)
    sweep_pass = {
        "duration_usd": prices.lambda_duration_usd(
            sum(sweep_calls.billed_ms) / passes, rig.memory["sweeper"]
        ),
        "read_units": sum(s.read_units for s in sweeps) / passes,
        "write_units": sum(s.write_units for s in sweeps) / passes,
        "log_bytes": sweep_calls.log_bytes / passes,
    }
    return prices.fixed_monthly(sweep_pass)


def _workload(leases: int, workers: int, emails: int, ticks: int) -> dict[str, Any]:
    return {
        "leases": leases,
        "workers": workers,
        "job_seconds": JOB_SECONDS,
        "renew_seconds": RENEW_SECONDS,
        "leases_per_worker": LEASES_PER_WORKER,
        "email_received_share": EMAIL_SHARE,
        "emails": emails,
        "virtual_seconds": ticks * RENEW_SECONDS,
        "how": "the stack in one process (bench/rig.py): the template's resources, the "
        "deployed entry points functions/*/app.py, the worker SDK's Client; the service's "
        "clock moves 10 s per tick instead of waiting. Every HTTP request passes an "
        "authorizer cached 60 s per token (ReauthorizeEvery), each request's stream "
        "records reach the reactor as one trigger batch (the quiet-traffic case: an upper "
        "bound on reactor invocations), the sweeper runs every virtual minute. Lambda "
        "durations are this machine's, against DynamoDB Local.",
    }


def _dynamodb(
    rig: Rig,
    per: float,
    used: Usage,
    window: Window,
    later: Later,
    money: Money,
    lifecycle: float,
) -> dict[str, Any]:
    """The requests by route and the DynamoDB units: all in, the window's, the reclaim's."""
    reported_writes = used.write_units + used.lost_write_units
    return {
        "requests_by_route": {k: round(v * per, 3) for k, v in sorted(rig.routes.items())},
        "units_per_request_by_route": {
            route: {
                "write_units": round(rig.route_units[route][0] / n, 2),
                "read_units": round(rig.route_units[route][1] / n, 2),
            }
            for route, n in sorted(rig.routes.items())
        },
        "lifecycle_write_units": lifecycle,
        "lifecycle_write_units_means": "every DynamoDB write the workload made, per lease, "
        "priced by AWS's rules from the items before and after each write (bench/billing.py): "
        "filing or minting, claim, payload, start, its share of the heartbeats, completion, "
        "the reactor's timeline rows, lost conditional writes, and what the lease costs "
        "later: its retention reclaim",
        "lifecycle_write_units_bench_window": round(window.used.billed_write_units * per, 2),
        "read_units_per_lease_bench_window": round(window.used.read_units * per, 2),
        "bench_window_means": "the same, without the retention reclaim: what the workload's "
        "own window measured",
        "retention_reclaim": {
            "write_units_per_lease": round(later.used.billed_write_units * per, 3),
            "read_units_per_lease": round(later.used.read_units * per, 3),
            "reactor_invocations_per_lease": round(later.reactor_invocations * per, 3),
            "eventbridge_events_per_lease": round(money.reclaim["eventbridge_events"], 3),
            "usd_per_million_leases": money.reclaim_usd,
            "leases_reclaimed": later.reclaimed,
            "leases_reclaimed_by_derivation": later.derived,
            "sweeper_passes": later.passes,
            "how": "the service's clock moved past the longest pool retention, then one "
            "sweeper pass a virtual minute until every lease was reclaimed (by a pass when it "
            "had logs or attachments, by derivation, with no write, when it had neither); "
            "each pass less a pass with nothing to reclaim; each lease's stream records one "
            "reactor invocation (an upper bound)",
        },
        "lifecycle_write_units_reported": round(reported_writes * per, 2),
        "lifecycle_write_units_reported_means": "the same writes as DynamoDB Local reported "
        "them (it sums item sizes inside a transaction and doubles index writes there), lost "
        "writes at their minimum",
        "write_units_by_target": {
            k: round(v * per, 3) for k, v in sorted(used.billed_by_index.items())
        },
        "billing_model_check": {
            "single_item_writes_agreeing_with_dynamodb_local": used.model_agreed,
            "single_item_writes_disagreeing": used.model_disagreed,
        },
        "read_units_per_lease": round(used.read_units * per, 2),
        "lost_writes_per_lease": round(used.lost_writes * per, 3),
        "dynamodb_by_function": {
            name: {
                "write_units_per_lease": round((u.write_units + u.lost_write_units) * per, 3),
                "read_units_per_lease": round(u.read_units * per, 3),
                "lost_writes_per_lease": round(u.lost_writes * per, 3),
            }
            for name, u in [*sorted(rig.meter.by_actor.items()), ("retention_reclaim", later.used)]
            if (name in PER_LEASE_ACTORS or name == "retention_reclaim")
            and (u.write_units or u.read_units or u.lost_writes)
        },
    }


def _usd(rig: Rig, per: float, money: Money, fixed: dict[str, float]) -> dict[str, Any]:
    """The price per million leases: the default configuration, every route on the HTTP API,
    the table provisioned, and with the fixed monthly costs spread."""
    total = money.total
    return {
        "usd_per_million_leases": total,
        "usd_per_million_leases_means": "the template's default configuration: the worker "
        "routes on the worker function's URL (no API Gateway request, no authorizer call for "
        "them), every other route on the HTTP API",
        "outbound_events": rig.outbound_events,
        "usd_per_million_leases_all_events": total if rig.outbound_events == ALL else None,
        "usd_per_million_leases_all_events_means": "the same workload with OutboundEvents "
        "all: every lease and task transition published on the bus",
        "usd_per_million_leases_http_api": money.total_http_api,
        "breakdown": money.breakdown,
        "usd_per_million_leases_provisioned": money.total_provisioned,
        "provisioned": {
            "dynamodb_usd_per_million_leases": money.provisioned,
            "minimum_usd_per_month": prices.provisioned_minimum_monthly(),
            "assumption": "BillingMode PROVISIONED under a steady load at this workload's "
            f"rate: auto scaling holds {prices.PROVISIONED_UTILISATION:.0%} utilisation, so "
            "each consumed unit pays for 1/0.7 unit-seconds of capacity at the WCU-hour and "
            "RCU-hour prices; the same read and write units as on demand (table and indexes). "
            "Bursts above the scaled capacity throttle instead of costing more; the template's "
            "minimum units (table and each index) are paid even when idle.",
        },
        "breakdown_http_api": money.breakdown_http_api,
        "fixed_usd_per_month": fixed,
        "usd_per_million_leases_with_fixed": round(
            total + sum(fixed.values()) * 1e6 / LEASES_PER_MONTH, 4
        ),
        "fixed_spread_over_leases_per_month": LEASES_PER_MONTH,
    }


def _alternatives(rig: Rig, per: float, emails: int) -> dict[str, Any]:
    """The same workload on SQS alone and on Step Functions activities, and what is left
    out of every figure."""
    beats = rig.routes.get("POST /api/v1/workers/<worker_id>/heartbeat", 0) * per
    sqs = prices.sqs_alone(beats, emails * per)
    sfn = prices.step_functions_activities(emails * per)
    return {
        "alternatives": {
            "sqs_alone": {
                "usd_per_million_leases": round(sum(sqs.values()), 4),
                "breakdown": sqs,
                "note": "no fencing, no audit trail, no HTTP front door: the floor",
            },
            "step_functions_activities": {
                "usd_per_million_leases": round(sum(sfn.values()), 4),
                "breakdown": sfn,
                "note": f"Standard workflow, {prices.SFN_TRANSITIONS_PER_EXECUTION} state "
                "transitions per lease; activity polls and heartbeats are not billed",
            },
        },
        "not_included": {
            "ses_receiving_usd_per_million_leases": prices.per_million(
                emails * per * prices.PRICES["ses_email_received"]
            ),
            "storage": "table, log and bucket storage (per GB-month, depends on retention)",
        },
    }


def render(result: dict[str, Any]) -> str:
    """The report as a table for people (the JSON is for machines)."""
    w = result["workload"]
    lines = [
        f"tenure bench cost: {w['leases']} leases, {w['workers']} workers, jobs of "
        f"{w['job_seconds']} s renewed every {w['renew_seconds']} s, {w['leases_per_worker']} "
        f"per worker, {w['email_received_share']:.0%} by email ({w['virtual_seconds']} s "
        "of the service's clock)",
        "",
        f"{'per lease':44s}{'':>12s}",
        f"  {'HTTP requests':42s}{result['requests_per_lease']:>12.3f}",
    ]
    for route, n in result["requests_by_route"].items():
        lines.append(f"    {route:40s}{n:>12.3f}")
    lines.append(f"  {'Lambda invocations':42s}{result['lambda_invocations_per_lease']:>12.3f}")
    for name, fn in result["lambda"].items():
        text = f"{name} ({fn['memory_mb']} MB, {fn['billed_ms_per_invocation']} ms billed avg)"
        lines.append(f"    {text:40s}{fn['invocations_per_lease']:>12.3f}")
    lines += [
        f"  {'DynamoDB write units (all in)':42s}{result['lifecycle_write_units']:>12.2f}",
        f"    {'of which the retention reclaim':40s}"
        f"{result['retention_reclaim']['write_units_per_lease']:>12.2f}",
        f"  {'DynamoDB read units (all in)':42s}{result['read_units_per_lease']:>12.2f}",
        f"    {'of which the retention reclaim':40s}"
        f"{result['retention_reclaim']['read_units_per_lease']:>12.2f}",
        f"  {'lost conditional writes':42s}{result['lost_writes_per_lease']:>12.3f}",
    ]
    for name, n in result["aws_requests_per_lease"].items():
        lines.append(f"  {name:42s}{n:>12.3f}")
    lines += ["", f"{'USD per million leases (us-east-1)':44s}{'':>12s}"]
    for name, usd in result["breakdown"].items():
        lines.append(f"  {name:42s}{usd:>12.4f}")
    lines.append(f"  {'Tenure, all in':42s}{result['usd_per_million_leases']:>12.4f}")
    for setting, figures in result.get("by_outbound_events", {}).items():
        text = f"Tenure, OutboundEvents {setting}"
        lines.append(f"  {text:42s}{figures['usd_per_million_leases']:>12.4f}")
    text = "Tenure, every route on the HTTP API"
    lines.append(f"  {text:42s}{result['usd_per_million_leases_http_api']:>12.4f}")
    text = "Tenure, table PROVISIONED at 70 %"
    lines.append(f"  {text:42s}{result['usd_per_million_leases_provisioned']:>12.4f}")
    for name, alt in result["alternatives"].items():
        lines.append(f"  {name + ' (same workload)':42s}{alt['usd_per_million_leases']:>12.4f}")
    fixed = result["fixed_usd_per_month"]
    lines += [
        "",
        "fixed per month: " + ", ".join(f"{k} ${v:.2f}" for k, v in fixed.items()),
        f"with the fixed part spread over {result['fixed_spread_over_leases_per_month']:,} "
        f"leases a month: ${result['usd_per_million_leases_with_fixed']:.2f} per million",
        f"prices checked {result['prices']['checked']} ({result['prices']['region']}); "
        f"budget {result['budget']}: {verdict(result)}",
    ]
    return "\n".join(lines)
