"""`tenure leases list|get|cancel`, and the condition column `leases list` prints."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from tenure_worker.client import ApiError, Client

from tenure_cli.common import Groups, guarded, operator_client, service_options, show, table

LIST_COLUMNS = [
    "id",
    "state",
    "attempt",
    "fence",
    "pool",
    "task.key",
    "worker_id",
    "timing.deadline",
    "condition",
]
CANCEL_CHECK = "see where it went with `tenure leases get {id}`"


def condition_chip(lease: dict[str, Any], display_names: dict[str, str]) -> str:
    """A queued lease's condition as the board's chip reads it: `<display_name> (<label>)`;
    empty for a lease in any other state."""
    condition = lease.get("queued_condition")
    if not condition:
        return ""
    name = display_names.get(lease["pool"], lease["pool"])
    return f"{name} ({condition['label']})"


def display_names(client: Client, space: str) -> dict[str, str]:
    """The space's pools by name → display name (one call; the raw names if it is refused,
    e.g. for a token that may list leases but not pools)."""
    try:
        _, answer = client.call("GET", f"/pools?space={quote(space)}")
    except ApiError:
        return {}
    return {p["name"]: p["display_name"] for p in answer["pools"]}


def leases_list(args: argparse.Namespace) -> int:
    query = f"?space={args.space}&limit={args.limit}"
    if args.state:
        query += f"&state={args.state}"
    if args.pool:
        query += f"&pool={args.pool}"
    client = operator_client(args)
    _, answer = client.call("GET", f"/leases{query}")
    if args.output == "table":  # the board's chip: `<display_name> (<label>)`
        names = display_names(client, args.space)
        for lease in answer["leases"]:
            lease["condition"] = condition_chip(lease, names)
    return table(answer["leases"], args, LIST_COLUMNS)


def leases_get(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/leases/{args.id}")
    return show({"lease": answer}, args) if args.output == "table" else show(answer, args)


def leases_cancel(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("POST", f"/leases/{args.id}/cancel")
    return show(answer, args)


def add_commands(groups: Groups) -> None:
    lsub = groups["leases"]
    ls = service_options(lsub.add_parser("list", help="a space's leases (one page)"))
    ls.add_argument("--space", required=True, help="the space")
    ls.add_argument("--state", help="only leases in this state")
    ls.add_argument("--pool", help="only leases of this pool")
    ls.add_argument("--limit", type=int, default=50, help="leases on the page")
    ls.set_defaults(func=guarded(leases_list))
    get = service_options(lsub.add_parser("get", help="one lease"))
    get.add_argument("id", help="the lease's id")
    get.set_defaults(func=guarded(leases_get))
    cancel = service_options(lsub.add_parser("cancel", help="cancel a lease"))
    cancel.add_argument("id", help="the lease's id")
    cancel.set_defaults(func=guarded(leases_cancel, CANCEL_CHECK))
