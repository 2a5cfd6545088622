"""`tenure tokens list|revoke`: thin front ends over the API's token routes."""

from __future__ import annotations

import argparse
import json
from urllib.parse import quote, urlencode

from tenure_cli.common import (
    OK,
    Groups,
    guarded,
    operator_client,
    service_options,
    show,
    table,
)

REVOKE_CHECK = "run it again: revoking a revoked token changes nothing"


def tokens_list(args: argparse.Namespace) -> int:
    query = urlencode({k: v for k, v in {"kind": args.kind}.items() if v})
    _, answer = operator_client(args).call("GET", "/tokens" + (f"?{query}" if query else ""))
    if args.output != "table":
        return show(answer, args)
    cols = ["id", "name", "kind", "role", "created_at", "expires_at", "last_used_at"]
    return table(answer["tokens"], args, [*cols, "revoked_at"])


def tokens_revoke(args: argparse.Namespace) -> int:
    operator_client(args).call("DELETE", f"/tokens/{quote(args.id, safe='')}", idempotent=True)
    # The service answers nothing (204): -o json says what was done as a record a script reads.
    if args.output == "json":
        print(json.dumps({"id": args.id, "revoked": True}))
    else:
        print(f"revoked {args.id}")
    return OK


def add_commands(groups: Groups) -> None:
    tl = service_options(groups["tokens"].add_parser("list", help="every token (never a secret)"))
    tl.add_argument("--kind", choices=["operator", "worker"], help="only tokens of this kind")
    tl.set_defaults(func=guarded(tokens_list))
    tr = service_options(
        groups["tokens"].add_parser("revoke", help="revoke a token: it answers 401 within 60 s")
    )
    tr.add_argument("id", help="the token's id (tok_…)")
    tr.set_defaults(func=guarded(tokens_revoke, REVOKE_CHECK))
