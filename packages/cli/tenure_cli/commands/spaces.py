"""`tenure spaces list`: every space the token may see, by key, one page or all of them."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlencode

from tenure_cli.common import Groups, guarded, operator_client, service_options, show, table

# `--all` follows next_cursor at most this many pages (100 spaces a page).
MAX_PAGES = 1000


def spaces_list(args: argparse.Namespace) -> int:
    client = operator_client(args)
    spaces: list[dict[str, Any]] = []
    cursor: str | None = args.cursor
    for _ in range(MAX_PAGES if args.all else 1):
        params: dict[str, Any] = {"limit": 100 if args.all else args.limit}
        if cursor:
            params["cursor"] = cursor
        _, answer = client.call("GET", f"/spaces?{urlencode(params)}")
        spaces.extend(answer["spaces"])
        cursor = answer["next_cursor"]
        if cursor is None:
            break
    if args.output == "json":
        return show({"spaces": spaces, "next_cursor": cursor}, args)
    return table(spaces, args, ["key", "name", "archived", "max_active", "created_at"])


def add_commands(groups: Groups) -> None:
    sl = service_options(
        groups["spaces"].add_parser("list", help="the spaces the token may see, by key")
    )
    sl.add_argument("--limit", type=int, default=50, help="spaces on the page (at most 100)")
    sl.add_argument("--cursor", help="the next_cursor of the page before")
    sl.add_argument("--all", action="store_true", help="every page, following next_cursor")
    sl.set_defaults(func=guarded(spaces_list))
