"""One API Gateway v2 event through an ASGI app, in-process, and its answer as a Lambda result.

The SDK's streamable HTTP transport is an ASGI app; the API function gets one event and owes
one result. With JSON responses and no sessions each request is one complete exchange, so the
bridge only builds the scope, hands over the body once, and gathers what the app sends.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


# The headers whose media types the SDK's transport compares as written.
MEDIA_TYPE_HEADERS = ("content-type", "accept")


def media_types_in_lower_case(event: dict[str, Any]) -> dict[str, Any]:
    """`event` with the media types of Content-Type and Accept lower-cased, parameters as
    sent. Type and subtype are case-insensitive (RFC 9110), but the SDK's transport matches
    `application/json` letter for letter and refused `Application/JSON` with a 415."""
    headers = dict(event.get("headers") or {})
    for name, value in list(headers.items()):
        if str(name).lower() in MEDIA_TYPE_HEADERS:
            headers[name] = ",".join(_lower_type(part) for part in str(value).split(","))
    return {**event, "headers": headers}


def _lower_type(media: str) -> str:
    kind, semicolon, parameters = media.partition(";")
    return kind.lower() + semicolon + parameters


def scope_of(event: dict[str, Any]) -> dict[str, Any]:
    """The ASGI HTTP scope an API Gateway v2 (payload 2.0) event describes."""
    http = event.get("requestContext", {}).get("http", {})
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    host = headers.get("host", "localhost")
    path = str(event.get("rawPath") or http.get("path") or "/")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": str(http.get("method") or "GET").upper(),
        "scheme": headers.get("x-forwarded-proto", "https"),
        "path": path,
        "raw_path": path.encode(),
        "query_string": str(event.get("rawQueryString") or "").encode(),
        "root_path": "",
        # HTTP header values are Latin-1 on the wire; what API Gateway decoded past it is
        # replaced rather than failing the request.
        "headers": [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in headers.items()
        ],
        "server": (host.split(":")[0], 443),
        "client": (str(http.get("sourceIp") or "0.0.0.0"), 0),
    }


def body_of(event: dict[str, Any]) -> bytes:
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(raw)
    return str(raw).encode()


def run(app: ASGIApp, event: dict[str, Any]) -> dict[str, Any]:
    """Drive `app` for the one request in `event`; answers the Lambda proxy result.

    Lambda's Python runtime calls handlers on a thread with no event loop; a host that already
    runs one on this thread (an async test harness, a browser driver) gets the exchange on a
    thread of its own instead of "Already running asyncio in this thread"."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(_exchange, app, event)
    with ThreadPoolExecutor(max_workers=1) as own:
        return own.submit(anyio.run, _exchange, app, event).result()


async def _exchange(app: ASGIApp, event: dict[str, Any]) -> dict[str, Any]:
    body = body_of(event)
    answered = anyio.Event()
    status = 500
    headers: dict[str, str] = {}
    chunks: list[bytes] = []
    sent_body = False

    async def receive() -> Message:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the answer is complete, as a real one would.
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for key, value in message.get("headers", []):
                name, text = key.decode("latin-1").lower(), value.decode("latin-1")
                headers[name] = f"{headers[name]}, {text}" if name in headers else text
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                answered.set()

    try:
        await app(scope_of(event), receive, send)
    finally:
        answered.set()
    return result(status, headers, b"".join(chunks))


def result(status: int, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
    """An API Gateway proxy result; a body that is not UTF-8 travels base64-encoded."""
    headers = {k: v for k, v in headers.items() if k not in ("content-length", "connection")}
    try:
        return {"statusCode": status, "headers": headers, "body": raw.decode("utf-8")}
    except UnicodeDecodeError:
        encoded = base64.b64encode(raw).decode()
        return {"statusCode": status, "headers": headers, "body": encoded, "isBase64Encoded": True}
