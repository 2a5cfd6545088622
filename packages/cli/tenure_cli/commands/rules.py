"""`tenure rules …` and `tenure events post`: the operator's commands for rules and events."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tenure_cli.commands.worker import UsageError, _json_arg, _operator, _print, _table, guarded


def _rule_file(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror or err}") from err
    return _json_arg(text, path)


def rules_create(args: argparse.Namespace) -> int:
    body = _rule_file(args.file)
    if args.space:
        body["space"] = args.space
    _, answer = _operator(args).call("POST", "/rules", body)
    return _print(answer["rule"], args)


def rules_list(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("GET", f"/rules?space={args.space}")
    cols = ["id", "name", "kind", "pool", "enabled", "subject.kind", "trigger.topic"]
    return _table(answer["rules"], args, [*cols, "trigger.schedule"])


def rules_get(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("GET", f"/rules/{args.id}")
    return _print(answer["rule"], args)


def rules_enable(args: argparse.Namespace, enabled: bool) -> int:
    _, answer = _operator(args).call("PATCH", f"/rules/{args.id}", {"enabled": enabled})
    return _print(answer["rule"], args)


def rules_fire(args: argparse.Namespace) -> int:
    # Not retried: each firing mints a lease, so a lost answer must not mint a second one.
    _, answer = _operator(args).call("POST", f"/rules/{args.id}/fire", retries=0)
    return _print(answer, args)


def rules_delete(args: argparse.Namespace) -> int:
    _operator(args).call("DELETE", f"/rules/{args.id}")
    return 0


def events_post(args: argparse.Namespace) -> int:
    data = _json_arg(args.data, "--data")
    # `data` is required by the API; leaving --data out posts an empty one.
    body: dict[str, Any] = {"space": args.space, "topic": args.topic, "data": data or {}}
    if args.event_id:
        body["event_id"] = args.event_id
    # Retried only with an event_id, which makes a repeat mint nothing new.
    retries = None if args.event_id else 0
    _, answer = _operator(args).call("POST", "/events", body, retries=retries)
    return _table(answer["leases"], args, ["id", "state", "pool", "subject_kind", "task.key"])


def add_commands(sub: Any) -> None:
    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--api", help="service address (or TENURE_API), e.g. http://127.0.0.1:8787")
        p.add_argument("--token", help="bearer token (or TENURE_TOKEN)")
        p.add_argument("-o", "--output", choices=["table", "json"], default="table")
        return p

    rules = sub.add_parser("rules", help="admin: rules that mint leases (email, events, schedules)")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    create = common(rsub.add_parser("create", help="create a rule from a JSON file (- for stdin)"))
    create.add_argument("file")
    create.add_argument("--space", help="put the rule in this space, whatever the file says")
    create.set_defaults(func=guarded(rules_create))
    ls = common(rsub.add_parser("list"))
    ls.add_argument("--space", required=True)
    ls.set_defaults(func=guarded(rules_list))
    for name, fn, help_ in (
        ("get", rules_get, "show one rule"),
        ("enable", lambda a: rules_enable(a, True), "enable (its schedule too)"),
        ("disable", lambda a: rules_enable(a, False), "disable (its schedule too)"),
        ("fire", rules_fire, "mint one lease now"),
        ("delete", rules_delete, "delete (its schedule too)"),
    ):
        cmd = common(rsub.add_parser(name, help=help_))
        cmd.add_argument("id")
        cmd.set_defaults(func=guarded(fn))

    events = sub.add_parser("events", help="member: post an event for inbound rules")
    post = common(events.add_subparsers(dest="events_command", required=True).add_parser("post"))
    post.add_argument("--space", required=True)
    post.add_argument("--topic", required=True)
    post.add_argument("--data", help="a JSON object")
    post.add_argument("--event-id", help="idempotency key: the same id mints nothing new")
    post.set_defaults(func=guarded(events_post))
