"""Operator commands for the task graph, the scheduler and recovery: `tenure leases
release|fail|retry`, `tenure tasks update|pause|resume`, `tenure inspect`, `tenure scheduler`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tenure_cli.common import (
    FAILED,
    OK,
    Groups,
    fields,
    guarded,
    operator_client,
    service_options,
    show,
    table,
)
from tenure_cli.listing import fetch, list_options, show_list

FORCE_COLUMNS = ["lease_id", "ok", "code", "lease.state", "lease.end_reason", "message"]
FORCE_CHECK = "see where each went with `tenure leases get ID` before forcing them again"
RETRY_CHECK = "look for the new run with `tenure inspect {id}` before retrying again"
TASK_CHECK = "see where it is with `tenure tasks get {id}`"


def _force(kind: str, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"lease_ids": args.ids}
    if args.reason is not None:
        body["reason"] = args.reason
    _, answer = operator_client(args).call("POST", f"/leases/bulk/{kind}", body)
    rows = answer["results"]
    if args.output == "json":
        show(answer, args)  # {results: [...]}, as the service answered
    else:
        table(rows, args, FORCE_COLUMNS)
    # Non-zero when any row failed, so a script can retry only those rows.
    return OK if all(row["ok"] for row in rows) else FAILED


def leases_release(args: argparse.Namespace) -> int:
    return _force("release", args)


def leases_fail(args: argparse.Namespace) -> int:
    return _force("fail", args)


def leases_retry(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("POST", f"/leases/{args.id}/retry")
    return show(answer["lease"], args)


def inspect(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/inspect/{args.id}")
    if args.output == "json":
        return show(answer, args)
    task, lease = answer.get("task") or {}, answer.get("current_lease") or {}
    return fields(
        [
            ("next_action", [answer["next_action"]]),
            ("task", [f"{task.get('key')} {task.get('status')}" if task else "none"]),
            ("current_lease", [f"{lease.get('id')} {lease.get('state')}" if lease else "none"]),
            ("scheduler", [_holds(answer["scheduler"])]),
            ("diagnostics", [_diagnostic(d) for d in answer["diagnostics"]] or ["none"]),
            ("recent_events", [", ".join(e["type"] for e in answer["recent_events"]) or "none"]),
            ("as_of", [answer["as_of"]]),
        ]
    )


def _diagnostic(found: dict[str, Any]) -> str:
    """One thing inspect found wrong, on one line: `stuck: <what> (since <when>)`."""
    since = f" (since {found['since']})" if found.get("since") else ""
    return f"{found['code']}: {found['message']}{since}"


def _holds(scheduler: dict[str, Any]) -> str:
    """What holds the task back, in words: the scheduler, a pause of the task or an
    ancestor, a park for attention; `not paused` when nothing does."""
    held = []
    if scheduler.get("paused"):
        held.append("scheduler paused")
    if scheduler.get("effective_paused"):
        by = scheduler.get("paused_by_task_id")
        held.append(f"task paused by {by}" if by else "task paused")
    if scheduler.get("parked"):
        held.append("parked for attention")
    return "; ".join(held) or "not paused"


def tasks_update(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.auto_enqueue_on_ready is not None:
        body["auto_enqueue_on_ready"] = args.auto_enqueue_on_ready
    if args.pool is not None:
        body["pool"] = args.pool
    _, answer = operator_client(args).call("PATCH", f"/tasks/{args.id}", body)
    return show(answer, args)


def _task_action(action: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/{action}")
        return show(answer, args)

    return run


def _scheduler(args: argparse.Namespace) -> int:
    client = operator_client(args)
    if args.scheduler_command == "status":
        _, answer = client.call("GET", "/scheduler")
    elif args.scheduler_command == "backlog":
        paused = "true" if args.include_paused else "false"
        params = {"space": args.space, "include_paused": paused}
        listed = fetch(client, "/scheduler/backlog", params, "leases", args)
        cols = ["id", "state", "pool", "task.key", "effective_paused", "paused_by_task_id"]
        return show_list(listed, args, cols)
    elif args.scheduler_command == "drain":
        # Pausing sets a flag that a repeat leaves as it is: the three are safe to retry.
        body = {"timeout_seconds": args.timeout}
        _, answer = client.call("POST", "/scheduler/drain", body, idempotent=True)
    else:
        path = f"/scheduler/{args.scheduler_command}"
        _, answer = client.call("POST", path, idempotent=True)
    return show(answer, args)


def add_commands(groups: Groups) -> None:
    leases, tasks = groups["leases"], groups["tasks"]
    for kind, fn, needs in (("release", leases_release, False), ("fail", leases_fail, True)):
        force = service_options(
            leases.add_parser(kind, help=f"force {kind} leases (one row per id)")
        )
        force.add_argument("ids", nargs="+", metavar="ID", help="the leases' ids")
        force.add_argument("--reason", required=needs, help="why, for the lease's record")
        force.set_defaults(func=guarded(fn, FORCE_CHECK))
    retry = service_options(leases.add_parser("retry", help="a new run after an ended lease"))
    retry.add_argument("id", help="the ended lease's id")
    retry.set_defaults(func=guarded(leases_retry, RETRY_CHECK))

    update = service_options(
        tasks.add_parser("update", help="toggle auto-enqueue on ready, its pool")
    )
    update.add_argument("id", help="the task's id or key")
    update.add_argument(
        "--auto-enqueue-on-ready",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="enqueue it on its pool once its dependencies complete",
    )
    update.add_argument("--pool", help="the pool it enqueues on")
    update.set_defaults(func=guarded(tasks_update, TASK_CHECK))
    for action in ("pause", "resume"):
        one = service_options(tasks.add_parser(action, help=f"{action} a task and its descendants"))
        one.add_argument("id", help="the task's id or key")
        one.set_defaults(func=guarded(_task_action(action), TASK_CHECK))

    look = service_options(
        groups.top.add_parser("inspect", help="a task's or lease's triage snapshot")
    )
    look.add_argument("id", help="a task's id or key, or a lease's id")
    look.set_defaults(func=guarded(inspect))

    ssub = groups["scheduler"]
    for name, help_ in (
        ("status", "the scheduler's state"),
        ("pause", "pause the scheduler"),
        ("resume", "resume the scheduler"),
    ):
        service_options(ssub.add_parser(name, help=help_)).set_defaults(func=guarded(_scheduler))
    backlog = service_options(ssub.add_parser("backlog", help="a space's leases waiting to run"))
    backlog.add_argument("--space", required=True, help="the space")
    backlog.add_argument(
        "--include-paused", action="store_true", help="also the leases of paused tasks"
    )
    list_options(backlog, "leases")
    backlog.set_defaults(func=guarded(_scheduler))
    drain = service_options(
        ssub.add_parser("drain", help="pause, then wait for the running leases to end")
    )
    drain.add_argument("--timeout", type=float, default=20, help="seconds to wait at most")
    drain.set_defaults(func=guarded(_scheduler))
