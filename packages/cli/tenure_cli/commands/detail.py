"""A lease's detail: `tenure worker attach` from inside a job; `tenure leases logs`,
`attachments`, `download` and `exec-target` for an operator."""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from tenure_worker.client import Answer, Client, _api_error

from tenure_cli.common import (
    Groups,
    UsageError,
    guarded,
    lease_client,
    operator_client,
    output_option,
    positive,
    printable,
    service_options,
    show,
)
from tenure_cli.listing import fetch, list_options, show_list

INLINE_BYTES = 1024 * 1024  # the service takes files up to this inline (content_base64)
FOLLOW_EVERY_S = 2.0
TERMINAL = {"completed", "failed", "cancelled", "lost", "killed"}
ATTACH_CHECK = "see what the lease holds (`tenure leases attachments ID`) before attaching it again"


# ------------------------------------------------------------------------ inside a job


def worker_attach(args: argparse.Namespace) -> int:
    client, lease_id, token = lease_client()
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"{path} is not a file")
    size = path.stat().st_size
    content_type = args.content_type or mimetypes.guess_type(path.name)[0]
    body: dict[str, Any] = {
        "filename": path.name,
        "content_type": content_type or "application/octet-stream",
        "kind": args.kind,
        "byte_size": size,
    }
    if size <= INLINE_BYTES:
        body["content_base64"] = base64.b64encode(path.read_bytes()).decode()
    _, answer = client.call("POST", f"/leases/{lease_id}/attachments", body, token)
    upload = answer.get("upload")
    if upload:
        _put(upload["url"], upload["headers"], path)
    return show(answer["attachment"], args)


def _put(url: str, headers: dict[str, str], path: Path) -> None:
    """The presigned PUT: exactly the signed headers, no bearer token (S3 is not Tenure)."""
    with open(path, "rb") as data:
        request = urllib.request.Request(url, data=data, method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=600) as resp:
                resp.read()
        except urllib.error.HTTPError as err:
            refused = f"the upload was refused: HTTP {err.code} {err.read()[:200]!r}"
            raise UsageError(refused) from err


# --------------------------------------------------------------------------- operators


def leases_logs(args: argparse.Namespace) -> int:
    client = operator_client(args)
    query: dict[str, Any] = {}
    if args.container:
        query["container"] = args.container
    if args.since:
        query["since"] = args.since
    seen: set[tuple[str, str, str, str]] = set()
    last: str | None = None
    cursor: str | None = None
    while True:
        page_query = dict(query)
        if cursor:
            page_query["cursor"] = cursor
        elif last:
            page_query["since"] = last
        elif args.tail is not None:
            page_query["tail"] = args.tail  # the first page only; --follow goes on from it
        _, page = client.call("GET", f"/leases/{args.id}/logs?{urlencode(page_query)}")
        if page.get("truncated"):
            print(f"(earlier lines left out: --tail {args.tail})", file=sys.stderr)
        fresh = [e for e in page["events"] if _key(e) not in seen]
        for event in fresh:
            _print_line(event, args)
        if fresh:
            # Lines of the last millisecond printed are remembered: `since` repeats them.
            last = fresh[-1]["timestamp"]
            seen = {_key(e) for e in page["events"] if e["timestamp"] == last} | {
                _key(e) for e in fresh if e["timestamp"] == last
            }
        cursor = page.get("next_cursor")
        if cursor:
            continue
        if not args.follow:
            return 0
        _, lease = client.call("GET", f"/leases/{args.id}")
        if lease["state"] in TERMINAL and not fresh:
            return 0
        time.sleep(FOLLOW_EVERY_S)


