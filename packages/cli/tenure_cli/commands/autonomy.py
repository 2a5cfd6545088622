"""Autonomy: a job blocks its task, delegates work, notes its usage (`tenure worker
block|delegate|usage`); operators block, list, unblock, recover, approve, reject and cancel tasks
(`tenure tasks …`)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from tenure_cli.common import (
    Groups,
    UsageError,
    duration_seconds,
    guarded,
    lease_client,
    mark_reported,
    noted_usage,
    operator_client,
    output_option,
    service_options,
    show,
    usage_file,
)
from tenure_cli.listing import fetch, list_options, show_list

BUCKETS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
BLOCK_COLUMNS = ["id", "kind", "state", "reason", "created_at", "expires_at", "closed_by"]
BLOCK_CHECK = "see the task's blocks with `tenure tasks blocks TASK` before trying again"
DELEGATE_CHECK = "look for the task with `tenure tasks list` before delegating it again"
RECOVER_CHECK = "see where the task is with `tenure tasks get {id}`"


def _own_task(client: Any, lease_id: str, token: str) -> str:
    path = os.environ.get("TENURE_PAYLOAD_FILE")
    payload = (
        json.loads(Path(path).read_text())
        if path and Path(path).exists()
        else client.payload(lease_id, token)
    )
    task = (payload.get("lease") or {}).get("task") or {}
    if not task.get("id"):
        raise UsageError("this lease is not for a task; pass --task")
    return str(task["id"])


# ------------------------------------------------------------------- inside a job


def worker_block(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client(worker_routes=False)
    own = _own_task(client, lease_id, token)
    task_id = args.task or own
    body: dict[str, Any] = {"kind": args.kind, "reason": args.reason}
    if args.expires_in is not None:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    _, answer = client.call("POST", f"/tasks/{task_id}/blocks", body, token)
    if task_id == own:
        # Blocking its own task released the lease: the runner has nothing left to report.
        mark_reported()
    return show(answer["block"], args)


def worker_delegate(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client(worker_routes=False)
    payload_lease = _payload_lease(client, lease_id, token)
    body: dict[str, Any] = {"space": payload_lease["space"], "title": args.title}
    for name in ("body", "pool", "concurrency_key"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.no_wake_creator:
        body["wake_creator"] = False
    if args.priority is not None:
        body["priority"] = args.priority
    if args.expires_in is not None:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    _, answer = client.call("POST", "/tasks", body, token)
    return show(answer, args)


def _payload_lease(client: Any, lease_id: str, token: str) -> dict[str, Any]:
    path = os.environ.get("TENURE_PAYLOAD_FILE")
    payload = (
        json.loads(Path(path).read_text())
        if path and Path(path).exists()
        else client.payload(lease_id, token)
    )
    return dict(payload["lease"])


def worker_usage(args: argparse.Namespace) -> int:
    """Add to the job's usage; `worker complete` (or the runner's own report) sends it."""
    path = usage_file()
    usage: dict[str, Any] = noted_usage() or {}
    for bucket in BUCKETS:
        more = getattr(args, bucket)
        if more is not None:
            if more < 0:
                raise UsageError(f"--{bucket.replace('_', '-')}: 0 or more")
            usage[bucket] = int(usage.get(bucket, 0)) + more
    if args.cost_status is not None:
        cost = {
            "status": args.cost_status,
            "source": args.cost_source or "worker",
            "currency": args.currency,
            "amount": args.cost_amount,
        }
        before = usage.get("cost")
        if before and cost["amount"] is not None and before.get("amount") is not None:
            same = all(before.get(k) == cost[k] for k in ("status", "source", "currency"))
            if not same:
                raise UsageError("a lease reports one cost: same currency, status and source")
            cost["amount"] = before["amount"] + cost["amount"]
        usage["cost"] = {k: v for k, v in cost.items() if v is not None}
    path.write_text(json.dumps(usage))
    return show(usage, args)


# ----------------------------------------------------------------------- operators


def tasks_block(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"kind": args.kind, "reason": args.reason}
    if args.expires_in is not None:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/blocks", body)
    return show(answer["block"], args)


def tasks_blocks(args: argparse.Namespace) -> int:
    params = {"all": "true" if args.all else None}
    listed = fetch(operator_client(args), f"/tasks/{args.id}/blocks", params, "blocks", args)
    return show_list(listed, args, BLOCK_COLUMNS)


def tasks_unblock(args: argparse.Namespace) -> int:
    body = {"note": args.note} if args.note else {}
    path = f"/tasks/{args.id}/blocks/{args.block_id}/clear"
    _, answer = operator_client(args).call("POST", path, body)
    return show(answer["block"], args)


def tasks_recover(args: argparse.Namespace) -> int:
    body = {"note": args.note}
    _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/recover", body)
    return show(answer, args)


def tasks_approve(args: argparse.Namespace) -> int:
    body = {"note": args.note} if args.note else {}
    _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/approve", body)
    return show(answer, args)


def tasks_reject(args: argparse.Namespace) -> int:
    body = {"note": args.note}
    _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/reject", body)
    return show(answer, args)


def tasks_cancel(args: argparse.Namespace) -> int:
    body = {"reason": args.reason, "subtree": args.subtree}
    _, answer = operator_client(args).call("POST", f"/tasks/{args.id}/cancel", body)
    return show(answer, args)


KINDS = ["transient", "dependency_external", "needs_input", "error"]


def add_commands(groups: Groups) -> None:
    _add_worker_commands(groups["worker"])
    _add_task_commands(groups["tasks"])


def _add_worker_commands(wsub: Any) -> None:
    block = wsub.add_parser("block", help="inside a job: block its task (releases the lease)")
    block.add_argument("--kind", choices=KINDS, required=True, help="what it waits on")
    block.add_argument("--reason", required=True, help="why, in words")
    block.add_argument("--expires-in", help="transient only: 90s, 5m, 2h")
    block.add_argument("--task", help="another task this lease may block (one it filed)")
    output_option(block)
    block.set_defaults(func=guarded(worker_block, BLOCK_CHECK))

    delegate = wsub.add_parser("delegate", help="inside a job: file a task it will hear back on")
    delegate.add_argument("--title", required=True, help="one line")
    delegate.add_argument("--body", help="what the task is about")
    delegate.add_argument("--pool", help="enqueue at once on this pool")
    delegate.add_argument(
        "--concurrency-key", help="its runs count against the pool's max_active_per_key by this"
    )
    delegate.add_argument(
        "--no-wake-creator", action="store_true", help="do not wake this lease when it ends"
    )
    delegate.add_argument("--priority", type=int, help="0-9, higher claimed first (default 5)")
    delegate.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="cancel its pending lease (queue_timeout) if not claimed within this (90s, 10m)",
    )
    output_option(delegate)
    delegate.set_defaults(func=guarded(worker_delegate, DELEGATE_CHECK))

    usage = wsub.add_parser("usage", help="inside a job: add to the usage its completion reports")
    for bucket in BUCKETS:
        flag = bucket.replace("_", "-")
        usage.add_argument(f"--{flag}", dest=bucket, type=int, help=f"{flag} to add")
    usage.add_argument("--cost-amount", type=float, help="money to add, in --currency")
    usage.add_argument("--currency", help="e.g. USD")
    usage.add_argument(
        "--cost-status",
        choices=["actual", "estimated", "included", "unknown"],
        help="how sure the cost is",
    )
    usage.add_argument("--cost-source", help="who says so (default: worker)")
    output_option(usage)
    usage.set_defaults(func=guarded(worker_usage))


def _add_task_commands(tsub: Any) -> None:
    tb = service_options(tsub.add_parser("block", help="block a task"))
    tb.add_argument("id", help="the task's id or key")
    tb.add_argument("--kind", choices=KINDS, required=True, help="what it waits on")
    tb.add_argument("--reason", required=True, help="why, in words")
    tb.add_argument("--expires-in", help="transient only: 90s, 5m, 2h")
    tb.set_defaults(func=guarded(tasks_block, BLOCK_CHECK))
    tl = service_options(
        tsub.add_parser("blocks", help="a task's open blocks (--all: every one kept)")
    )
    tl.add_argument("id", help="the task's id or key")
    list_options(tl, "blocks", all_help="every block kept, the cleared ones too (every page)")
    tl.set_defaults(func=guarded(tasks_blocks))
    tu = service_options(tsub.add_parser("unblock", help="clear one block"))
    tu.add_argument("id", help="the task's id or key")
    tu.add_argument("block_id", help="the block's id")
    tu.add_argument("--note", help="why it may go on")
    tu.set_defaults(func=guarded(tasks_unblock, BLOCK_CHECK))
    tr = service_options(tsub.add_parser("recover", help="an escalated task back to ready"))
    tr.add_argument("id", help="the task's id or key")
    tr.add_argument("--note", required=True, help="why the task may go on (the API needs one)")
    tr.set_defaults(func=guarded(tasks_recover, RECOVER_CHECK))
    ta = service_options(tsub.add_parser("approve", help="let a task awaiting approval run"))
    ta.add_argument("id", help="the task's id or key")
    ta.add_argument("--note", help="why it may run")
    ta.set_defaults(func=guarded(tasks_approve, RECOVER_CHECK))
    tj = service_options(tsub.add_parser("reject", help="cancel a task awaiting approval"))
    tj.add_argument("id", help="the task's id or key")
    tj.add_argument("--note", required=True, help="why it is not to run (the API needs one)")
    tj.set_defaults(func=guarded(tasks_reject, RECOVER_CHECK))
    tc = service_options(
        tsub.add_parser("cancel", help="cancel a task (and with --subtree all under it)")
    )
    tc.add_argument("id", help="the task's id")
    tc.add_argument("--reason", required=True, help="why the work is to stop (1-500 characters)")
    tc.add_argument(
        "--subtree", action="store_true", help="cancel every task under it too, at any depth"
    )
    tc.set_defaults(func=guarded(tasks_cancel, RECOVER_CHECK))
