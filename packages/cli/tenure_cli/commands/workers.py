"""`tenure workers list`: the workers polling one pool, or every pool the token may see."""

from __future__ import annotations

import argparse
from typing import Any

from tenure_cli.common import Groups, guarded, operator_client, service_options
from tenure_cli.listing import (
    fetch,
    gather,
    list_options,
    no_cursor_without,
    show_list,
    visible_spaces,
)

WORKER_COLUMNS = ["worker_id", "pool", "status", "last_seen", "worker_version", "held"]


def _row(worker: dict[str, Any]) -> dict[str, Any]:
    """A worker made fit for a column: the leases it holds, counted."""
    return {**worker, "held": len(worker.get("leases") or [])}


def workers_list(args: argparse.Namespace) -> int:
    """The workers of --pool; else of every pool of --space, else of every visible space."""
    client = operator_client(args)
    if args.pool:
        listed = fetch(client, "/workers", {"pool": args.pool}, "workers", args)
    else:
        no_cursor_without(args, "--pool")
        spaces = [args.space] if args.space else visible_spaces(client)
        every = argparse.Namespace(limit=None, cursor=None, all=True)
        pools = gather(
            client, [("/pools", {"space": key}) for key in spaces], "pools", every, "spaces"
        )
        targets = [("/workers", {"pool": pool["name"]}) for pool in pools.rows]
        listed = gather(client, targets, "workers", args, "pools (narrow with --space or --pool)")
        listed.cut = listed.cut or pools.cut
    return show_list(listed, args, WORKER_COLUMNS, [_row(w) for w in listed.rows])


def add_commands(groups: Groups) -> None:
    wl = service_options(
        groups["workers"].add_parser(
            "list", help="workers with reachable/unreachable, last seen, version, leases held"
        )
    )
    wl.add_argument("--pool", help="only this pool's workers (default: every visible pool's)")
    wl.add_argument("--space", help="without --pool: only the pools of this space")
    list_options(wl, "workers")
    wl.set_defaults(func=guarded(workers_list))
