"""`tenure tokens list|revoke`: thin front ends over the API's token routes."""

from __future__ import annotations

import argparse
from urllib.parse import quote

from tenure_cli.common import Groups, done, guarded, operator_client, service_options
from tenure_cli.listing import fetch, list_options, show_list

REVOKE_CHECK = "run it again: revoking a revoked token changes nothing"


def tokens_list(args: argparse.Namespace) -> int:
    listed = fetch(operator_client(args), "/tokens", {"kind": args.kind}, "tokens", args)
    cols = ["id", "name", "kind", "role", "created_at", "expires_at", "last_used_at"]
    return show_list(listed, args, [*cols, "revoked_at"])


def tokens_revoke(args: argparse.Namespace) -> int:
    operator_client(args).call("DELETE", f"/tokens/{quote(args.id, safe='')}", idempotent=True)
    return done({"id": args.id, "revoked": True}, f"revoked {args.id}", args)


def add_commands(groups: Groups) -> None:
    tl = service_options(groups["tokens"].add_parser("list", help="every token (never a secret)"))
    tl.add_argument("--kind", choices=["operator", "worker"], help="only tokens of this kind")
    list_options(tl, "tokens")
    tl.set_defaults(func=guarded(tokens_list))
    tr = service_options(
        groups["tokens"].add_parser("revoke", help="revoke a token: it answers 401 within 60 s")
    )
    tr.add_argument("id", help="the token's id (tok_…)")
    tr.set_defaults(func=guarded(tokens_revoke, REVOKE_CHECK))
