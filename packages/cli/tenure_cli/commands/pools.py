"""`tenure pools …` and `tenure spaces archive|unarchive`, and the condition
column of `tenure leases list`: thin front ends over the client."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from tenure_worker.client import ApiError, Client

Common = Callable[[argparse.ArgumentParser], argparse.ArgumentParser]


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


def _pool_path(name: str, action: str = "") -> str:
    return f"/pools/{quote(name, safe='')}{action}"


def kind_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`agent` from --model/--effort and `classifier` from --classifier, as the body carries
    them (an agent pool needs a model, a classifier pool its settings)."""
    from tenure_cli.commands.worker import UsageError, _json_arg

    body: dict[str, Any] = {}
    if args.model is not None or args.effort is not None:
        if args.model is None:
            raise UsageError("--effort needs --model (the agent settings go together)")
        body["agent"] = {"model": args.model}
        if args.effort is not None:
            body["agent"]["effort"] = args.effort
    if args.classifier is not None:
        body["classifier"] = _json_arg(args.classifier, "--classifier")
    return body


def add_pool_commands(pools: Any, spaces: Any, common: Common) -> None:
    """Register the commands on the `pools` and `spaces` subparsers of commands/worker.py (whose
    helpers are imported here, at registration, once that module has loaded)."""
    from tenure_cli.commands.worker import _operator, _table, guarded
    from tenure_cli.commands.worker import _print as show

    operator, table = _operator, _table

    def pools_list(args: argparse.Namespace) -> int:
        _, answer = operator(args).call("GET", f"/pools?space={quote(args.space)}")
        cols = ["name", "display_name", "kind", "version", "paused", "max_active", "active"]
        return int(table(answer["pools"], args, cols))

    def pools_show(args: argparse.Namespace) -> int:
        _, answer = operator(args).call("GET", _pool_path(args.name))
        return int(show(answer["pool"], args))

    def pools_update(args: argparse.Namespace) -> int:
        body: dict[str, Any] = {}
        for key in (
            "display_name",
            "max_active",
            "renew_seconds",
            "grace_seconds",
            "toleration_seconds",
            "on_expiry",
        ):
            if getattr(args, key) is not None:
                body[key] = getattr(args, key)
        if args.unlimited:
            body["max_active"] = None
        if args.keeps_logs is not None:
            body["keeps_logs"] = args.keeps_logs == "yes"
        body.update(kind_settings(args))
        _, answer = operator(args).call("PATCH", _pool_path(args.name), body)
        return int(show(answer["pool"], args))

    def pools_pause(args: argparse.Namespace) -> int:
        _, answer = operator(args).call("POST", _pool_path(args.name, "/pause"))
        return int(show(answer["pool"], args))

    def pools_resume(args: argparse.Namespace) -> int:
        _, answer = operator(args).call("POST", _pool_path(args.name, "/resume"))
        return int(show(answer["pool"], args))

    def spaces_archive(args: argparse.Namespace) -> int:
        path = f"/spaces/{quote(args.key, safe='')}/{args.spaces_command}"
        _, answer = operator(args).call("POST", path)
        return int(show(answer["space"], args))

    pl = common(pools.add_parser("list", help="the pools of a space"))
    pl.add_argument("--space", required=True)
    pl.set_defaults(func=guarded(pools_list))
    ps = common(pools.add_parser("show", help="one pool"))
    ps.add_argument("name")
    ps.set_defaults(func=guarded(pools_show))
    pu = common(pools.add_parser("update", help="change a pool's settings"))
    pu.add_argument("name")
    pu.add_argument("--display-name")
    pu.add_argument("--max-active", type=int)
    pu.add_argument("--unlimited", action="store_true", help="remove the pool's ceiling")
    pu.add_argument("--renew-seconds", type=int)
    pu.add_argument("--grace-seconds", type=int)
    pu.add_argument("--toleration-seconds", type=int)
    pu.add_argument("--on-expiry", choices=["requeue", "fail"])
    pu.add_argument("--keeps-logs", choices=["yes", "no"])
    pu.add_argument("--model", help="agent pools: the model (a new version)")
    pu.add_argument("--effort", help="agent pools: the effort (a new version)")
    pu.add_argument("--classifier", help="classifier pools: {input, output} as JSON")
    pu.set_defaults(func=guarded(pools_update))
    for action, fn in (("pause", pools_pause), ("resume", pools_resume)):
        p = common(pools.add_parser(action, help=f"{action} a pool"))
        p.add_argument("name")
        p.set_defaults(func=guarded(fn))
    for action in ("archive", "unarchive"):
        p = common(spaces.add_parser(action, help=f"{action} a space"))
        p.add_argument("key")
        p.set_defaults(func=guarded(spaces_archive))
