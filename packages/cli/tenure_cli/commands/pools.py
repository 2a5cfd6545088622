"""`tenure pools create|list|show|update|pause|resume` and `tenure spaces archive|unarchive`:
thin front ends over the client."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from tenure_cli.common import (
    Groups,
    UsageError,
    guarded,
    json_arg,
    operator_client,
    service_options,
    show,
)
from tenure_cli.listing import (
    fetch,
    gather,
    list_options,
    no_cursor_without,
    show_list,
    visible_spaces,
)

POOL_CHECK = "run it again: already_exists means the first was made"
UPDATE_CHECK = "see what it holds now with `tenure pools show {name}`"
STATE_CHECK = "see where it is with `tenure pools show {name}`"


def _pool_path(name: str, action: str = "") -> str:
    return f"/pools/{quote(name, safe='')}{action}"


def kind_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`agent` from --model/--effort and `classifier` from --classifier, as the body carries
    them (an agent pool needs a model, a classifier pool its settings)."""
    body: dict[str, Any] = {}
    if args.model is not None or args.effort is not None:
        if args.model is None:
            raise UsageError("--effort needs --model (the agent settings go together)")
        body["agent"] = {"model": args.model}
        if args.effort is not None:
            body["agent"]["effort"] = args.effort
    if args.classifier is not None:
        body["classifier"] = json_arg(args.classifier, "--classifier")
    return body


