"""`tenure worker run|complete|fail|heartbeat|payload`, `tenure tasks create|list|get`,
`tenure spaces create` and `tenure tokens create`: thin argparse front ends over the client."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from tenure_worker.client import Client
from tenure_worker.runner import DiskFull, StateDirRefused, Worker, WorkerOptions

from tenure_cli import profiles
from tenure_cli.common import (
    FAILED,
    Groups,
    UsageError,
    chosen_token,
    duration_seconds,
    guarded,
    json_arg,
    lease_client,
    mark_reported,
    noted_usage,
    operator_client,
    output_option,
    positive,
    say,
    service_address,
    service_options,
    show,
)
from tenure_cli.listing import fetch, list_options, show_list
from tenure_cli.stack_record import StackNotRunning, record_path, running_stack

# How to learn whether a create whose answer was lost was made. Tasks have no unique key, so
# filing one again could file it twice; a token's secret is only ever in the answer.
TASK_CHECK = "look for it with `tenure tasks list --space {space}` before filing it again"
TOKEN_CHECK = (
    "run it again with the same --name: already_exists means the first was made and its "
    "secret is lost with the answer (make one under another name), anything else that it was not"
)
SPACE_CHECK = "run it again: already_exists means the first was made"

# ------------------------------------------------------------------- worker commands


def worker_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the command to run after --, e.g. tenure worker run … -- ./job.sh")
    api, job_api = worker_endpoints(args.api, Path(args.data_dir), args.profile)
    token = chosen_token(args)  # refused first when no header could carry it
    if args.token:
        # A long-lived process's arguments are on every local user's process list.
        say(
            "warning: --token puts the worker token on the process list, which every user "
            "of this host can read for as long as the worker runs: give it in TENURE_TOKEN "
            "or a profile's token_file",
            err=True,
        )
    opts = WorkerOptions(
        api=api,
        job_api=job_api,
        token=token,
        pool=args.pool,
        command=command,
        worker_id=args.worker_id,
        state_dir=Path(args.state_dir),
        concurrency=args.concurrency,
        once=args.once,
        kill_grace=args.kill_grace,
        drain_seconds=args.drain_seconds,
        lease_seconds=args.lease_seconds,
    )
    try:
        return Worker(opts).run()
    except StateDirRefused as err:  # not this user's alone, or held by another worker
        raise UsageError(str(err)) from None
    except DiskFull as err:  # its jobs were stopped first and their leases failed
        say(f"error: {err}", err=True)
        return FAILED


def worker_claim(args: argparse.Namespace) -> int:
    """One claim, printed: the lease, its fence and its token (shown this once). Exit 0 with
    nothing printed but a line on stderr when nothing could be claimed."""
    api, _ = worker_endpoints(args.api, Path(args.data_dir), args.profile)
    client = Client(api, chosen_token(args))
    won = client.claim(
        args.pool,
        args.worker_id or f"{socket.gethostname()}-{os.getpid()}",
        wait_seconds=args.wait,
        lease_seconds=args.lease_seconds,
        lease_id=args.lease,
    )
    if won is None:
        print("nothing to claim", file=sys.stderr)
        return 0
    return show({"lease": won.lease, "fence": won.fence, "token": won.token}, args)


def worker_endpoints(
    given: str | None, data_dir: Path, profile_name: str | None = None
) -> tuple[str, str | None]:
    """Where `worker run` claims and reports, and the API its jobs are given: `--api`, else
    TENURE_WORKER_API, else TENURE_API, else the profile's `api`, else the local stack's worker
    endpoint (`worker_api` in `<data-dir>/stack.json`), its jobs then given the stack's `api`.
    A record its stack left behind when it died is refused, not followed to a dead port."""
    for where, chosen in (
        ("--api", given),
        ("TENURE_WORKER_API", os.environ.get("TENURE_WORKER_API")),
        ("TENURE_API", os.environ.get("TENURE_API")),
    ):
        if chosen:
            return service_address(chosen, where), os.environ.get("TENURE_API")
    profile = profiles.load(profile_name)
    if profile is not None and profile.api:
        return service_address(profile.api, profile.where), profile.api
    try:
        stack = running_stack(data_dir)
    except StackNotRunning as gone:
        raise UsageError(
            f"no service address: give --api, set TENURE_WORKER_API or TENURE_API ({gone})"
        ) from None
    if isinstance(stack.get("worker_api"), str):
        return stack["worker_api"], stack.get("api")
    if isinstance(stack.get("api"), str):
        return stack["api"], None
    raise UsageError(
        "no service address: give --api, set TENURE_WORKER_API or TENURE_API, "
        f"or start `tenure local` (its {record_path(data_dir)} names one)"
    )


def worker_complete(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client()
    body: dict[str, Any] = {"outcome": args.outcome}
    details = json_arg(args.details, "--details")
    if details is not None:
        if not isinstance(details, dict):
            raise UsageError("--details must be a JSON object")
        body["details"] = details
    if args.created_task:
        body["created_task_ids"] = args.created_task
    result = json_arg(args.result, "--result")
    if result is not None:
        body["result"] = result
    usage = json_arg(args.usage, "--usage") if args.usage is not None else noted_usage()
    if usage is not None:
        body["usage"] = usage
    answer = client.complete(lease_id, token, body)
    mark_reported()
    return show(answer["lease"], args)


def worker_fail(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client()
    answer = client.fail(lease_id, token, {"error": args.error})
    mark_reported()
    return show(answer["lease"], args)


def worker_heartbeat(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client()
    return show(client.heartbeat(lease_id, token), args)


def worker_payload(args: argparse.Namespace) -> int:
    path = os.environ.get("TENURE_PAYLOAD_FILE")
    if path and Path(path).exists():
        print(Path(path).read_text())
        return 0
    client, lease_id, token = lease_client()
    print(json.dumps(client.payload(lease_id, token), indent=2))
    return 0


# ----------------------------------------------------------------- operator commands


def tasks_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"space": args.space, "title": args.title}
    for key in ("body", "pool", "workflow", "max_attempts"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    # The task graph, and a person's approval before any run.
    for key in ("parent_id", "depends_on", "auto_enqueue_on_ready", "requires_approval"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    # Scheduling controls: claim priority, and how long its pending lease may wait.
    if args.priority is not None:
        body["priority"] = args.priority
    if args.max_run_seconds is not None:
        body["max_run_seconds"] = args.max_run_seconds
    if args.expires_in is not None:
        body["expires_in_seconds"] = duration_seconds(args.expires_in)
    if args.concurrency_key is not None:
        body["concurrency_key"] = args.concurrency_key
    props = json_arg(args.properties, "--properties")
    if props is not None:
        body["properties"] = props
    _, answer = operator_client(args).call("POST", "/tasks", body)
    return show(answer, args)


def tasks_list(args: argparse.Namespace) -> int:
    params = {"space": args.space, "status": args.status}
    listed = fetch(operator_client(args), "/tasks", params, "tasks", args)
    # Each record is {task, lease}, as `tasks get` prints it; a row shows both at once.
    rows = [{**entry["task"], "lease": entry["lease"]} for entry in listed.rows]
    cols = ["key", "status", "title", "lease.state", "lease.pool", "id"]
    return show_list(listed, args, cols, rows)


def tasks_get(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/tasks/{args.id}")
    return show(answer, args)


def spaces_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"key": args.key, "name": args.name}
    if args.max_active is not None:
        body["max_active"] = args.max_active
    _, answer = operator_client(args).call("POST", "/spaces", body)
    return show(answer, args)


def tokens_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "kind": args.kind}
    if args.role:
        body["role"] = args.role
    if args.spaces:
        body["spaces"] = args.spaces
    if args.pools:
        body["pools"] = args.pools
    # Sent as given, 0 too: a 0 dropped would mint a token that never expires.
    if args.expires_in_seconds is not None:
        body["expires_in_seconds"] = args.expires_in_seconds
    _, answer = operator_client(args).call("POST", "/tokens", body)
    # The record `tokens list` shows (a new token was never used nor revoked), and the secret.
    secret = answer.pop("token")
    for key in ("last_used_at", "revoked_at"):
        answer.setdefault(key, None)
    return show({**answer, "token": secret}, args)


# ---------------------------------------------------------------------------- parsers


def add_commands(groups: Groups) -> None:
    _add_worker_commands(groups["worker"])
    _add_task_commands(groups["tasks"])
    _add_space_and_token_commands(groups)


def _add_worker_commands(wsub: Any) -> None:
    run = service_options(
        wsub.add_parser("run", help="claim leases from a pool and run CMD for each")
    )
    run.add_argument("--pool", required=True, help="the pool to claim from")
    run.add_argument("--worker-id", help="default: kept in the state dir, else host-pid")
    run.add_argument(
        "--state-dir", default=".tenure-worker", help="where held leases survive a restart"
    )
    run.add_argument("--concurrency", type=positive, default=1, help="leases held at once")
    run.add_argument("--once", action="store_true", help="run at most one lease, then exit")
    run.add_argument("--kill-grace", type=float, default=10.0, help="SIGTERM → SIGKILL seconds")
    run.add_argument(
        "--drain-seconds",
        type=float,
        default=30.0,
        help="on SIGTERM/Ctrl-C, let running jobs finish this long, then stop them and release "
        "their leases (default 30; a second signal stops at once)",
    )
    run.add_argument("--lease-seconds", type=positive, help="ask for leases this long")
    run.add_argument(
        "--data-dir",
        default=".tenure",
        help="a local stack's data dir: its stack.json names the worker endpoint when no "
        "--api, TENURE_WORKER_API or TENURE_API does",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    run.set_defaults(func=guarded(worker_run))
    claim = service_options(
        wsub.add_parser("claim", help="claim one lease (the next, or --lease ID) and print it")
    )
    claim.add_argument("--pool", required=True, help="the pool to claim from")
    claim.add_argument("--lease", metavar="ID", help="that pending lease or nothing")
    claim.add_argument("--worker-id", help="who holds it (default: host-pid)")
    claim.add_argument("--wait", type=float, default=0, help="seconds to wait (at most 20)")
    claim.add_argument("--lease-seconds", type=positive, help="ask for a lease this long")
    claim.add_argument(
        "--data-dir", default=".tenure", help="a local stack's data dir (its worker endpoint)"
    )
    claim.set_defaults(func=guarded(worker_claim))
    done = wsub.add_parser("complete", help="inside a job: complete its lease")
    done.add_argument(
        "--outcome", choices=["success", "failure"], default="success", help="how the job went"
    )
    done.add_argument("--details", help="a JSON object")
    done.add_argument("--result", help="JSON: what the job produced")
    done.add_argument("--created-task", nargs="+", metavar="ID", help="tasks this lease filed")
    done.add_argument("--usage", help="a JSON object (default: what `worker usage` noted)")
    output_option(done)
    done.set_defaults(func=guarded(worker_complete))
    fail = wsub.add_parser("fail", help="inside a job: fail its lease")
    fail.add_argument("--error", required=True, help="what went wrong, in words")
    output_option(fail)
    fail.set_defaults(func=guarded(worker_fail))
    beat = wsub.add_parser("heartbeat", help="inside a job: renew its lease now")
    output_option(beat)
    beat.set_defaults(func=guarded(worker_heartbeat))
    wsub.add_parser("payload", help="inside a job: print its work bundle").set_defaults(
        func=guarded(worker_payload)
    )


def _add_task_commands(tsub: Any) -> None:
    tc = service_options(tsub.add_parser("create", help="file a task (enqueued with --pool)"))
    tc.add_argument("--space", required=True, help="the space to file it in")
    tc.add_argument("--title", required=True, help="one line")
    tc.add_argument("--body", help="what the task is about")
    tc.add_argument("--pool", help="enqueue at once on this pool")
    tc.add_argument("--workflow", help="a workflow's slug")
    tc.add_argument("--max-attempts", type=int, help="runs before it fails for good")
    tc.add_argument("--properties", help="a JSON object")
    tc.add_argument("--priority", type=int, help="0-9, higher claimed first (default 5)")
    tc.add_argument(
        "--expires-in",
        metavar="DURATION",
        help="cancel its pending lease (queue_timeout) if not claimed within this (90s, 10m)",
    )
    tc.add_argument(
        "--max-run-seconds",
        type=int,
        help="a run held longer is asked to stop and ends timed_out (the pool's, if smaller, wins)",
    )
    tc.add_argument(
        "--concurrency-key",
        metavar="KEY",
        help="count its runs under this key against the pool's max_active_per_key",
    )
    tc.add_argument("--parent", dest="parent_id", metavar="TASK_ID", help="its parent task")
    tc.add_argument(
        "--depends-on", nargs="+", metavar="TASK_ID", help="tasks that must complete first"
    )
    tc.add_argument(
        "--auto-enqueue-on-ready",
        action="store_true",
        default=None,
        help="enqueue it on its pool once its dependencies complete",
    )
    tc.add_argument(
        "--requires-approval",
        action="store_true",
        default=None,
        help="hold it until a member approves it (`tenure tasks approve`)",
    )
    tc.set_defaults(func=guarded(tasks_create, TASK_CHECK))
    tl = service_options(
        tsub.add_parser("list", help="a space's tasks, newest first (one page; --all: every)")
    )
    tl.add_argument("--space", required=True, help="the space")
    tl.add_argument("--status", help="only tasks in this status")
    list_options(tl, "tasks")
    tl.set_defaults(func=guarded(tasks_list))
    tg = service_options(tsub.add_parser("get", help="one task"))
    tg.add_argument("id", help="the task's id or key")
    tg.set_defaults(func=guarded(tasks_get))


def _add_space_and_token_commands(groups: Groups) -> None:
    sc = service_options(groups["spaces"].add_parser("create", help="make a space"))
    sc.add_argument("--key", required=True, help="short and upper-case: task keys begin with it")
    sc.add_argument("--name", required=True, help="its display name")
    sc.add_argument("--max-active", type=int, help="leases running at once in the space")
    sc.set_defaults(func=guarded(spaces_create, SPACE_CHECK))

    kc = service_options(
        groups["tokens"].add_parser("create", help="make a token (its secret is shown once)")
    )
    kc.add_argument("--name", required=True, help="unique: the token's name")
    kc.add_argument("--kind", choices=["operator", "worker"], required=True, help="who holds it")
    kc.add_argument(
        "--role",
        choices=["read", "member", "admin"],
        help="operator tokens: what it may do (default read)",
    )
    kc.add_argument(
        "--spaces",
        nargs="+",
        metavar="KEY",
        help="operator tokens: the spaces it may act in (default all)",
    )
    kc.add_argument(
        "--pools", nargs="+", metavar="POOL", help="worker tokens: the pools it may claim from"
    )
    kc.add_argument(
        "--expires-in-seconds", type=int, help="the token answers 401 after this (default never)"
    )
    kc.set_defaults(func=guarded(tokens_create, TOKEN_CHECK))
