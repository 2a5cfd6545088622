"""The operator board: one page at `/board`, and who the caller is."""

from __future__ import annotations

import base64
import functools
import hashlib
from importlib import resources
from typing import Any

from aws_lambda_powertools.event_handler import Response
from typing_extensions import TypedDict

from tenure.api.routes import BASE, ROUTES
from tenure.api.surface import actor, app, json_answer, op, svc

# The page's stylesheet and script are inlined where these markers stand, so the board is one
# response with nothing fetched from elsewhere; the policy admits exactly those two by hash.
_STYLE_MARK = '<link rel="stylesheet" href="board.css">'
_SCRIPT_MARK = '<script src="board.js"></script>'
# The script's parts, in the order they are inlined: one function that board.js opens and
# board-task.js closes, split by what each part draws. They make the page's one script, so its
# one hash still admits it all.
_SCRIPTS = ("board.js", "board-columns.js", "board-lease.js", "board-task.js")


class Whoami(TypedDict):  # open, as it always was: documents the answer only
    kind: str
    role: str | None
    spaces: list[str] | None


# Registered by hand rather than with `op`: its answer is a page, documented as text/html.
@app.route(
    "/board",
    "GET",
    responses={
        200: {
            "description": "the board's page, its stylesheet and script inlined",
            "content": {"text/html": {"schema": {"type": "string"}}},
        }
    },
    description=f"Who may call it: {ROUTES[('GET', '/board')]}",
    security=None,
)
def board() -> Response[Any]:
    page, policy = _page()
    blobs = svc().artifacts.blobs
    if blobs is not None:  # a large attachment's download follows the API's redirect there
        policy = policy.replace("connect-src 'self'", f"connect-src 'self' {blobs.origin()}")
    return Response(
        status_code=200,
        content_type="text/html; charset=utf-8",
        body=page,
        headers={
            "Content-Security-Policy": policy,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


@op("GET", f"{BASE}/whoami", 200, Whoami)
def whoami() -> Response[Any]:
    caller = actor()
    spaces = list(caller.spaces) if caller.spaces is not None else None
    return json_answer(Whoami(kind=caller.kind, role=caller.role, spaces=spaces))


@functools.cache
def _page() -> tuple[str, str]:
    """The page with its CSS and JS inlined, and the content security policy that admits them."""
    folder = resources.files("tenure.api").joinpath("board")
    html = folder.joinpath("index.html").read_text(encoding="utf-8")
    css = folder.joinpath("board.css").read_text(encoding="utf-8")
    js = "".join(folder.joinpath(name).read_text(encoding="utf-8") for name in _SCRIPTS)
    html = html.replace(_STYLE_MARK, f"<style>{css}</style>")
    html = html.replace(_SCRIPT_MARK, f"<script>{js}</script>")
    policy = "; ".join(
        [
            "default-src 'none'",
            "connect-src 'self'",
            "img-src 'self' data:",
            f"style-src {_digest(css)}",
            f"script-src {_digest(js)}",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return html, policy


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
