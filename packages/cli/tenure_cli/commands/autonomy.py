"""Autonomy: a job blocks its task, delegates work, notes its usage (`tenure worker
block|delegate|usage`); operators block, list, unblock, recover, approve, reject and cancel tasks
(`tenure tasks …`)."""

from __future__ import annotations

import argparse
import json
import math
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
# What the service stores of a completion's usage (app/usage.py): tokens per bucket and a
# cost's amount, each 0 to these. A larger number noted here would fail every completion.
MAX_TOKENS = 10**15
MAX_AMOUNT = 10**9
# The cost statuses that carry an amount (and so a currency); the others carry none.
PRICED = ("actual", "estimated")
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


def _tokens(text: str) -> int:
    """A count of tokens to add: a whole number the service can store."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_TOKENS:
        raise argparse.ArgumentTypeError(f"0 to {MAX_TOKENS:,} tokens, not {text!r}")
    return value


def _amount(text: str) -> float:
    """Money to add: a finite number the service can store (NaN or infinity would make the
    usage file a JSON no completion can send)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 <= value <= MAX_AMOUNT):
        raise argparse.ArgumentTypeError(f"0 to {MAX_AMOUNT:,}, not {text!r}")
    return value


def _cost(args: argparse.Namespace, before: Any) -> dict[str, Any] | None:
    """The cost the usage carries after this call: the one noted before, unless this call
    gives one (its amount added to the noted one's when both are the same kind of cost).
    Refused here, naming the option, when the service would refuse it at completion."""
    given = {"--cost-amount": args.cost_amount, "--currency": args.currency}
    given["--cost-source"] = args.cost_source
    if args.cost_status is None:
        # No default status: reading a bare amount as "actual" would claim a certainty the
        # job never stated, and dropping it would lose the cost without a word.
        named = [option for option, value in given.items() if value is not None]
        if named:
            raise UsageError(
                f"{named[0]} needs --cost-status (actual, estimated, included, unknown)"
            )
        return dict(before) if isinstance(before, dict) else None
    cost = {
        "status": args.cost_status,
        "source": args.cost_source or "worker",
        "currency": args.currency,
        "amount": args.cost_amount,
    }
    if isinstance(before, dict) and cost["amount"] is not None and before.get("amount") is not None:
        same = all(before.get(k) == cost[k] for k in ("status", "source", "currency"))
        if not same:
            raise UsageError("a lease reports one cost: same currency, status and source")
        cost["amount"] = before["amount"] + cost["amount"]
        if not cost["amount"] <= MAX_AMOUNT:
            raise UsageError(f"--cost-amount: the cost noted would pass {MAX_AMOUNT:,}")
    if cost["currency"] is not None and not 1 <= len(cost["currency"]) <= 16:
        raise UsageError("--currency: a currency code of 1 to 16 characters, e.g. USD")
    if not 1 <= len(cost["source"]) <= 100:
        raise UsageError("--cost-source: who priced it, 1 to 100 characters")
    if cost["status"] not in PRICED and cost["amount"] is not None:
        raise UsageError(f"--cost-status {cost['status']}: a cost that carries no amount")
    return {k: v for k, v in cost.items() if v is not None}


def worker_usage(args: argparse.Namespace) -> int:
    """Add to the job's usage; `worker complete` (or the runner's own report) sends it."""
    path = usage_file()
    usage: dict[str, Any] = noted_usage() or {}
    for bucket in BUCKETS:
        more = getattr(args, bucket)
        if more is not None:
            total = int(usage.get(bucket, 0)) + more
            if total > MAX_TOKENS:
                flag = bucket.replace("_", "-")
                raise UsageError(f"--{flag}: the {flag} noted would pass {MAX_TOKENS:,}")
            usage[bucket] = total
    cost = _cost(args, usage.get("cost"))
    if cost is not None:
        usage["cost"] = cost
    path.write_text(json.dumps(usage, allow_nan=False))
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
        usage.add_argument(f"--{flag}", dest=bucket, type=_tokens, help=f"{flag} to add")
    usage.add_argument("--cost-amount", type=_amount, help="money to add, in --currency")
    usage.add_argument("--currency", help="e.g. USD")
    usage.add_argument(
        "--cost-status",
        choices=["actual", "estimated", "included", "unknown"],
        help="how sure the cost is: every cost option needs it (actual and estimated "
        "with --cost-amount and --currency; included and unknown carry no amount)",
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
