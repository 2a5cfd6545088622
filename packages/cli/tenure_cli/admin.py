"""`tenure admin bootstrap`: an instance's first admin token, written straight into its table
with the caller's own AWS credentials (it is the one command that needs no Tenure token, so
it talks to AWS, not to the API)."""

from __future__ import annotations

import argparse
import sys

from tenure_cli.common import FAILED, OK, Groups, guarded

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
    from tenure.app.tenure import compose
    from tenure.domain.errors import AlreadyExists

    store = wiring.build_store(args.endpoint, table_name(args))
    svc = compose(store, wiring.SystemClock(), wiring.RandomIds())
    try:
        token, raw = svc.setup.bootstrap_operator(args.name)
    except AlreadyExists:
        print(f"error: already_exists: a token named {args.name!r} exists", file=sys.stderr)
        return FAILED
    print(f"admin token {token.id} ({token.name}), shown this once:", file=sys.stderr)
    print(raw)
    return OK


def add_commands(groups: Groups) -> None:
    bootstrap = groups["admin"].add_parser(
        "bootstrap", help="write the first admin token with your AWS credentials"
    )
    where = bootstrap.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack", help="the deployed stack's name (its table is looked up)")
    where.add_argument("--table", help="the lease table's name")
    bootstrap.add_argument("--name", default="admin", help="the token's name (default admin)")
    bootstrap.add_argument("--region", default=None, help="the AWS region (default: your own)")
    bootstrap.add_argument(
        "--endpoint", default=None, help="an AWS endpoint URL (DynamoDB Local, moto) for tests"
    )
    bootstrap.set_defaults(func=guarded(admin_bootstrap))