def _key(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return (event["timestamp"], event["container"], event["stream"], event["message"])


def _print_line(event: dict[str, Any], args: argparse.Namespace) -> None:
    if args.output == "json":
        print(json.dumps(event), flush=True)
        return
    where = event["container"] + ("!" if event["stream"] == "stderr" else "")
    print(printable(f"{event['timestamp']} {where:<8} {event['message']}"), flush=True)


def leases_attachments(args: argparse.Namespace) -> int:
    path = f"/leases/{args.id}/attachments"
    listed = fetch(operator_client(args), path, {}, "attachments", args)
    cols = ["id", "kind", "filename", "content_type", "byte_size", "created_at"]
    return show_list(listed, args, cols)


def leases_download(args: argparse.Namespace) -> int:
    client = operator_client(args)
    answer = _get_no_redirect(client, f"/leases/{quote(args.id)}/attachments/{quote(args.aid)}")
    if answer.status == 302:
        location = {k.lower(): v for k, v in answer.headers.items()}["location"]
        with urllib.request.urlopen(location, timeout=600) as resp:  # presigned: no token
            data = resp.read()
    elif answer.status >= 400:
        raise _api_error(answer)
    else:
        data = answer.body
    if args.to == "-":
        sys.stdout.buffer.write(data)
        return 0
    if args.to:
        target = Path(args.to)
        target.write_bytes(data)
    else:
        target = Path(_filename(client, args.id, args.aid))
        try:
            # Its own name, which its sender chose: a file already there is left as it is.
            with target.open("xb") as out:
                out.write(data)
        except FileExistsError:
            raise UsageError(
                f"{printable(str(target))} exists in this directory; give --to PATH to write "
                "it there (or over it), or --to - for stdout"
            ) from None
    if args.output == "json":
        print(json.dumps({"path": str(target), "bytes": len(data)}))
    else:
        print(printable(f"{target} ({len(data)} bytes)"))
    return 0


def leases_exec_target(args: argparse.Namespace) -> int:
    _, answer = operator_client(args).call("GET", f"/leases/{args.id}/exec_target")
    return show(answer, args)


def _filename(client: Client, lease_id: str, attachment_id: str) -> str:
    """The name to write the attachment under in the working directory: its filename's last
    part, or its id where that names no file of its own (`..`, empty, control characters)."""
    _, answer = client.call("GET", f"/leases/{lease_id}/attachments")
    for attachment in answer["attachments"]:
        if attachment["id"] == attachment_id:
            name = Path(str(attachment["filename"])).name
            if name not in ("", ".", "..") and printable(name) == name and "\n" not in name:
                return name
    return attachment_id


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect goes to S3: it must not carry the bearer token there.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _get_no_redirect(client: Client, path: str) -> Answer:
    request = urllib.request.Request(
        client.base + path, headers={"authorization": f"Bearer {client.token}"}
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=client.timeout) as resp:
            return Answer(resp.status, dict(resp.headers.items()), resp.read())
    except urllib.error.HTTPError as err:
        return Answer(err.code, dict(err.headers.items()) if err.headers else {}, err.read())


# ---------------------------------------------------------------------------- parsers


def add_commands(groups: Groups) -> None:
    attach = groups["worker"].add_parser("attach", help="inside a job: attach a file to its lease")
    attach.add_argument("file", help="the file to attach")
    attach.add_argument("--kind", default="file", help="what it is: file, report, log…")
    attach.add_argument("--content-type", help="default: guessed from the file name")
    output_option(attach)
    attach.set_defaults(func=guarded(worker_attach, ATTACH_CHECK))

    lsub = groups["leases"]
    logs = service_options(lsub.add_parser("logs", help="print what a lease's job printed"))
    logs.add_argument("id", help="the lease's id")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until it ends")
    logs.add_argument("--container", help="only the lines of this container")
    logs.add_argument("--tail", type=positive, help="only the last N lines (1 or more)")
    logs.add_argument("--since", help="an ISO 8601 time")
    logs.set_defaults(func=guarded(leases_logs))
    atts = service_options(lsub.add_parser("attachments", help="list a lease's attachments"))
    atts.add_argument("id", help="the lease's id")
    list_options(atts, "attachments")
    atts.set_defaults(func=guarded(leases_attachments))
    down = service_options(lsub.add_parser("download", help="fetch one attachment's bytes"))
    down.add_argument("id", help="the lease's id")
    down.add_argument("aid", help="the attachment's id")
    down.add_argument("--to", help="file to write (default: its filename; - for stdout)")
    down.set_defaults(func=guarded(leases_download))
    target = service_options(lsub.add_parser("exec-target", help="where a lease runs"))
    target.add_argument("id", help="the lease's id")
    target.set_defaults(func=guarded(leases_exec_target))
