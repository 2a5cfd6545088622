"""`tenure leases list|get|cancel`, and the condition column `leases list` prints."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from tenure_worker.client import ApiError, Client

from tenure_cli.common import Groups, guarded, operator_client, say, service_options, show
from tenure_cli.listing import fetch, list_options, show_list

LIST_COLUMNS = [
    "id",
    "state",
    "attempt",
    "fence",
    "pool",
    "task.key",
    "worker_id",
    "until",
    "condition",
]
# The states a lease ends in: a cancel leaves it as it is.
ENDED = frozenset({"completed", "failed", "cancelled", "lost", "killed"})
CANCEL_CHECK = "see where it went with `tenure leases get {id}`"


def condition_chip(lease: dict[str, Any], display_names: dict[str, str]) -> str:
    """A queued lease's condition as the board's chip reads it: `<display_name> (<label>)`;
    empty for a lease in any other state."""
    condition = lease.get("queued_condition")
    if not condition:
        return ""
    name = display_names.get(lease["pool"], lease["pool"])
    return f"{name} ({condition['label']})"


def until(lease: dict[str, Any]) -> str:
    """What the table's UNTIL column says: a lease still open runs until its deadline; an
    ended one says when it ended and how, not the deadline it no longer has."""
    timing = lease.get("timing") or {}
    if lease.get("state") in ENDED:
        how = lease.get("outcome") or lease.get("state")
        return f"ended {timing.get('ended_at') or ''} ({how})".replace("  ", " ")
    return str(timing.get("deadline") or "")


def display_names(client: Client, space: str) -> dict[str, str]:
    """The space's pools by name → display name (one call; the raw names if it is refused,
    e.g. for a token that may list leases but not pools)."""
    try:
        _, answer = client.call("GET", f"/pools?space={quote(space)}")
    except ApiError:
        return {}
    return {p["name"]: p["display_name"] for p in answer["pools"]}


def leases_list(args: argparse.Namespace) -> int:
    client = operator_client(args)
    params = {
        "space": args.space,
        "state": args.state,
        "pool": args.pool,
        "subject_kind": args.subject_kind,
    }
    listed = fetch(client, "/leases", params, "leases", args)
    if args.output != "table":
        return show_list(listed, args, LIST_COLUMNS)
    names = display_names(client, args.space)  # the board's chip: `<display_name> (<label>)`
    rows = [
        {**lease, "condition": condition_chip(lease, names), "until": until(lease)}
        for lease in listed.rows
    ]
    return show_list(listed, args, LIST_COLUMNS, rows)


def leases_get(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/leases/{args.id}")
    return show({"lease": answer}, args) if args.output == "table" else show(answer, args)


def leases_cancel(args: argparse.Namespace) -> int:
    """Cancelling an ended lease changes nothing (the service answers the lease as it is):
    read it first so the note on stderr can say so, the output staying the lease."""
    client = operator_client(args)
    path = f"/leases/{quote(args.id, safe='')}"
    try:
        _, before = client.call("GET", path)
    except ApiError:  # the cancel's own answer says what is wrong, with its code
        before = {}
    _, answer = client.call("POST", f"{path}/cancel")
    if before.get("state") in ENDED:
        say(
            f"lease {answer['lease']['id']} had already ended ({before['state']}); "
            "nothing was cancelled",
            err=True,
        )
    return show(answer["lease"], args)


def add_commands(groups: Groups) -> None:
    lsub = groups["leases"]
    ls = service_options(
        lsub.add_parser("list", help="a space's leases, newest first (one page; --all: every)")
    )
    ls.add_argument("--space", required=True, help="the space")
    ls.add_argument("--state", help="only leases in this state")
    ls.add_argument("--pool", help="only leases of this pool")
    ls.add_argument(
        "--subject-kind",
        metavar="KINDS",
        help="only leases of these subject kinds, comma-separated (task, workflow, space); "
        "a workflow's or the space's leases are found however many task leases came after",
    )
    list_options(ls, "leases")
    ls.set_defaults(func=guarded(leases_list))
    get = service_options(lsub.add_parser("get", help="one lease"))
    get.add_argument("id", help="the lease's id")
    get.set_defaults(func=guarded(leases_get))
    cancel = service_options(lsub.add_parser("cancel", help="cancel a lease"))
    cancel.add_argument("id", help="the lease's id")
    cancel.set_defaults(func=guarded(leases_cancel, CANCEL_CHECK))
