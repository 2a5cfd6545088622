"""`tenure worker …` and the operator commands: thin argparse front ends over the client."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from tenure_worker.client import ApiError, Client, Unreachable
from tenure_worker.runner import Worker, WorkerOptions

from tenure_cli.commands.pools import (
    add_pool_commands,
    condition_chip,
    display_names,
    kind_settings,
)


class UsageError(Exception):
    pass


def _env(name: str, given: str | None) -> str:
    value = given or os.environ.get(name)
    if not value:
        raise UsageError(f"{name} is not set (and no option gave it)")
    return value


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        raise UsageError(f"{what} is not valid JSON: {err}") from err


# ------------------------------------------------------------------- worker commands


def worker_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the command to run after --, e.g. tenure worker run … -- ./job.sh")
    opts = WorkerOptions(
        api=_env("TENURE_API", args.api),
        token=_env("TENURE_TOKEN", args.token),
        pool=args.pool,
        command=command,
        worker_id=args.worker_id,
        state_dir=Path(args.state_dir),
        concurrency=args.concurrency,
        once=args.once,
        kill_grace=args.kill_grace,
        lease_seconds=args.lease_seconds,
    )
    return Worker(opts).run()


def _lease_client() -> tuple[Client, str, str]:
    api = _env("TENURE_API", None)
    lease_id = _env("TENURE_LEASE_ID", None)
    token = _env("TENURE_LEASE_TOKEN", None)
    return Client(api, token), lease_id, token


def _mark_reported() -> None:
    marker = os.environ.get("TENURE_REPORT_MARKER")
    if marker:
        Path(marker).write_text("reported\n")


def worker_complete(args: argparse.Namespace) -> int:
    client, lease_id, token = _lease_client()
    body: dict[str, Any] = {"outcome": args.outcome}
    details = _json_arg(args.details, "--details")
    if details is not None:
        if not isinstance(details, dict):
            raise UsageError("--details must be a JSON object")
        body["details"] = details
    if args.created_task:
        body["created_task_ids"] = args.created_task
    result = _json_arg(args.result, "--result")
    if result is not None:
        body["result"] = result
    from tenure_cli.commands.autonomy import noted_usage

    usage = _json_arg(args.usage, "--usage") if args.usage else noted_usage()
    if usage is not None:
        body["usage"] = usage
    answer = client.complete(lease_id, token, body)
    _mark_reported()
    return _print(answer, args)


def worker_fail(args: argparse.Namespace) -> int:
    client, lease_id, token = _lease_client()
    answer = client.fail(lease_id, token, {"error": args.error})
    _mark_reported()
    return _print(answer, args)


def worker_heartbeat(args: argparse.Namespace) -> int:
    client, lease_id, token = _lease_client()
    return _print(client.heartbeat(lease_id, token), args)


def worker_payload(args: argparse.Namespace) -> int:
    path = os.environ.get("TENURE_PAYLOAD_FILE")
    if path and Path(path).exists():
        print(Path(path).read_text())
        return 0
    client, lease_id, token = _lease_client()
    print(json.dumps(client.payload(lease_id, token), indent=2))
    return 0


# ----------------------------------------------------------------- operator commands


def _operator(args: argparse.Namespace) -> Client:
    return Client(_env("TENURE_API", args.api), _env("TENURE_TOKEN", args.token))


def leases_list(args: argparse.Namespace) -> int:
    query = f"?space={args.space}&limit={args.limit}"
    if args.state:
        query += f"&state={args.state}"
    if args.pool:
        query += f"&pool={args.pool}"
    client = _operator(args)
    _, answer = client.call("GET", f"/leases{query}")
    if args.output == "table":  # the board's chip: `<display_name> (<label>)`
        names = display_names(client, args.space)
        for lease in answer["leases"]:
            lease["condition"] = condition_chip(lease, names)
    return _table(
        answer["leases"],
        args,
        [
            "id",
            "state",
            "attempt",
            "fence",
            "pool",
            "task.key",
            "worker_id",
            "timing.deadline",
            "condition",
        ],
    )


def leases_get(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("GET", f"/leases/{args.id}")
    return _print({"lease": answer}, args) if args.output == "table" else _print(answer, args)


def leases_cancel(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("POST", f"/leases/{args.id}/cancel")
    return _print(answer, args)


def tasks_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"space": args.space, "title": args.title}
    for key in ("body", "pool", "workflow", "max_attempts"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    for key in ("parent_id", "depends_on", "auto_enqueue_on_ready"):  # the task graph
        if getattr(args, key, None) is not None:
            body[key] = getattr(args, key)
    props = _json_arg(args.properties, "--properties")
    if props is not None:
        body["properties"] = props
    _, answer = _operator(args).call("POST", "/tasks", body)
    return _print(answer, args)


def tasks_list(args: argparse.Namespace) -> int:
    params = {"space": args.space, "limit": args.limit}
    if args.status:
        params["status"] = args.status
    _, answer = _operator(args).call("GET", f"/tasks?{urlencode(params)}")
    rows = [{**entry["task"], "lease": entry["lease"]} for entry in answer["tasks"]]
    return _table(rows, args, ["key", "status", "title", "lease.state", "lease.pool", "id"])


def tasks_get(args: argparse.Namespace) -> int:
    _, answer = _operator(args).call("GET", f"/tasks/{args.id}")
    return _print(answer, args)


def spaces_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"key": args.key, "name": args.name}
    if args.max_active is not None:
        body["max_active"] = args.max_active
    _, answer = _operator(args).call("POST", "/spaces", body)
    return _print(answer, args)


def pools_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "space": args.space, "kind": args.kind}
    for key in ("max_active", "renew_seconds", "grace_seconds", "toleration_seconds", "on_expiry"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    body.update(kind_settings(args))
    _, answer = _operator(args).call("POST", "/pools", body)
    return _print(answer, args)


def tokens_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "kind": args.kind}
    if args.role:
        body["role"] = args.role
    if args.spaces:
        body["spaces"] = args.spaces
    if args.pools:
        body["pools"] = args.pools
    _, answer = _operator(args).call("POST", "/tokens", body)
    return _print(answer, args)


# ------------------------------------------------------------------------- output


def _dig(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _table(rows: list[dict[str, Any]], args: argparse.Namespace, cols: list[str]) -> int:
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    cells = [[("" if _dig(r, c) is None else str(_dig(r, c))) for c in cols] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(cols)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _print(answer: Any, args: argparse.Namespace) -> int:
    if getattr(args, "output", "table") == "json" or not isinstance(answer, dict):
        print(json.dumps(answer, indent=2))
        return 0
    # An answer wrapping a lease or a task prints that record (the task when it has both);
    # a field that merely has one of those names (inspect's "task": "OPS-1 ready") is a field.
    lease, task = answer.get("lease"), answer.get("task")
    record = answer
    if isinstance(task, dict) and task and ("lease" in answer or not lease):
        record = task
    elif isinstance(lease, dict) and lease:
        record = lease
    width = max((len(k) for k in record), default=0)
    for key, value in record.items():
        if key == "token":
            continue  # printed once below, with its warning
        shown = json.dumps(value) if isinstance(value, dict | list) else value
        print(f"{key.ljust(width)}  {'' if shown is None else shown}")
    if "token" in answer and isinstance(answer["token"], str):
        print(f"{'token'.ljust(width)}  {answer['token']}   (shown once: keep it now)")
    return 0


def guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Print API errors as `code: message` and exit non-zero, never with a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ApiError as err:
            print(f"error: {err.code}: {err.message}", file=sys.stderr)
            return 1
        except Unreachable as err:
            print(f"error: unreachable: {err}", file=sys.stderr)
            return 3
        except UsageError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2

    return run


def add_commands(sub: Any) -> None:
    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--api", help="service address (or TENURE_API), e.g. http://127.0.0.1:8787")
        p.add_argument("--token", help="bearer token (or TENURE_TOKEN)")
        p.add_argument("-o", "--output", choices=["table", "json"], default="table")
        return p

    worker = sub.add_parser("worker", help="run commands under leases; report from inside a job")
    wsub = worker.add_subparsers(dest="worker_command", required=True)
    run = common(wsub.add_parser("run", help="claim leases from a pool and run CMD for each"))
    run.add_argument("--pool", required=True)
    run.add_argument("--worker-id")
    run.add_argument("--state-dir", default=".tenure-worker")
    run.add_argument("--concurrency", type=int, default=1)
    run.add_argument("--once", action="store_true", help="run at most one lease, then exit")
    run.add_argument("--kill-grace", type=float, default=10.0, help="SIGTERM → SIGKILL seconds")
    run.add_argument("--lease-seconds", type=int)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    run.set_defaults(func=guarded(worker_run))
    done = wsub.add_parser("complete", help="inside a job: complete its lease")
    done.add_argument("--outcome", choices=["success", "failure"], default="success")
    done.add_argument("--details", help="a JSON object")
    done.add_argument("--result", help="JSON: what the job produced")
    done.add_argument("--created-task", nargs="+", metavar="ID", help="tasks this lease filed")
    done.add_argument("--usage", help="a JSON object (default: what `worker usage` noted)")
    done.add_argument("-o", "--output", choices=["table", "json"], default="json")
    done.set_defaults(func=guarded(worker_complete))
    fail = wsub.add_parser("fail", help="inside a job: fail its lease")
    fail.add_argument("--error", required=True)
    fail.add_argument("-o", "--output", choices=["table", "json"], default="json")
    fail.set_defaults(func=guarded(worker_fail))
    beat = wsub.add_parser("heartbeat", help="inside a job: renew its lease now")
    beat.add_argument("-o", "--output", choices=["table", "json"], default="json")
    beat.set_defaults(func=guarded(worker_heartbeat))
    wsub.add_parser("payload", help="inside a job: print its work bundle").set_defaults(
        func=guarded(worker_payload)
    )

    leases = sub.add_parser("leases", help="operator: watch and control leases")
    lsub = leases.add_subparsers(dest="leases_command", required=True)
    ls = common(lsub.add_parser("list"))
    ls.add_argument("--space", required=True)
    ls.add_argument("--state")
    ls.add_argument("--pool")
    ls.add_argument("--limit", type=int, default=50)
    ls.set_defaults(func=guarded(leases_list))
    get = common(lsub.add_parser("get"))
    get.add_argument("id")
    get.set_defaults(func=guarded(leases_get))
    cancel = common(lsub.add_parser("cancel"))
    cancel.add_argument("id")
    cancel.set_defaults(func=guarded(leases_cancel))

    tasks = sub.add_parser("tasks", help="operator: file work")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True)
    tc = common(tsub.add_parser("create"))
    tc.add_argument("--space", required=True)
    tc.add_argument("--title", required=True)
    tc.add_argument("--body")
    tc.add_argument("--pool", help="enqueue at once on this pool")
    tc.add_argument("--workflow")
    tc.add_argument("--max-attempts", type=int)
    tc.add_argument("--properties", help="a JSON object")
    tc.set_defaults(func=guarded(tasks_create))
    tl = common(tsub.add_parser("list", help="a space's tasks, newest first (one page)"))
    tl.add_argument("--space", required=True)
    tl.add_argument("--status")
    tl.add_argument("--limit", type=int, default=50)
    tl.set_defaults(func=guarded(tasks_list))
    tg = common(tsub.add_parser("get"))
    tg.add_argument("id")
    tg.set_defaults(func=guarded(tasks_get))

    spaces = sub.add_parser("spaces", help="admin: spaces")
    ssub = spaces.add_subparsers(dest="spaces_command", required=True)
    sc = common(ssub.add_parser("create"))
    sc.add_argument("--key", required=True)
    sc.add_argument("--name", required=True)
    sc.add_argument("--max-active", type=int)
    sc.set_defaults(func=guarded(spaces_create))

    pools = sub.add_parser("pools", help="admin: pools")
    psub = pools.add_subparsers(dest="pools_command", required=True)
    pc = common(psub.add_parser("create"))
    pc.add_argument("--name", required=True)
    pc.add_argument("--space", required=True)
    pc.add_argument("--kind", choices=["agent", "classifier", "command"], default="command")
    pc.add_argument("--max-active", type=int)
    pc.add_argument("--renew-seconds", type=int)
    pc.add_argument("--grace-seconds", type=int)
    pc.add_argument("--toleration-seconds", type=int)
    pc.add_argument("--on-expiry", choices=["requeue", "fail"])
    pc.add_argument("--model", help="agent pools (required there): the model")
    pc.add_argument("--effort", help="agent pools: the effort")
    pc.add_argument("--classifier", help="classifier pools (required there): {input, output}")
    pc.set_defaults(func=guarded(pools_create))
    add_pool_commands(psub, ssub, common)

    tokens = sub.add_parser("tokens", help="admin: tokens")
    kc = common(tokens.add_subparsers(dest="tokens_command", required=True).add_parser("create"))
    kc.add_argument("--name", required=True)
    kc.add_argument("--kind", choices=["operator", "worker"], required=True)
    kc.add_argument("--role", choices=["read", "member", "admin"])
    kc.add_argument("--spaces", nargs="+")
    kc.add_argument("--pools", nargs="+")
    kc.set_defaults(func=guarded(tokens_create))

    from tenure_cli.commands.detail import add_detail_commands

    add_detail_commands(wsub, lsub, common)

    from tenure_cli.commands.graph import add_graph_commands

    add_graph_commands(sub, lsub, tsub, tc, common)

    from tenure_cli.commands.autonomy import add_autonomy_commands

    add_autonomy_commands(wsub, tsub, common)