def retry_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`retry` from --retry-on-failure and the --retry-* backoff options (left out: the
    service's defaults)."""
    backoff = {
        key: getattr(args, f"retry_{key}")
        for key in ("initial_seconds", "multiplier", "max_seconds")
        if getattr(args, f"retry_{key}") is not None
    }
    if args.retry_jitter is not None:
        backoff["jitter"] = args.retry_jitter == "yes"
    if not args.retry_on_failure and not backoff:
        return {}
    retry: dict[str, Any] = {"on_failure": bool(args.retry_on_failure)}
    if backoff:
        retry["backoff"] = backoff
    return {"retry": retry}


# Keyed concurrency and the rate limit (create and update; null: unlimited).
CONTROLS = ("max_active_per_key", "max_claims_per_minute")


def control_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`max_active_per_key` / `max_claims_per_minute` from their options; on update,
    --per-key-unlimited and --rate-unlimited send a null (unlimited again)."""
    body = {key: getattr(args, key) for key in CONTROLS if getattr(args, key) is not None}
    for flag, key in (("per_key_unlimited", CONTROLS[0]), ("rate_unlimited", CONTROLS[1])):
        if getattr(args, flag, False):
            if key in body:
                raise UsageError(f"--{key.replace('_', '-')} and --{flag.replace('_', '-')} clash")
            body[key] = None
    return body


def pools_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "space": args.space, "kind": args.kind}
    for key in (
        "max_active",
        "renew_seconds",
        "grace_seconds",
        "toleration_seconds",
        "on_expiry",
        "max_run_seconds",
    ):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    body.update(control_settings(args))
    body.update(kind_settings(args))
    body.update(retry_settings(args))
    _, answer = operator_client(args).call("POST", "/pools", body)
    return show(answer, args)


POOL_COLUMNS = ["name", "space", "display_name", "kind", "version", "paused", "max_active"]
POOL_COLUMNS += ["active", "max_active_per_key", "max_claims_per_minute"]


def pools_list(args: argparse.Namespace) -> int:
    """One space's pools (--space), else those of every space the token may see."""
    client = operator_client(args)
    if args.space:
        listed = fetch(client, "/pools", {"space": args.space}, "pools", args)
    else:
        no_cursor_without(args, "--space")
        targets = [("/pools", {"space": key}) for key in visible_spaces(client)]
        listed = gather(client, targets, "pools", args, "spaces (narrow with --space)")
    return show_list(listed, args, POOL_COLUMNS)


def pools_show(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", _pool_path(args.name))
    return show(answer["pool"], args)


def pools_update(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    for key in (
        "display_name",
        "max_active",
        "renew_seconds",
        "grace_seconds",
        "toleration_seconds",
        "on_expiry",
        "max_run_seconds",
    ):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    if args.unlimited:
        body["max_active"] = None
    if args.no_run_timeout:
        body["max_run_seconds"] = None
    if args.keeps_logs is not None:
        body["keeps_logs"] = args.keeps_logs == "yes"
    body.update(control_settings(args))
    body.update(kind_settings(args))
    _, answer = operator_client(args).call("PATCH", _pool_path(args.name), body)
    return show(answer["pool"], args)


def pools_pause(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("POST", _pool_path(args.name, "/pause"))
    return show(answer["pool"], args)


def pools_resume(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("POST", _pool_path(args.name, "/resume"))
    return show(answer["pool"], args)


def spaces_archive(args: argparse.Namespace) -> int:
    path = f"/spaces/{quote(args.key, safe='')}/{args.spaces_command}"
    _, answer = operator_client(args).call("POST", path)
    return show(answer["space"], args)


def _timing_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-active", type=int, help="leases running at once on the pool")
    p.add_argument("--renew-seconds", type=int, help="how often a worker heartbeats (default 10)")
    p.add_argument(
        "--grace-seconds", type=int, help="a worker silent this long lists as unreachable"
    )
    p.add_argument(
        "--toleration-seconds", type=int, help="a lease silent this long is expired (lost)"
    )
    p.add_argument(
        "--on-expiry",
        choices=["requeue", "fail"],
        help="an expired lease runs again (requeue) or ends failed (fail)",
    )
    p.add_argument(
        "--max-active-per-key", type=int, help="leases held at once per task concurrency key"
    )
    p.add_argument(
        "--max-claims-per-minute", type=int, help="claims per UTC minute; more wait or get 204"
    )
    p.add_argument(
        "--max-run-seconds",
        type=int,
        help="a lease held longer is asked to stop and ends timed_out (a task's, if smaller, wins)",
    )


def _retry_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--retry-on-failure",
        action="store_true",
        help="a failed lease with attempts left gets its next attempt after a backoff",
    )
    p.add_argument("--retry-initial-seconds", type=int, help="the first backoff (default 10)")
    p.add_argument("--retry-multiplier", type=float, help="each backoff this times the last (2)")
    p.add_argument("--retry-max-seconds", type=int, help="no backoff longer (default 600)")
    p.add_argument(
        "--retry-jitter", choices=["yes", "no"], help="wait a random part of the backoff (yes)"
    )


def add_commands(groups: Groups) -> None:
    pools = groups["pools"]
    pc = service_options(pools.add_parser("create", help="make a pool in a space"))
    pc.add_argument("--name", required=True, help="unique: workers claim from it by name")
    pc.add_argument("--space", required=True, help="the space it belongs to")
    pc.add_argument(
        "--kind",
        choices=["agent", "classifier", "command"],
        default="command",
        help="what its workers run",
    )
    _timing_options(pc)
    _retry_options(pc)
    pc.add_argument("--model", help="agent pools (required there): the model")
    pc.add_argument("--effort", help="agent pools: the effort")
    pc.add_argument("--classifier", help="classifier pools (required there): {input, output}")
    pc.set_defaults(func=guarded(pools_create, POOL_CHECK))

    pl = service_options(
        pools.add_parser("list", help="the pools of a space, or of every space you may see")
    )
    pl.add_argument("--space", help="only this space's pools (default: every visible space's)")
    list_options(pl, "pools")
    pl.set_defaults(func=guarded(pools_list))
    ps = service_options(pools.add_parser("show", help="one pool"))
    ps.add_argument("name", help="the pool's name")
    ps.set_defaults(func=guarded(pools_show))
    pu = service_options(pools.add_parser("update", help="change a pool's settings"))
    pu.add_argument("name", help="the pool's name")
    pu.add_argument("--display-name", help="the name the board shows")
    _timing_options(pu)
    pu.add_argument("--unlimited", action="store_true", help="remove the pool's ceiling")
    pu.add_argument("--per-key-unlimited", action="store_true", help="remove the per-key ceiling")
    pu.add_argument("--rate-unlimited", action="store_true", help="remove the rate limit")
    pu.add_argument("--no-run-timeout", action="store_true", help="remove its run timeout")
    pu.add_argument("--keeps-logs", choices=["yes", "no"], help="keep its jobs' output")
    pu.add_argument("--model", help="agent pools: the model (a new version)")
    pu.add_argument("--effort", help="agent pools: the effort (a new version)")
    pu.add_argument("--classifier", help="classifier pools: {input, output} as JSON")
    pu.set_defaults(func=guarded(pools_update, UPDATE_CHECK))
    for action, fn in (("pause", pools_pause), ("resume", pools_resume)):
        p = service_options(pools.add_parser(action, help=f"{action} a pool"))
        p.add_argument("name", help="the pool's name")
        p.set_defaults(func=guarded(fn, STATE_CHECK))
    for action in ("archive", "unarchive"):
        p = service_options(groups["spaces"].add_parser(action, help=f"{action} a space"))
        p.add_argument("key", help="the space's key")
        p.set_defaults(func=guarded(spaces_archive))
