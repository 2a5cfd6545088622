"""Operator commands for the task graph, the scheduler and recovery."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tenure_cli.commands.worker import _operator, _print, _table, guarded

FORCE_COLUMNS = ["lease_id", "ok", "code", "lease.state", "lease.end_reason", "message"]


def _force(kind: str, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"lease_ids": args.ids}
    if args.reason is not None:
        body["reason"] = args.reason
    _, answer = _operator(args).call("POST", f"/leases/bulk/{kind}", body)
    rows = answer["results"]
    _table(rows, args, FORCE_COLUMNS)
    # Non-zero when any row failed, so a script can retry only those rows.
    return 0 if all(row["ok"] for row in rows) else 1


def leases_release(args: argparse.Namespace) -> int:
    return _force("release", args)


def leases_fail(args: argparse.Namespace) -> int:
    return _force("fail", args)


def leases_retry(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("POST", f"/leases/{args.id}/retry")
    return _print(answer, args)


def inspect(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("GET", f"/inspect/{args.id}")
    if args.output == "json":
        return _print(answer, args)
    task, lease = answer.get("task") or {}, answer.get("current_lease") or {}
    lines = {
        "next_action": answer["next_action"],
        "task": f"{task.get('key')} {task.get('status')}" if task else "",
        "current_lease": f"{lease.get('id')} {lease.get('state')}" if lease else "",
        "scheduler": answer["scheduler"],
        **{f"diagnostics.{k}": v for k, v in answer["diagnostics"].items()},
        "recent_events": [e["type"] for e in answer["recent_events"]],
        "as_of": answer["as_of"],
    }
    return _print(lines, args)


def tasks_update(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.auto_enqueue_on_ready is not None:
        body["auto_enqueue_on_ready"] = args.auto_enqueue_on_ready
    if args.pool is not None:
        body["pool"] = args.pool
    _, answer = _operator(args).call("PATCH", f"/tasks/{args.id}", body)
    return _print(answer, args)


def _task_action(action: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        _, answer = _operator(args).call("POST", f"/tasks/{args.id}/{action}")
        return _print(answer, args)

    return run


def _scheduler(args: argparse.Namespace) -> int:
    client = _operator(args)
    if args.scheduler_command == "status":
        _, answer = client.call("GET", "/scheduler")
    elif args.scheduler_command == "backlog":
        query = f"?space={args.space}&include_paused={'true' if args.include_paused else 'false'}"
        _, answer = client.call("GET", f"/scheduler/backlog{query}")
        cols = ["id", "state", "pool", "task.key", "effective_paused", "paused_by_task_id"]
        return _table(answer["leases"], args, cols)
    elif args.scheduler_command == "drain":
        _, answer = client.call("POST", "/scheduler/drain", {"timeout_seconds": args.timeout})
    else:
        _, answer = client.call("POST", f"/scheduler/{args.scheduler_command}")
    return _print(answer, args)


def add_graph_commands(
    sub: Any,
    leases: Any,
    tasks: Any,
    create: argparse.ArgumentParser,
    common: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
) -> None:
    for kind, fn, needs in (("release", leases_release, False), ("fail", leases_fail, True)):
        force = common(leases.add_parser(kind, help=f"force {kind} leases (one row per id)"))
        force.add_argument("ids", nargs="+", metavar="ID")
        force.add_argument("--reason", required=needs)
        force.set_defaults(func=guarded(fn))
    retry = common(leases.add_parser("retry", help="a new run after an ended lease"))
    retry.add_argument("id")
    retry.set_defaults(func=guarded(leases_retry))

    create.add_argument("--parent", dest="parent_id")
    create.add_argument("--depends-on", nargs="+", default=None, metavar="TASK_ID")
    create.add_argument("--auto-enqueue-on-ready", action="store_true", default=None)
    update = common(tasks.add_parser("update", help="toggle auto-enqueue on ready, its pool"))
    update.add_argument("id")
    update.add_argument(
        "--auto-enqueue-on-ready", action=argparse.BooleanOptionalAction, default=None
    )
    update.add_argument("--pool")
    update.set_defaults(func=guarded(tasks_update))
    for action in ("pause", "resume"):
        one = common(tasks.add_parser(action, help=f"{action} a task and its descendants"))
        one.add_argument("id")
        one.set_defaults(func=guarded(_task_action(action)))

    look = common(sub.add_parser("inspect", help="a task's or lease's triage snapshot"))
    look.add_argument("id")
    look.set_defaults(func=guarded(inspect))

    scheduler = sub.add_parser("scheduler", help="the scheduler: status, pause, drain")
    ssub = scheduler.add_subparsers(dest="scheduler_command", required=True)
    for name in ("status", "pause", "resume"):
        common(ssub.add_parser(name)).set_defaults(func=guarded(_scheduler))
    backlog = common(ssub.add_parser("backlog"))
    backlog.add_argument("--space", required=True)
    backlog.add_argument("--include-paused", action="store_true")
    backlog.set_defaults(func=guarded(_scheduler))
    drain = common(ssub.add_parser("drain"))
    drain.add_argument("--timeout", type=float, default=20)
    drain.set_defaults(func=guarded(_scheduler))
