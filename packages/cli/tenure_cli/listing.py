"""What every list command shares: `--limit`, `--cursor` and `--all` on any route whose answer
carries `next_cursor`, lists gathered over several spaces or pools, and the one JSON shape a
list prints (`{"<things>": [...], "next_cursor": ...}`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from tenure_worker.client import ApiError, Client

from tenure_cli.common import FAILED, OK, UsageError, positive, say, table

# `--all` follows next_cursor at most this many pages: 100 pages of the largest page a route
# gives (100) is 10,000 rows, past which a terminal or a script is better served by a filter.
MAX_PAGES = 100
# A list gathered over the visible spaces or pools reads at most this many of them: each is
# one request (or a few pages), and an instance with more is better listed one space at a time.
MAX_TARGETS = 100


@dataclass
class Listed:
    """Rows of one kind (`key`: "leases", "pools"…), the cursor of the page after them (None:
    there is none), and why the command stopped short of what it was asked (None: it did not)."""

    key: str
    rows: list[dict[str, Any]]
    next_cursor: str | None = None
    cut: str | None = None


def list_options(p: argparse.ArgumentParser, what: str, all_help: str | None = None) -> None:
    """--limit, --cursor, --all: what every list command takes."""
    p.add_argument(
        "--limit", type=positive, help=f"{what} on a page (default: the service's, often 50)"
    )
    pages = p.add_mutually_exclusive_group()
    pages.add_argument("--cursor", help="start from this page (a next_cursor an answer gave)")
    pages.add_argument(
        "--all",
        action="store_true",
        help=all_help or f"every page, following next_cursor (at most {MAX_PAGES} pages)",
    )


def _path(path: str, params: dict[str, Any]) -> str:
    given = {k: v for k, v in params.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


def fetch(
    client: Client,
    path: str,
    params: dict[str, Any],
    key: str,
    args: argparse.Namespace,
    every_page: bool | None = None,
) -> Listed:
    """One page of `path` (from --cursor), or with --all (or `every_page`) every page,
    following next_cursor until it is null or MAX_PAGES were read."""
    follow = getattr(args, "all", False) if every_page is None else every_page
    params = {**params, "limit": getattr(args, "limit", None)}
    cursor = getattr(args, "cursor", None)
    rows: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        _, answer = client.call("GET", _path(path, {**params, "cursor": cursor}))
        rows += answer[key]
        cursor = answer.get("next_cursor")
        if not cursor or not follow:
            return Listed(key, rows, cursor)
    cut = (
        f"stopped after {MAX_PAGES} pages ({len(rows)} {key}); "
        f"go on with --cursor {cursor}, or narrow the list"
    )
    return Listed(key, rows, cursor, cut)


def gather(
    client: Client,
    targets: list[tuple[str, dict[str, Any]]],
    key: str,
    args: argparse.Namespace,
    what: str,
) -> Listed:
    """Every page of each (path, params) in `targets`, as one list: at most MAX_TARGETS of
    them, and no more than --limit rows in all. It has no cursor of its own (next_cursor is
    null); `what` names the targets and how to narrow them, for the message when cut."""
    limit = getattr(args, "limit", None)
    every = argparse.Namespace(limit=None, cursor=None, all=True)
    rows: list[dict[str, Any]] = []
    cut: str | None = None
    for path, params in targets[:MAX_TARGETS]:
        part = fetch(client, path, params, key, every)
        rows += part.rows
        cut = cut or part.cut
        if limit is not None and len(rows) >= limit:
            return Listed(key, rows[:limit], None, cut)
    if len(targets) > MAX_TARGETS:
        cut = f"read the {key} of the first {MAX_TARGETS} of {len(targets)} {what}"
    return Listed(key, rows, None, cut)


def visible_spaces(client: Client) -> list[str]:
    """The keys of every space the token may see (GET /spaces, every page)."""
    every = argparse.Namespace(limit=None, cursor=None, all=True)
    try:
        listed = fetch(client, "/spaces", {}, "spaces", every)
    except ApiError as err:
        if err.status == 404 and err.code == "not_found":  # a service older than GET /spaces
            raise UsageError("this service cannot list its spaces: give --space") from err
        raise
    return [str(space["key"]) for space in listed.rows]


def no_cursor_without(args: argparse.Namespace, option: str) -> None:
    """A list gathered over several spaces or pools has no cursor to start from."""
    if getattr(args, "cursor", None):
        raise UsageError(f"--cursor pages one list: give {option} with it")


def show_list(
    listed: Listed,
    args: argparse.Namespace,
    cols: list[str],
    rows: list[dict[str, Any]] | None = None,
) -> int:
    """`-o json`: `{"<key>": [...], "next_cursor": ...}`, the records as the service gave them;
    `-o table`: `rows` (the records made fit for columns; default: the records), and on stderr
    how to get the rest. A list cut short by the CLI's own bound says so and exits 1."""
    if args.output == "json":
        print(json.dumps({listed.key: listed.rows, "next_cursor": listed.next_cursor}, indent=2))
    else:
        table(listed.rows if rows is None else rows, args, cols)
        if listed.next_cursor and not listed.cut:
            say(
                f"({len(listed.rows)} shown, more exist: --all for every page, "
                f"or --cursor {listed.next_cursor})",
                err=True,
            )
    if listed.cut:
        say(f"error: truncated: {listed.cut}", err=True)
        return FAILED
    return OK
