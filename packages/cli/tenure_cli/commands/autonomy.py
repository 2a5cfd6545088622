"""Commands for autonomy: a job blocks its task, delegates work, notes its usage; operators
block, list, unblock and recover tasks."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from tenure_cli.commands.worker import (
    UsageError,
    _env,
    _lease_client,
    _mark_reported,
    _operator,
    _print,
    _table,
    guarded,
)

BUCKETS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
BLOCK_COLUMNS = ["id", "kind", "state", "reason", "created_at", "expires_at", "closed_by"]


def duration_seconds(text: str) -> int:
    """`90`, `90s`, `5m`, `2h`, `1d` → seconds."""
    found = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if not found:
        raise UsageError(f"--expires-in: {text!r} is not a duration like 90s, 5m, 2h or 1d")
    return int(found.group(1)) * _UNITS[found.group(2) or "s"]


def usage_file() -> Path:
    """Where `worker usage` keeps the job's usage until its completion sends it."""
    given = os.environ.get("TENURE_USAGE_FILE")
    if given:
        return Path(given)
    marker = os.environ.get("TENURE_REPORT_MARKER")
    if marker:
        return Path(marker.removesuffix(".reported") + ".usage")
    raise UsageError("no usage file: run inside a job, or set TENURE_USAGE_FILE")


def noted_usage() -> dict[str, Any] | None:
    """The usage noted so far by `worker usage`, or None."""
    try:
        path = usage_file()
    except UsageError:
        return None
    if not path.exists():
        return None
    found = json.loads(path.read_text())
    return found if isinstance(found, dict) else None


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
    client, lease_id, token = _lease_client()
    own = _own_task(client, lease_id, token)
    task_id = args.task or own
    body: dict[str, Any] = {"kind": args.kind, "reason": args.reason}
    if args.expires_in:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    _, answer = client.call("POST", f"/tasks/{task_id}/blocks", body, token)
    if task_id == own:
        # Blocking its own task released the lease: the runner has nothing left to report.
        _mark_reported()
    return _print(answer, args)


def worker_delegate(args: argparse.Namespace) -> int:
    client, lease_id, token = _lease_client()
    payload_lease = _payload_lease(client, lease_id, token)
    body: dict[str, Any] = {"space": payload_lease["space"], "title": args.title}
    for name in ("body", "pool"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.no_wake_creator:
        body["wake_creator"] = False
    _, answer = client.call("POST", "/tasks", body, token)
    return _print(answer, args)


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
    return _print(usage, args)


# ----------------------------------------------------------------------- operators


def tasks_block(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"kind": args.kind, "reason": args.reason}
    if args.expires_in:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    _, answer = _operator(args).call("POST", f"/tasks/{args.id}/blocks", body)
    return _print(answer, args)


def tasks_blocks(args: argparse.Namespace) -> int:
    query = "?all=true" if args.all else ""
    _, answer = _operator(args).call("GET", f"/tasks/{args.id}/blocks{query}")
    return _table(answer["blocks"], args, BLOCK_COLUMNS)


def tasks_unblock(args: argparse.Namespace) -> int:
    body = {"note": args.note} if args.note else {}
    path = f"/tasks/{args.id}/blocks/{args.block_id}/clear"
    _, answer = _operator(args).call("POST", path, body)
    return _print(answer, args)


def tasks_recover(args: argparse.Namespace) -> int:
    body = {"note": args.note}
    _, answer = _operator(args).call("POST", f"/tasks/{args.id}/recover", body)
    return _print(answer, args)


KINDS = ["transient", "dependency_external", "needs_input", "error"]


def add_autonomy_commands(wsub: Any, tsub: Any, common: Any) -> None:
    block = wsub.add_parser("block", help="inside a job: block its task (releases the lease)")
    block.add_argument("--kind", choices=KINDS, required=True)
    block.add_argument("--reason", required=True)
    block.add_argument("--expires-in", help="transient only: 90s, 5m, 2h")
    block.add_argument("--task", help="another task this lease may block (one it filed)")
    block.add_argument("-o", "--output", choices=["table", "json"], default="json")
    block.set_defaults(func=guarded(worker_block))

    delegate = wsub.add_parser("delegate", help="inside a job: file a task it will hear back on")
    delegate.add_argument("--title", required=True)
    delegate.add_argument("--body")
    delegate.add_argument("--pool", help="enqueue at once on this pool")
    delegate.add_argument("--no-wake-creator", action="store_true")
    delegate.add_argument("-o", "--output", choices=["table", "json"], default="json")
    delegate.set_defaults(func=guarded(worker_delegate))

    usage = wsub.add_parser("usage", help="inside a job: add to the usage its completion reports")
    for bucket in BUCKETS:
        usage.add_argument(f"--{bucket.replace('_', '-')}", dest=bucket, type=int)
    usage.add_argument("--cost-amount", type=float)
    usage.add_argument("--currency")
    usage.add_argument("--cost-status", choices=["actual", "estimated", "included", "unknown"])
    usage.add_argument("--cost-source")
    usage.add_argument("-o", "--output", choices=["table", "json"], default="json")
    usage.set_defaults(func=guarded(worker_usage))

    tb = common(tsub.add_parser("block", help="block a task"))
    tb.add_argument("id")
    tb.add_argument("--kind", choices=KINDS, required=True)
    tb.add_argument("--reason", required=True)
    tb.add_argument("--expires-in")
    tb.set_defaults(func=guarded(tasks_block))
    tl = common(tsub.add_parser("blocks", help="a task's open blocks (--all: every one kept)"))
    tl.add_argument("id")
    tl.add_argument("--all", action="store_true")
    tl.set_defaults(func=guarded(tasks_blocks))
    tu = common(tsub.add_parser("unblock", help="clear one block"))
    tu.add_argument("id")
    tu.add_argument("block_id")
    tu.add_argument("--note")
    tu.set_defaults(func=guarded(tasks_unblock))
    tr = common(tsub.add_parser("recover", help="an escalated task back to ready"))
    tr.add_argument("id")
    tr.add_argument("--note", required=True, help="why the task may go on (the API needs one)")
    tr.set_defaults(func=guarded(tasks_recover))


__all__ = ["_env", "add_autonomy_commands", "noted_usage"]
