"""`tenure admin bootstrap` and `tenure admin migrate`: an instance's first admin token, and its
data brought to this release's schema, both written straight into its table with the caller's
own AWS credentials (they need no Tenure token, so they talk to AWS, not to the API)."""

from __future__ import annotations

import argparse
import sys

from tenure_cli.common import FAILED, OK, Command, Groups, guarded, say

# The table's logical id in infra/template.yaml: --stack finds its physical name by it.
TABLE_LOGICAL_ID = "LeaseTable"


def table_name(args: argparse.Namespace) -> str:
    """The lease table: --table as given, or the one --stack's template made."""
    if args.table:
        return str(args.table)
    import boto3

    cfn = boto3.client("cloudformation", region_name=args.region, endpoint_url=args.endpoint)
    found = cfn.describe_stack_resources(StackName=args.stack, LogicalResourceId=TABLE_LOGICAL_ID)
    return str(found["StackResources"][0]["PhysicalResourceId"])


def admin_bootstrap(args: argparse.Namespace) -> int:
    """Write a first admin operator token and print it once. Nothing here goes through the
    API (which never mints a token for an unauthenticated caller): whoever can write the
    table with their AWS credentials can make one."""
    from tenure import wiring
    from tenure.domain.errors import AlreadyExists

    store = wiring.build_store(args.endpoint, table_name(args))
    svc = wiring.build_service(store, bare=True)
    try:
        token, raw = svc.tokens.bootstrap_operator(args.name)
    except AlreadyExists:
        print(f"error: already_exists: a token named {args.name!r} exists", file=sys.stderr)
        return FAILED
    print(f"admin token {token.id} ({token.name}), shown this once:", file=sys.stderr)
    print(raw)
    return OK


def admin_migrate(args: argparse.Namespace) -> int:
    """Run the migrations the table's data has not had, in order, printing what each did. It
    may Scan the table: it is an operator's command, never a request path."""
    from tenure import wiring
    from tenure.app.migrations import SchemaTooNew, migrate
    from tenure.domain.errors import Conflict

    store = wiring.build_store(args.endpoint, table_name(args))
    try:
        outcomes = migrate(store, dry_run=args.dry_run, page_size=args.page_size)
    except (SchemaTooNew, Conflict) as refused:
        print(f"error: {refused}", file=sys.stderr)
        return FAILED
    verb = {"applied": "applied", "already": "already applied", "would_apply": "would apply"}
    for outcome in outcomes:
        counts = ", ".join(f"{name} {n}" for name, n in outcome.counts.items())
        said = verb.get(outcome.status, "stopped part-way (run again to go on)")
        line = f"{outcome.version} {outcome.name}: {said}"
        if outcome.pages:
            line += f" ({outcome.pages} page{'s' if outcome.pages != 1 else ''}: {counts})"
        print(line)
    if args.dry_run:
        print("dry run: nothing was written")
    stopped = any(o.status == "stopped" for o in outcomes)
    return FAILED if stopped else OK


def aws_refusals(fn: Command) -> Command:
    """What AWS or the table answers when --table, --stack or --endpoint is wrong, or the
    credentials are missing, as one line with its code and exit 1, never a traceback: a
    misspelled table name is the likeliest mistake an operator makes here."""

    def run(args: argparse.Namespace) -> int:
        from botocore.exceptions import BotoCoreError, ClientError
        from tenure.domain.errors import TenureError

        try:
            return fn(args)
        except ClientError as err:  # ResourceNotFoundException, a stack that does not exist
            error = err.response.get("Error", {})
            code, message = error.get("Code") or "aws_error", error.get("Message") or str(err)
        except TenureError as err:  # the store's own: the table throttling or unreachable
            code, message = err.code, err.message
        except BotoCoreError as err:  # no credentials, no such endpoint, an unreadable answer
            code, message = type(err).__name__, str(err)
        say(f"error: {code}: {' '.join(message.split())}", err=True)
        return FAILED

    return run


def _where(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack", help="the deployed stack's name (its table is looked up)")
    where.add_argument("--table", help="the lease table's name")
    parser.add_argument("--region", default=None, help="the AWS region (default: your own)")
    parser.add_argument(
        "--endpoint", default=None, help="an AWS endpoint URL (DynamoDB Local, moto) for tests"
    )


def add_commands(groups: Groups) -> None:
    bootstrap = groups["admin"].add_parser(
        "bootstrap", help="write the first admin token with your AWS credentials"
    )
    _where(bootstrap)
    bootstrap.add_argument("--name", default="admin", help="the token's name (default admin)")
    bootstrap.set_defaults(func=guarded(aws_refusals(admin_bootstrap)))
    migrate = groups["admin"].add_parser(
        "migrate", help="bring the table's data to this release's schema (idempotent)"
    )
    _where(migrate)
    migrate.add_argument(
        "--dry-run", action="store_true", help="say what each migration would do; write nothing"
    )
    migrate.add_argument(
        "--page-size", type=int, default=500, help="rows each Scan page reads (default 500)"
    )
    migrate.set_defaults(func=guarded(aws_refusals(admin_migrate)))
