"""`tenure rules …` and `tenure events post`: the operator's commands for rules that mint
leases; and `tenure events send`, the event that blocks of kind `event` wait for."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tenure_cli.common import (
    Groups,
    UsageError,
    done,
    guarded,
    json_arg,
    operator_client,
    service_options,
    show,
    table,
)
from tenure_cli.listing import fetch, list_options, show_list

RULE_CHECK = "see what it holds now with `tenure rules get {id}`"
CREATE_CHECK = "look for it with `tenure rules list --space SPACE` before creating it again"
FIRE_CHECK = "look for the lease it minted with `tenure leases list --space SPACE`"
ADDRESS_CHECK = "see the space's addresses with `tenure spaces addresses {space}`"
EVENT_CHECK = (
    "look for the leases it minted with `tenure leases list --space {space}` (with an "
    "--event-id, posting it again is safe)"
)


def _rule_file(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror or err}") from err
    return json_arg(text, path)


def rules_create(args: argparse.Namespace) -> int:
    body = _rule_file(args.file)
    if args.space:
        body["space"] = args.space
    _, answer = operator_client(args).call("POST", "/rules", body)
    return show(answer["rule"], args)


def rules_list(args: argparse.Namespace) -> int:
    listed = fetch(operator_client(args), "/rules", {"space": args.space}, "rules", args)
    cols = ["id", "name", "kind", "pool", "enabled", "subject.kind", "trigger.topic"]
    return show_list(listed, args, [*cols, "trigger.schedule"])


def rules_get(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/rules/{args.id}")
    return show(answer["rule"], args)


def rules_enable(args: argparse.Namespace, enabled: bool) -> int:
    _, answer = operator_client(args).call("PATCH", f"/rules/{args.id}", {"enabled": enabled})
    return show(answer["rule"], args)


def rules_fire(args: argparse.Namespace) -> int:
    # Each firing mints a lease: a lost answer is not sent again (see `Client.call`).
    _, answer = operator_client(args).call("POST", f"/rules/{args.id}/fire")
    return show(answer["lease"], args)


def rules_delete(args: argparse.Namespace) -> int:
    operator_client(args).call("DELETE", f"/rules/{args.id}")
    return done({"id": args.id, "deleted": True}, f"deleted {args.id}", args)


def address_add(args: argparse.Namespace) -> int:
    # Giving an address is safe to repeat: the space that owns it gets it again, as it is.
    client = operator_client(args)
    _, answer = client.call(
        "POST", f"/spaces/{args.space}/addresses", {"address": args.address}, idempotent=True
    )
    return show(answer, args)


def addresses_list(args: argparse.Namespace) -> int:
    listed = fetch(operator_client(args), f"/spaces/{args.space}/addresses", {}, "addresses", args)
    return show_list(listed, args, ["address", "space", "created_at"])


def address_remove(args: argparse.Namespace) -> int:
    path = f"/spaces/{args.space}/addresses/{quote(args.address, safe='')}"
    operator_client(args).call("DELETE", path)
    record = {"address": args.address, "space": args.space, "removed": True}
    return done(record, f"removed {args.address} from {args.space}", args)


def events_post(args: argparse.Namespace) -> int:
    data = json_arg(args.data, "--data")
    # `data` is required by the API; leaving --data out posts an empty one.
    body: dict[str, Any] = {"space": args.space, "topic": args.topic, "data": data or {}}
    if args.event_id:
        body["event_id"] = args.event_id
    # Safe to retry only with an event_id, which makes a repeat mint nothing new.
    idempotent = bool(args.event_id)
    _, answer = operator_client(args).call("POST", "/events", body, idempotent=idempotent)
    if args.output == "json":
        return show(answer, args)  # {leases: [...]}: the leases it minted
    return table(answer["leases"], args, ["id", "state", "pool", "subject_kind", "task.key"])


def events_send(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"space": args.space, "name": args.name, "key": args.key}
    if args.data is not None:
        body["data"] = json_arg(args.data, "--data")
    # Sending it again clears nothing twice: a block is cleared once, whoever sends.
    _, answer = operator_client(args).call("POST", "/events", body, idempotent=True)
    return show(answer, args)


def add_commands(groups: Groups) -> None:
    rsub = groups["rules"]
    create = service_options(
        rsub.add_parser("create", help="create a rule from a JSON file (- for stdin)")
    )
    create.add_argument("file", help="the rule as JSON (- for stdin)")
    create.add_argument("--space", help="put the rule in this space, whatever the file says")
    create.set_defaults(func=guarded(rules_create, CREATE_CHECK))
    ls = service_options(rsub.add_parser("list", help="a space's rules"))
    ls.add_argument("--space", required=True, help="the space")
    list_options(ls, "rules")
    ls.set_defaults(func=guarded(rules_list))
    for name, fn, help_, check in (
        ("get", rules_get, "show one rule", RULE_CHECK),
        ("enable", lambda a: rules_enable(a, True), "enable (its schedule too)", RULE_CHECK),
        ("disable", lambda a: rules_enable(a, False), "disable (its schedule too)", RULE_CHECK),
        ("fire", rules_fire, "mint one lease now", FIRE_CHECK),
        ("delete", rules_delete, "delete (its schedule too)", RULE_CHECK),
    ):
        cmd = service_options(rsub.add_parser(name, help=help_))
        cmd.add_argument("id", help="the rule's id")
        cmd.set_defaults(func=guarded(fn, check))

    spaces = groups["spaces"]
    for name, fn, help_ in (
        ("address-add", address_add, "give the space an inbound email address (admin of all)"),
        ("address-remove", address_remove, "take an inbound address back (admin of all)"),
    ):
        cmd = service_options(spaces.add_parser(name, help=help_))
        cmd.add_argument("space", help="the space's key")
        cmd.add_argument("address", help="the address, e.g. support@inbound.example.com")
        cmd.set_defaults(func=guarded(fn, ADDRESS_CHECK))
    ls_addresses = service_options(spaces.add_parser("addresses", help="a space's addresses"))
    ls_addresses.add_argument("space", help="the space's key")
    list_options(ls_addresses, "addresses")
    ls_addresses.set_defaults(func=guarded(addresses_list))

    post = service_options(groups["events"].add_parser("post", help="post one event"))
    post.add_argument("--space", required=True, help="the space whose rules hear it")
    post.add_argument("--topic", required=True, help="what rules match it on")
    post.add_argument("--data", help="a JSON object")
    post.add_argument("--event-id", help="idempotency key: the same id mints nothing new")
    post.set_defaults(func=guarded(events_post, EVENT_CHECK))
    send = service_options(
        groups["events"].add_parser("send", help="send an event: clear the blocks waiting for it")
    )
    send.add_argument("--space", required=True, help="the space whose blocks wait for it")
    send.add_argument("--name", required=True, help="the event's name (1-128 characters)")
    send.add_argument("--key", required=True, help="which one (1-128 characters)")
    send.add_argument("--data", help="any JSON, at most 65,536 bytes")
    send.set_defaults(func=guarded(events_send))
